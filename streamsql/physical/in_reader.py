"""When a stateless query's step can run in its reader's tasks (``kafka/pipe.py``), and the
programs those tasks evaluate.

The step moves there only where pyarrow computes, for every row, what Spark computes from the
same compiled Spark SQL (the planner's ``OutputColumn.sql``): the translation reads that SQL,
not the ksqlDB text, and applies Spark's own typing to it —

* a column of the decoded batch (the source's columns, ROWTIME, ROWPARTITION, ROWOFFSET), any
  type, passed as it is;
* ``+ - *`` over INT, BIGINT and DOUBLE columns and numeric literals, and decimals: an integer
  literal is INT (BIGINT past 32 bits), ``0.908`` or ``CAST(0.908 AS DECIMAL(3,3))`` a
  DECIMAL(p,s). Spark's coercion (``spark.sql.ansi.enabled=false``, as the session runs):
  integers widen to the wider one and wrap on overflow like pyarrow's unchecked kernels; with a
  DOUBLE everything is a double (the same IEEE operation); with a DECIMAL an INT is
  DECIMAL(10,0) and a BIGINT DECIMAL(20,0), and the result is DECIMAL(p1+p2+1, s1+s2) for
  ``*``, DECIMAL(max(p1-s1, p2-s2)+max(s1,s2)+1, max(s1,s2)) for ``+ -`` — the rules of
  pyarrow's decimal kernels too. A result past 38 digits (where Spark reduces the scale) is not
  translated.

Everything else — functions, casts of columns, division, CASE, struct fields, string
concatenation — keeps Spark's plan.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlglot import exp, parse_one
from sqlglot.errors import ParseError

from streamsql import types as t

if TYPE_CHECKING:
    from streamsql.catalog import Source
    from streamsql.planner.planner import QueryPlan

#: the pseudo columns a decoded batch holds besides the source's own, and their types
_PSEUDO_COLUMNS = {"ROWTIME": "int64", "ROWPARTITION": "int32", "ROWOFFSET": "int64"}
_NUMERIC = {t.Kind.INTEGER: "int32", t.Kind.BIGINT: "int64", t.Kind.DOUBLE: "float64"}
_OPS: dict[type[exp.Expr], str] = {exp.Mul: "multiply", exp.Add: "add", exp.Sub: "subtract"}
_MAX_PRECISION = 38

Program = dict[str, Any]


def runs_in_reader(plan: QueryPlan, target: Source) -> bool:
    """Whether the reader's tasks compute ``plan`` exactly as Spark would and write it with
    the Kafka sink to ``target`` themselves: a stream read alone, written to a stream's topic, no TIMESTAMP
    column on either side (a record's time is its own), a WHERE that translates whole
    (``pushdown.exact_filter``) or none, and every output column translated
    (:func:`column_program`). PARTITION BY, table functions, LIMIT and windowed keys keep
    Spark's plan."""
    if target.is_table or target.timestamp_column or target.window_type:
        return False
    return reads_alone(plan) and plan.limit is None and reader_columns(plan) is not None


def reads_alone(plan: QueryPlan) -> bool:
    """Whether ``plan``'s rows are its stream's records one by one, each kept or dropped by a WHERE
    that translates whole (``pushdown.exact_filter``): a stream read alone (no join, not a table,
    not windowed), the record's own time (no TIMESTAMP column), no PARTITION BY, table functions
    or keys taken from the value. What a reader's task (:func:`runs_in_reader`) and the engine's
    own push queries (``runtime/push.py``) both need before translating the columns."""
    source = plan.source
    if (getattr(source, "join", None) is not None or source.is_table or source.window_type
            or source.timestamp_column):
        return False
    if plan.rowtime_sql != t.ROWTIME or plan.repartitioned or plan.table_functions or plan.keys_from_value:
        return False
    return plan.where is None or plan.exact_filter is not None


def reader_columns(plan: QueryPlan, types: dict[str, str] | None = None) -> tuple[tuple[str, Program], ...] | None:
    """(output name, program) per output column, or None if one does not translate; ``types``:
    the input columns' Arrow types (default: the decoded batch's, :func:`decoded_types`)."""
    types = decoded_types(plan) if types is None else types
    out = []
    for c in plan.columns:
        program = column_program(c.sql, types)
        if program is None:
            return None
        out.append((c.name, program))
    return tuple(out)


def decoded_types(plan: QueryPlan) -> dict[str, str]:
    """Column name → the type the translation knows it by (``other`` for the rest)."""
    types = {c.name: _NUMERIC.get(c.type.kind, "other") if isinstance(c.type, t.Primitive) else "other"
             for c in plan.source.columns}
    return {**types, **_PSEUDO_COLUMNS}


def column_program(sql: str, types: dict[str, str]) -> Program | None:
    """The program of one compiled Spark SQL expression, or None."""
    try:
        node = parse_one(sql, read="spark")
    except ParseError:
        return None
    return _translate(node, types, top=True)


def _translate(node: exp.Expr, types: dict[str, str], top: bool = False) -> Program | None:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Column) and isinstance(node.this, exp.Identifier) and not node.args.get("table"):
        name = node.this.name
        kind = types.get(name)
        if kind is None or (kind == "other" and not top):
            return None
        return {"column": name, "type": kind}
    if isinstance(node, (exp.Literal, exp.Neg, exp.Cast, exp.TryCast)):
        return _literal(node)
    op = _OPS.get(type(node))
    if op is None:
        return None
    left, right = _translate(node.this, types), _translate(node.expression, types)
    if left is None or right is None:
        return None
    operands = [operand_type(left, right["type"]), operand_type(right, left["type"])]
    result = _result_type(op, *operands)
    if result is None:
        return None
    # decimals as Spark casts each operand; integers widened to the result, or all doubles
    casts = operands if result.startswith("decimal(") else [result, result]
    return {"op": op, "args": [left, right], "cast": casts, "type": result}


def operand_type(arg: Program, other: str) -> str:
    """The type an operand takes beside ``other``: with a DECIMAL, an integer literal is the
    DECIMAL of its digits (Spark's ``literalPickMinimumPrecision``), an integer column
    DECIMAL(10,0) or DECIMAL(20,0)."""
    kind = str(arg["type"])
    if other.startswith("decimal(") and kind in ("int32", "int64"):
        if "value" in arg:
            return f"decimal({len(str(abs(int(arg['value']))))},0)"
        return "decimal(10,0)" if kind == "int32" else "decimal(20,0)"
    return kind


def _literal(node: exp.Expr) -> Program | None:
    """A numeric literal with Spark's type: INT/BIGINT, DECIMAL(p,s) (written ``0.908`` or
    cast to a DECIMAL it fits exactly), or DOUBLE (an exponent)."""
    cast_to = None
    if isinstance(node, (exp.Cast, exp.TryCast)):
        to = node.args.get("to")
        if not isinstance(to, exp.DataType) or to.this != exp.DataType.Type.DECIMAL or len(to.expressions) != 2:
            return None
        cast_to = tuple(int(p.this.this) for p in to.expressions)
        node = node.this
    negative = isinstance(node, exp.Neg)
    if negative:
        node = node.this
    if not isinstance(node, exp.Literal) or node.is_string:
        return None
    text = node.this
    sign = "-" if negative else ""
    if text.isdigit() and cast_to is None:
        value = int(sign + text)
        kind = "int32" if -2**31 <= value < 2**31 else "int64" if -2**63 <= value < 2**63 else None
        return None if kind is None else {"value": value, "type": kind}
    whole, dot, fraction = text.partition(".")
    if not (whole.isdigit() or whole == "") or not (fraction.isdigit() or fraction == "") or not (whole or fraction):
        if cast_to is None and _is_double(text):
            return {"value": float(sign + text), "type": "float64"}
        return None
    digits = whole.lstrip("0") + fraction
    precision, scale = max(len(digits), len(fraction), 1), len(fraction)
    if cast_to is not None:
        p, s = cast_to
        if scale > s or precision - scale > p - s or p > _MAX_PRECISION:
            return None
        precision, scale = p, s
    if not dot and cast_to is None:
        return None
    return {"value": sign + text, "type": f"decimal({precision},{scale})"}


def _is_double(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return "e" in text.lower()


def _decimal(kind: str) -> tuple[int, int] | None:
    if kind.startswith("decimal("):
        p, s = kind[len("decimal("):-1].split(",")
        return int(p), int(s)
    return {"int32": (10, 0), "int64": (20, 0)}.get(kind)


def _result_type(op: str, left: str, right: str) -> str | None:
    """Spark's result type of ``left op right``, or None where the translation stops."""
    if "other" in (left, right):
        return None
    if "float64" in (left, right):
        return "float64"
    if left in ("int32", "int64") and right in ("int32", "int64"):
        return "int64" if "int64" in (left, right) else "int32"
    a, b = _decimal(left), _decimal(right)
    if a is None or b is None:
        return None
    (p1, s1), (p2, s2) = a, b
    if op == "multiply":
        precision, scale = p1 + p2 + 1, s1 + s2
    else:
        scale = max(s1, s2)
        precision = max(p1 - s1, p2 - s2) + scale + 1
    return None if precision > _MAX_PRECISION else f"decimal({precision},{scale})"
