"""``x IN (a, b, ...)`` with ksqlDB's typing rules.

ksqlDB checks every list item against the (running, widened) type of the value at statement time
and converts literals to that type first: ``'TrUe'`` against a BOOLEAN is ``true``, ``'4.000'``
against a DOUBLE is ``4.0``, ``10.30`` against a STRING is ``'10.30'``, and string literals inside
``ARRAY[...]``/``MAP(...)``/``STRUCT(...)`` constructors are converted element by element. Spark
would instead coerce the whole list to a common type (comparing ``1.0`` with ``'1'`` as strings),
so the conversions are done here and the comparison text is built from the converted items.
Structs compare by field name: a constructor with a field the value lacks never matches, one
missing a field compares it as null (ksqlDB compares with Java ``equals``, so nulls inside
complex values are equal).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from streamsql import types as t
from streamsql.errors import AnalysisError
from streamsql.functions.compiled import literal_as

if TYPE_CHECKING:
    from streamsql.planner.expressions import Compiled, ExpressionCompiler

K = t.Kind
_COMPLEX = (K.ARRAY, K.MAP, K.STRUCT)


class _NeverMatches(Exception):
    """A list item that cannot equal the value (a STRUCT constructor with an unknown field)."""


def compile_in(compiler: ExpressionCompiler, node: exp.In) -> Compiled:
    from streamsql.functions.compiled import Compiled

    value = compiler.compile(node.this)
    running = value.type
    items: list[Compiled] = []
    for item in node.expressions:
        if isinstance(item, exp.Null):
            continue  # 'x = NULL' is never true
        try:
            converted = _convert(compiler, item, running)
        except _NeverMatches:
            continue
        if running is not None and converted.type is not None:
            if not _comparable(running, converted.type):
                raise AnalysisError(f"operator does not exist: {running} = {converted.type} ({render(item)})\n"
                                    "Hint: You might need to add explicit type casts.")
            running = _wider(running, converted.type)
        items.append(converted)
    if not items:
        return Compiled(f"(CASE WHEN {value.sql} IS NULL THEN NULL ELSE FALSE END)", t.BOOLEAN)
    if value.type is not None and value.type.kind in _COMPLEX:
        v = _comparable_sql(value.sql, value.type)
        tests = " OR ".join(f"({v} <=> {_comparable_sql(i.sql, value.type)})" for i in items)
        return Compiled(f"(CASE WHEN {value.sql} IS NULL THEN NULL ELSE ({tests}) END)", t.BOOLEAN)
    return Compiled(f"({value.sql} IN ({', '.join(i.sql for i in items)}))", t.BOOLEAN)


def render(node: exp.Expr) -> str:
    """An expression as ksqlDB prints it in messages (``MAP('a':=V)``, ``ARRAY[1]``, ``true``)."""
    if isinstance(node, exp.Boolean):
        return "true" if node.this else "false"
    if isinstance(node, exp.Array):
        return "ARRAY[" + ", ".join(render(e) for e in node.expressions) + "]"
    if isinstance(node, exp.PropertyEQ):
        return f"{render(node.this)}:={render(node.expression)}"
    if isinstance(node, exp.Anonymous):
        return f"{str(node.this).upper()}(" + ", ".join(render(e) for e in node.expressions) + ")"
    return node.sql()


def _comparable_sql(sql: str, ty: t.SqlType | None) -> str:
    """Spark cannot compare maps: compare their entries, sorted by key."""
    if isinstance(ty, t.Map):
        return f"array_sort(map_entries({sql}))"
    return sql


def _comparable(a: t.SqlType, b: t.SqlType) -> bool:
    if t.is_numeric(a) and t.is_numeric(b):
        return True
    if a.kind != b.kind:
        return False
    if isinstance(a, t.Array) and isinstance(b, t.Array):
        return _comparable(a.element, b.element)
    if isinstance(a, t.Map) and isinstance(b, t.Map):
        return _comparable(a.key, b.key) and _comparable(a.value, b.value)
    if isinstance(a, t.Struct) and isinstance(b, t.Struct):
        for f in b.fields:
            mine = a.field(f.name)
            if mine is not None and not _comparable(mine.type, f.type):
                return False
    return True


def _as_decimal(ty: t.SqlType) -> t.Decimal:
    if isinstance(ty, t.Decimal):
        return ty
    return t.Decimal(10, 0) if ty.kind == K.INTEGER else t.Decimal(19, 0)


def _wider(a: t.SqlType, b: t.SqlType) -> t.SqlType:
    """The type ksqlDB compares in after seeing ``b`` (shown in its error messages)."""
    if not (t.is_numeric(a) and t.is_numeric(b)):
        return a
    kinds = {a.kind, b.kind}
    if K.DOUBLE in kinds:
        return t.DOUBLE
    if K.DECIMAL in kinds:
        x, y = _as_decimal(a), _as_decimal(b)
        scale = max(x.scale, y.scale)
        digits = max(x.precision - x.scale, y.precision - y.scale)
        return t.Decimal(min(digits + scale, 38), scale)
    return t.BIGINT if K.BIGINT in kinds else t.INTEGER


def _constructor(node: exp.Expr) -> str | None:
    if isinstance(node, exp.Array):
        return "ARRAY"
    if isinstance(node, exp.Anonymous) and str(node.this).upper() in ("MAP", "STRUCT"):
        return str(node.this).upper()
    return None


def _convert(compiler: ExpressionCompiler, node: exp.Expr, target: t.SqlType | None) -> Compiled:
    """Compile one item, converting literals (also inside constructors) to ``target``."""
    from streamsql.functions.compiled import Compiled, string_literal

    if target is None:
        return compiler.compile(node)
    if isinstance(node, exp.Literal) and node.is_string and target.kind != K.STRING:
        if target.kind in _COMPLEX:
            return compiler.compile(node)  # reported as not comparable
        return literal_as(node.this, target)
    if target.kind == K.STRING and isinstance(node, exp.Boolean):
        return Compiled(string_literal("true" if node.this else "false"), t.STRING)
    if target.kind == K.STRING and isinstance(node, exp.Literal) and not node.is_string:
        return Compiled(string_literal(node.this), t.STRING)
    kind = _constructor(node)
    spark_type = t.to_spark(target).simpleString()
    if kind == "ARRAY" and isinstance(target, t.Array):
        elems = [_convert(compiler, e, target.element) for e in node.expressions]
        if any(e.type is not None and not _comparable(target.element, e.type) for e in elems):
            return compiler.compile(node)
        return Compiled(f"CAST(array({', '.join(e.sql for e in elems)}) AS {spark_type})", target)
    if kind == "MAP" and isinstance(target, t.Map):
        parts = []
        for pair in node.expressions:
            if not isinstance(pair, exp.PropertyEQ):
                return compiler.compile(node)
            k = _convert(compiler, pair.this, target.key)
            v = _convert(compiler, pair.expression, target.value)
            if v.type is not None and not _comparable(target.value, v.type):
                return compiler.compile(node)
            parts.append(f"{k.sql}, {v.sql}")
        return Compiled(f"CAST(map({', '.join(parts)}) AS {spark_type})", target)
    if kind == "STRUCT" and isinstance(target, t.Struct):
        given: dict[str, exp.Expr] = {}
        for pair in node.expressions:
            if not isinstance(pair, exp.PropertyEQ):
                return compiler.compile(node)
            key = pair.this
            given[key.name if isinstance(key, (exp.Column, exp.Identifier)) else key.sql()] = pair.expression
        fields = []
        for name, value in given.items():
            f = target.field(name)
            if f is None:
                raise _NeverMatches(name)
            converted = _convert(compiler, value, f.type)
            if converted.type is not None and not _comparable(f.type, converted.type):
                return compiler.compile(node)
        for f in target.fields:
            match = next((v for n, v in given.items() if target.field(n) is f), None)
            sql = "NULL" if match is None else _convert(compiler, match, f.type).sql
            fields.append(f"CAST({sql} AS {t.to_spark(f.type).simpleString()})")
        names = ", ".join(f"{string_literal(f.name)}, {s}" for f, s in zip(target.fields, fields))
        return Compiled(f"named_struct({names})", target)
    return compiler.compile(node)
