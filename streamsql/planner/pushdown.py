"""The part of a WHERE clause a stream's reader can apply to a decoded batch, before any row
reaches Spark.

Why: a filter that keeps 1-5% of a stream (the seed fraud filter, Nexmark q2) otherwise hands
every decoded row to the JVM, which converts it from Arrow to its own rows only to drop it.
The reader evaluates the pushed conjuncts with pyarrow's compute functions over the whole
batch; Spark still applies the full WHERE afterwards, so a pushed conjunct only has to never
drop a row the WHERE keeps. A conjunct is pushed only where pyarrow's result is Spark's for
every row:

* comparisons (``= <> < <= > >=``) of a column with a literal: an integer column with an
  integer literal, a DOUBLE column with a number (rows whose column is NaN are always kept:
  Spark orders NaN above every number, pyarrow's comparisons are false for it), a string
  column with a string (UTF-8 byte order in both), a boolean column with ``TRUE``/``FALSE``;
* ``column % n`` (an integer column, a positive integer literal) compared as above, with
  Java's remainder (the sign of the dividend) where pyarrow's ``modulo`` floors;
* ``IS NULL``, ``IS NOT NULL``; ``AND`` (each side on its own), ``OR`` (both sides pushed),
  parentheses;
* ``x IN (a, b, …)`` of such comparable literals: the ``OR`` of ``x = a``, ``x = b``, … — Spark's
  IN is that disjunction in three-valued logic (null when ``x`` is null, true on a match, false
  otherwise: the list holds no NULL, which does not translate).

Anything else (functions, casts, arithmetic besides ``%``, pseudo columns, nested types) stays
in Spark alone. The result is a small JSON tree (it travels as a data source option) that
:func:`streamsql.kafka.filters.compile_filter` turns into a pyarrow expression.

:func:`exact_filter` is the stricter question — does the *whole* WHERE translate, giving
Spark's answer for every row? — asked when the reader may run the query's whole stateless step
itself (``kafka/pipe.py``): every conjunct pushed, an ``AND`` inside an ``OR`` whole, and a
DOUBLE comparison keeps its NaN rows only where Spark's does (``>``, ``>=``, ``<>``).
"""

from __future__ import annotations

import json
from typing import Any

from sqlglot import exp

from streamsql import types as t
from streamsql.errors import AnalysisError
from streamsql.planner.expressions import Scope

_COMPARISONS: dict[type[exp.Expr], str] = {
    exp.EQ: "equal", exp.NEQ: "not_equal", exp.LT: "less", exp.LTE: "less_equal",
    exp.GT: "greater", exp.GTE: "greater_equal",
}
#: the comparison with its operands swapped (``5 < x`` is ``x > 5``)
_SWAPPED = {"equal": "equal", "not_equal": "not_equal", "less": "greater", "less_equal": "greater_equal",
            "greater": "less", "greater_equal": "less_equal"}
_INTEGERS = (t.Kind.INTEGER, t.Kind.BIGINT)


def source_filter(where: exp.Expr | None, scope: Scope, columns: list[t.Column]) -> str | None:
    """The pushable conjuncts of ``where`` as the JSON tree the reader compiles, or None.
    ``columns``: the source's declared key and value columns (what a decoded batch holds by
    name); ``scope`` resolves the WHERE's column references as the planner does."""
    if where is None:
        return None
    types = {c.name: c.type for c in columns if c.role in ("key", "value")}
    pushed = [tree for conjunct in _conjuncts(where) if (tree := _predicate(conjunct, scope, types)) is not None]
    if not pushed:
        return None
    return json.dumps(pushed[0] if len(pushed) == 1 else {"op": "and", "args": pushed}, sort_keys=True)


_SQL_COMPARISONS = {"equal": "=", "not_equal": "<>", "less": "<", "less_equal": "<=", "greater": ">",
                    "greater_equal": ">="}


def filter_text(tree_json: str) -> str:
    """A pushed filter (the JSON tree the reader applies) as the SQL condition it stands for:
    what EXPLAIN and ``streamsql topology`` print, rather than the reader's internal tree."""
    return _tree_text(json.loads(tree_json), top=True)


def _tree_text(node: dict[str, Any], top: bool = False) -> str:
    if "column" in node:
        return str(node["column"])
    if "value" in node:
        value = node["value"]
        if isinstance(value, bool):
            return "TRUE" if value else "FALSE"
        if isinstance(value, str):
            return "'" + value.replace("'", "''") + "'"
        return repr(value)
    op, args = node.get("op"), node.get("args", [])
    if op in ("and", "or"):
        text = f" {op.upper()} ".join(_tree_text(a) for a in args)
        return text if top else f"({text})"
    if op == "is_null":
        return f"{_tree_text(args[0])} IS NULL"
    if op == "is_valid":
        return f"{_tree_text(args[0])} IS NOT NULL"
    if op == "java_remainder":
        return f"{_tree_text(args[0])} % {_tree_text(args[1])}"
    if op in _SQL_COMPARISONS:
        return f"{_tree_text(args[0])} {_SQL_COMPARISONS[op]} {_tree_text(args[1])}"
    return json.dumps(node, sort_keys=True)  # a tree this renderer does not know: as it is


def exact_filter(where: exp.Expr | None, scope: Scope, columns: list[t.Column]) -> str | None:
    """The whole of ``where`` as the reader's JSON tree when pyarrow evaluates all of it as
    Spark does (a row the tree keeps is one the WHERE keeps, and the reverse), else None."""
    if where is None:
        return None
    types = {c.name: c.type for c in columns if c.role in ("key", "value")}
    tree = _predicate(where, scope, types, exact=True)
    return None if tree is None else json.dumps(tree, sort_keys=True)


def _conjuncts(node: exp.Expr) -> list[exp.Expr]:
    return _operands(node, exp.And)


def _operands(node: exp.Expr, kind: type[exp.Expr]) -> list[exp.Expr]:
    """The operands of a chain of ``kind`` (AND, OR) nodes in order. A loop, not recursion: a
    chain of thousands of conjuncts is a tree as deep (issue #52)."""
    operands, pending = [], [node]
    while pending:
        current = _unparen(pending.pop())
        if isinstance(current, kind):
            pending += [current.expression, current.this]
        else:
            operands.append(current)
    return operands


def _unparen(node: exp.Expr) -> exp.Expr:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _predicate(node: exp.Expr, scope: Scope, types: dict[str, t.SqlType], exact: bool = False
               ) -> dict[str, Any] | None:
    """``exact``: None unless all of ``node`` translates with Spark's result for every row."""
    node = _unparen(node)
    if isinstance(node, exp.And):
        translated = [_predicate(operand, scope, types, exact) for operand in _operands(node, exp.And)]
        if exact and None in translated:
            return None
        parts = [p for p in translated if p is not None]
        return None if not parts else parts[0] if len(parts) == 1 else {"op": "and", "args": parts}
    if isinstance(node, exp.Or):
        translated = [_predicate(operand, scope, types, exact) for operand in _operands(node, exp.Or)]
        return None if None in translated else {"op": "or", "args": translated}
    if isinstance(node, exp.In):
        if node.args.get("query") or node.args.get("unnest") or node.args.get("field") or not node.expressions:
            return None
        equals = [_predicate(exp.EQ(this=node.this.copy(), expression=v.copy()), scope, types, exact)
                  for v in node.expressions]
        if any(e is None for e in equals):
            return None
        return equals[0] if len(equals) == 1 else {"op": "or", "args": equals}
    if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
        column = _column(node.this, scope, types)
        return None if column is None else {"op": "is_null", "args": [column[0]]}
    if isinstance(node, exp.Not) and isinstance(_unparen(node.this), exp.Is):
        inner = _unparen(node.this)
        assert isinstance(inner, exp.Is)
        column = _column(inner.this, scope, types) if isinstance(inner.expression, exp.Null) else None
        return None if column is None else {"op": "is_valid", "args": [column[0]]}
    op = _COMPARISONS.get(type(node))
    if op is None:
        return None
    lhs, rhs = _unparen(node.this), _unparen(node.expression)
    if isinstance(lhs, (exp.Literal, exp.Boolean, exp.Neg)) and not isinstance(rhs, (exp.Literal, exp.Boolean)):
        lhs, rhs, op = rhs, lhs, _SWAPPED[op]
    operand = _operand(lhs, scope, types)
    if operand is None:
        return None
    tree, kind = operand
    literal = _literal(rhs, kind)
    if literal is None:
        return None
    # Spark orders NaN above every number: NaN > x, NaN >= x and NaN <> x hold, the others do
    # not, where pyarrow's comparisons are false for NaN. A pushed conjunct keeps NaN rows for
    # every comparison (Spark drops the ones it must); an exact tree keeps them where Spark does.
    nan_kept = kind is t.Kind.DOUBLE and (not exact or op in ("greater", "greater_equal", "not_equal"))
    return {"op": op, "args": [tree, literal], "nan_kept": nan_kept}


def _operand(node: exp.Expr, scope: Scope, types: dict[str, t.SqlType]) -> tuple[dict[str, Any], t.Kind] | None:
    """A column, or ``column % n`` of an integer column: its tree and its kind."""
    if isinstance(node, exp.Mod):
        column = _column(_unparen(node.this), scope, types)
        divisor = _literal(_unparen(node.expression), t.Kind.BIGINT)
        if column is None or column[1] not in _INTEGERS or divisor is None or divisor["value"] <= 0:
            return None
        return {"op": "java_remainder", "args": [column[0], divisor]}, t.Kind.BIGINT
    return _column(node, scope, types)


def _column(node: exp.Expr, scope: Scope, types: dict[str, t.SqlType]) -> tuple[dict[str, Any], t.Kind] | None:
    if not isinstance(node, exp.Column) or not isinstance(node.this, exp.Identifier):
        return None
    qualifier = node.table if node.args.get("table") is not None else None
    try:
        resolved = scope.resolve(node.this.name, qualifier or None, node)
    except AnalysisError:
        return None
    sql_type = types.get(resolved.name)
    kind = getattr(sql_type, "kind", None)
    if not isinstance(sql_type, t.Primitive) or kind not in (*_INTEGERS, t.Kind.DOUBLE, t.Kind.STRING, t.Kind.BOOLEAN):
        return None
    return {"column": resolved.name}, kind


def _literal(node: exp.Expr, kind: t.Kind) -> dict[str, Any] | None:
    """A literal comparable with a column of ``kind`` exactly as Spark compares them."""
    negative = isinstance(node, exp.Neg)
    if negative:
        node = _unparen(node.this)
    if isinstance(node, exp.Boolean):
        return {"value": bool(node.this)} if kind is t.Kind.BOOLEAN and not negative else None
    if not isinstance(node, exp.Literal):
        return None
    text = node.this
    if node.is_string:
        return {"value": text} if kind is t.Kind.STRING and not negative else None
    if kind in _INTEGERS and text.isdigit():
        value = -int(text) if negative else int(text)
        return {"value": value} if -2**63 <= value < 2**63 else None
    if kind is t.Kind.DOUBLE:
        try:
            value_f = float(text)
        except ValueError:
            return None
        return {"value": -value_f if negative else value_f}
    return None
