"""``CAST(x AS T)`` where ksqlDB and Spark differ.

* STRUCT → STRUCT matches fields by name (Spark casts by position): fields the target has and the
  source lacks are null.
* STRUCT/MAP → STRING print the way ksqlDB's Java values print: ``Struct{F0=1,f1=3}`` (null
  fields left out, as Kafka Connect's ``Struct.toString``), ``{k=v, k2=v2}``.
* A cast into ARRAY/MAP/STRUCT from anything but the same kind is rejected at statement time with
  ksqlDB's message (Spark would fail later, at analysis, with its own text).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamsql import types as t
from streamsql.errors import AnalysisError

if TYPE_CHECKING:
    from streamsql.planner.expressions import Compiled

K = t.Kind
_COMPLEX = (K.ARRAY, K.MAP, K.STRUCT)
_depth = [0]


def _var(prefix: str) -> str:
    _depth[0] += 1
    return f"`__cast_{prefix}{_depth[0]}`"


def _q(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _field(sql: str, name: str) -> str:
    return f"({sql}).`{name.replace('`', '``')}`"


def _spark(ty: t.SqlType) -> str:
    return t.to_spark(ty).simpleString()


def cast_value(sql: str, source: t.SqlType | None, target: t.SqlType) -> str:
    """Spark SQL text of ``sql`` (of type ``source``, None if unknown) cast to ``target``."""
    if source is not None and target.kind in _COMPLEX and source.kind != target.kind:
        raise AnalysisError(f"Cast of {source} to {target} is not supported")
    if isinstance(source, t.Struct) and isinstance(target, t.Struct):
        parts = []
        for f in target.fields:
            mine = next((g for g in source.fields if g.name == f.name), None)
            value = cast_value(_field(sql, mine.name), mine.type, f.type) if mine is not None else \
                f"CAST(NULL AS {_spark(f.type)})"
            parts.append(f"{_q(f.name)}, {value}")
        return f"(CASE WHEN {sql} IS NULL THEN NULL ELSE named_struct({', '.join(parts)}) END)"
    if isinstance(source, t.Array) and isinstance(target, t.Array) and isinstance(source.element, t.Struct):
        x = _var("x")
        return f"transform({sql}, {x} -> {cast_value(x, source.element, target.element)})"
    if target.kind == K.STRING and source is not None and source.kind in (K.STRUCT, K.MAP):
        return f"(CASE WHEN {sql} IS NULL THEN NULL ELSE {java_text(sql, source)} END)"
    return f"CAST({sql} AS {_spark(target)})"


def java_text(sql: str, ty: t.SqlType | None) -> str:
    """How ksqlDB's Java value prints (``String.valueOf``): nested structs and maps included."""
    if isinstance(ty, t.Struct):
        fields = ", ".join(f"CASE WHEN {_field(sql, f.name)} IS NOT NULL THEN "
                           f"concat({_q(f.name + '=')}, {java_text(_field(sql, f.name), f.type)}) END" for f in ty.fields)
        return f"concat('Struct{{', concat_ws(',', {fields}), '}}')"
    if isinstance(ty, t.Map):
        e = _var("e")
        return (f"concat('{{', array_join(transform(map_entries({sql}), {e} -> concat({e}.key, '=', "
                f"coalesce({java_text(f'{e}.value', ty.value)}, 'null'))), ', '), '}}')")
    if isinstance(ty, t.Array):
        x = _var("x")
        return f"concat('[', array_join(transform({sql}, {x} -> coalesce({java_text(x, ty.element)}, 'null')), ', '), ']')"
    return f"CAST({sql} AS STRING)"


def compile_cast(inner: "Compiled", target: t.SqlType) -> str:
    return cast_value(inner.sql, inner.type, target)
