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
    from streamsql.functions.compiled import Compiled

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


def has_struct(ty: t.SqlType | None) -> bool:
    """Whether a value of ``ty`` holds a struct anywhere (itself, an element, a map value)."""
    if isinstance(ty, t.Struct):
        return True
    if isinstance(ty, t.Array):
        return has_struct(ty.element)
    if isinstance(ty, t.Map):
        return has_struct(ty.value)
    return False


def cast_value(sql: str, source: t.SqlType | None, target: t.SqlType) -> str:
    """Spark SQL text of ``sql`` (of type ``source``, None if unknown) cast to ``target``. Structs,
    also inside arrays and map values, are matched field by field by name (ksqlDB's struct
    coercion), where Spark's CAST would match them by position."""
    if source is not None and target.kind in _COMPLEX and source.kind != target.kind:
        raise AnalysisError(f"Cast of {source} to {target} is not supported")
    if isinstance(source, t.Struct) and isinstance(target, t.Struct):
        parts = []
        for f in target.fields:
            mine = next((g for g in source.fields if g.name == f.name), None)
            value = cast_value(_field(sql, mine.name), mine.type, f.type) if mine is not None else \
                f"CAST(NULL AS {_spark(f.type)})"
            parts.append(f"{_q(f.name)}, {value}")
        if not source.fields:  # STRUCT(): every field null, the struct itself not
            return f"named_struct({', '.join(parts)})"
        return f"(CASE WHEN {sql} IS NULL THEN NULL ELSE named_struct({', '.join(parts)}) END)"
    if isinstance(source, t.Array) and isinstance(target, t.Array) and has_struct(source.element):
        x = _var("x")
        return f"transform({sql}, {x} -> {cast_value(x, source.element, target.element)})"
    if isinstance(source, t.Map) and isinstance(target, t.Map) and has_struct(source.value):
        k, v = _var("k"), _var("v")
        return (f"transform_values(CAST({sql} AS {_spark(t.Map(target.key, source.value))}), "
                f"({k}, {v}) -> {cast_value(v, source.value, target.value)})")
    if target.kind == K.STRING and source is not None and source.kind in (K.STRUCT, K.MAP):
        return f"(CASE WHEN {sql} IS NULL THEN NULL ELSE {java_text(sql, source)} END)"
    if target.kind == K.TIME and source is not None and source.kind != K.TIME:
        return _to_time(sql, source)
    if target.kind == K.STRING and source is not None and source.kind == K.TIME:
        return time_text(sql)
    if target.kind == K.STRING and source is not None and source.kind == K.TIMESTAMP:
        # ksqlDB prints a TIMESTAMP as ISO-8601 in UTC with milliseconds (Spark's CAST drops the
        # 'T' and trailing zeros)
        return f"date_format({sql}, \"yyyy-MM-dd'T'HH:mm:ss.SSS\")"
    return f"CAST({sql} AS {_spark(target)})"


_DAY_MS = 86_400_000
#: ISO local time as Java's ``LocalTime.parse`` reads it: HH:mm, HH:mm:ss or HH:mm:ss.fraction
_ISO_TIME = r"^([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9]([.][0-9]{1,9})?)?$"


def _to_time(sql: str, source: t.SqlType) -> str:
    """TIME is milliseconds since midnight (types.py). A TIMESTAMP keeps its time of day (UTC);
    a string is parsed as ISO local time, null when it is not one (ksqlDB: null and a log line)."""
    if source.kind == K.TIMESTAMP:
        return f"CAST(pmod(unix_millis({sql}), {_DAY_MS}) AS INT)"
    if source.kind == K.STRING:
        part = lambda start, n: f"CAST(substr({sql}, {start}, {n}) AS INT)"  # noqa: E731
        seconds = f"(CASE WHEN length({sql}) >= 8 THEN {part(7, 2)} ELSE 0 END)"
        millis = f"(CASE WHEN length({sql}) >= 10 THEN CAST(rpad(substr({sql}, 10, 3), 3, '0') AS INT) ELSE 0 END)"
        return (f"(CASE WHEN {sql} RLIKE {_q(_ISO_TIME)} THEN "
                f"{part(1, 2)} * 3600000 + {part(4, 2)} * 60000 + {seconds} * 1000 + {millis} END)")
    raise AnalysisError(f"Cast of {source} to TIME is not supported")


def time_text(sql: str) -> str:
    """A TIME as Java's ``LocalTime.toString``: HH:mm, then :ss and .SSS only when not zero."""
    h, m = f"CAST({sql} DIV 3600000 AS INT)", f"CAST(({sql} DIV 60000) % 60 AS INT)"
    sec, ms = f"CAST(({sql} DIV 1000) % 60 AS INT)", f"CAST({sql} % 1000 AS INT)"
    return (f"(CASE WHEN {sql} IS NULL THEN NULL "
            f"WHEN {ms} <> 0 THEN format_string('%02d:%02d:%02d.%03d', {h}, {m}, {sec}, {ms}) "
            f"WHEN {sec} <> 0 THEN format_string('%02d:%02d:%02d', {h}, {m}, {sec}) "
            f"ELSE format_string('%02d:%02d', {h}, {m}) END)")


def java_text(sql: str, ty: t.SqlType | None) -> str:
    """How ksqlDB's Java value prints (``String.valueOf``): nested structs and maps included."""
    if isinstance(ty, t.Struct):
        fields = ", ".join(f"CASE WHEN {_field(sql, f.name)} IS NOT NULL THEN "
                           f"concat({_q(f.name + '=')}, {java_text(_field(sql, f.name), f.type)}) END"
                           for f in ty.fields)
        return f"concat('Struct{{', concat_ws(',', {fields}), '}}')"
    if isinstance(ty, t.Map):
        e = _var("e")
        return (f"concat('{{', array_join(transform(map_entries({sql}), {e} -> concat({e}.key, '=', "
                f"coalesce({java_text(f'{e}.value', ty.value)}, 'null'))), ', '), '}}')")
    if isinstance(ty, t.Array):
        x = _var("x")
        return (f"concat('[', array_join(transform({sql}, {x} -> coalesce({java_text(x, ty.element)}, 'null')), ', '),"
                " ']')")
    return f"CAST({sql} AS STRING)"


def compile_cast(inner: Compiled, target: t.SqlType) -> str:
    return cast_value(inner.sql, inner.type, target)
