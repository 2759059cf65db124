"""The Arrow side every format shares: decoded rows become typed Arrow arrays, and Arrow columns
to encode become plain Python values.

Formats work on "domain values" (see :mod:`streamsql.formats.coerce`). Building Arrow arrays from
whole Python lists and reading them back with one ``to_pylist`` per column keeps the per-record
Python work in the formats themselves down to the parsing/printing that cannot be vectorised.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from streamsql.types import Column, to_arrow

if TYPE_CHECKING:
    from streamsql.formats.base import DecodeResult


def arrow_types(columns: Sequence[Column]) -> list[pa.DataType]:
    """The Arrow type each decoded column must have (what Spark expects)."""
    return [to_arrow(c.type) for c in columns]


def to_arrays(rows: Sequence[Sequence[Any]], types: Sequence[pa.DataType]) -> list[pa.Array]:
    """Transpose decoded rows (one tuple per record, domain values) into one array per column."""
    if not rows:
        return [pa.array([], type=t) for t in types]
    return [pa.array(values, type=t) for values, t in zip(zip(*rows), types)]


def decode_records(data: Sequence[bytes | None], decode_one: Callable[[bytes], tuple[Any, ...]],
                   null_row: tuple[Any, ...], types: Sequence[pa.DataType]) -> DecodeResult:
    """The decode loop every format shares: a null record is a row of nulls; a record whose
    ``decode_one`` raises ``RecordError`` becomes a row of nulls with its reason, the rest go on."""
    from streamsql.formats.base import DecodeResult
    from streamsql.formats.coerce import RecordError

    rows: list[tuple[Any, ...]] = []
    errors: list[str | None] = [None] * len(data)
    for i, raw in enumerate(data):
        if raw is None:
            rows.append(null_row)
            continue
        try:
            rows.append(decode_one(raw))
        except RecordError as e:
            rows.append(null_row)
            errors[i] = str(e)
    return DecodeResult(to_arrays(rows, types), errors)


def column_values(batch: pa.RecordBatch, name: str) -> list[Any]:
    """Column ``name`` as Python values: TIMESTAMP as epoch millis and DATE as epoch days (the
    integers ksqlDB writes), everything else as ``to_pylist`` gives it (lists, dicts for structs,
    ``(key, value)`` tuples for maps, ``Decimal``, ``bytes``)."""
    array = batch.column(name)
    if _has_temporal(array.type):
        # One cast to millisecond timestamps (dropping sub-millisecond digits, which ksqlDB's
        # TIMESTAMP cannot hold), one to integers, both vectorised and through nested types.
        array = array.cast(_map_leaves(array.type, _to_millis), safe=False)
        array = array.cast(_map_leaves(array.type, _to_integer))
    return array.to_pylist()


def _to_millis(t: pa.DataType) -> pa.DataType:
    return pa.timestamp("ms", tz=t.tz) if pa.types.is_timestamp(t) else t


def _to_integer(t: pa.DataType) -> pa.DataType:
    if pa.types.is_timestamp(t):
        return pa.int64()
    if pa.types.is_date(t):
        return pa.int32()
    return t


def _has_temporal(t: pa.DataType) -> bool:
    return _map_leaves(t, _to_integer) != t


def _map_leaves(t: pa.DataType, leaf: Callable[[pa.DataType], pa.DataType]) -> pa.DataType:
    """``t`` with ``leaf`` applied to every non-nested type inside it (field names kept)."""
    if pa.types.is_map(t):
        return pa.map_(t.key_field.with_type(leaf(t.key_type)),
                       t.item_field.with_type(_map_leaves(t.item_type, leaf)))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(t.value_field.with_type(_map_leaves(t.value_type, leaf)))
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_map_leaves(f.type, leaf)) for f in t])
    return leaf(t)
