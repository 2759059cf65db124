"""The table-changes step inside Spark's executors: a table's changelog from its change rows,
with ksqlDB's rule that a tombstone is written only for a key the table holds.

A stateless query over a TABLE (a filter or projection, a table-table join, a source table's
materialization) turns every input change into a change row (``Select`` with ``changelog``):
an upsert when the row is in the result, a removal (``__HAVING`` false) when it is not — a
tombstone came in, or the WHERE no longer holds. Kafka Streams' table filter sends a removal
downstream only when the old value passed the filter ("avoid spurious tombstones"), so whether
a key is *present* must be remembered across micro-batches. That one bit per key (and window)
is the state of this step: a ``MapState`` of the bucket in Spark's state store (RocksDB),
checkpointed with the query's offsets, so a restart neither repeats nor loses a tombstone.

Shape of the Spark plan (the aggregate step's, ``physical/aggregate.py``): bucket by the key's
hash → :func:`~streamsql.physical.aggregate.pack` each bucket's rows into one Arrow IPC value →
``groupBy(bucket).transformWithStateInPandas(`` :class:`TableChangesOperator` ``)`` → the kept
rows as Arrow IPC again, with ``__TOMBSTONE`` → the Kafka sink in the executors unpacks them
(``kafka/sink.unpacked``; :func:`unpacker` gives them their typed columns in Spark where the sink
checks a TIMESTAMP column first). A bucket is a task: one per partition of
the source topic, each bucket on its own shuffle partition, and within a bucket the rows keep
their order (sorted by ROWTIME, stable, as Kafka Streams takes the records of a task's inputs).

The state is touched per key per micro-batch, not per record, and each touch is a round trip to
the JVM's state server (what dominates this step's cost): a key whose first change in the batch
is an upsert needs no read; one write per key records the bit the batch ends with, unless the
key was read and ends as it was (a removal of a key the table never held writes nothing).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.streaming import StatefulProcessor
from pyspark.sql.types import BinaryType, BooleanType, StringType, StructField, StructType

from streamsql import types as t
from streamsql.kafka import sink
from streamsql.physical.aggregate import OUT_COL, ipc_bytes, packed_values
from streamsql.physical.map_state import MapCalls
from streamsql.types import TOMBSTONE_COL

HAVING_COL = "__HAVING"


def key_text(key: list[Any], window: tuple[int | None, int | None]) -> str:
    """A row's identity in a table (its key values and window) as text: this step's state key,
    and the table's store's primary key (``runtime/materialized.py``)."""
    return json.dumps([key, list(window)], separators=(",", ":"), default=str)

WINDOW_START_COL = "__WINDOWSTART"
WINDOW_END_COL = "__WINDOWEND"


def changes(table: pa.Table, key_names: list[str], present: Any) -> tuple[pa.Table, dict[str, bool]]:
    """The rows of one bucket's micro-batch that go to the changelog, in order, with their
    ``__TOMBSTONE``; and the present bit each key ends the batch with, where it differs from what
    the store holds or the store was not read (to store). ``present(idents)`` reads the bits of
    several keys from before the batch at once (a list of bools): only keys whose first change in
    the batch is a removal are read.

    A key's identity text is made once per key and batch, not per row (a key of a type whose
    equal Python values can differ in text, a float's -0.0 and 0.0, or that cannot be hashed,
    a STRUCT, is made per row, as before)."""
    import pyarrow.compute as pc

    sort_keys = pa.table({"t": pc.fill_null(table.column(t.ROWTIME), 0),
                          "w": pc.fill_null(table.column(WINDOW_START_COL), 0)})
    table = table.take(pc.sort_indices(sort_keys, sort_keys=[("t", "ascending"), ("w", "ascending")]))
    having = table.column(HAVING_COL).to_pylist()
    n_keys = len(key_names)
    columns = [table.column(n).to_pylist() for n in key_names]
    columns += [table.column(WINDOW_START_COL).to_pylist(), table.column(WINDOW_END_COL).to_pylist()]
    reuse = not any(pa.types.is_floating(f.type) or pa.types.is_nested(f.type)
                    for f in (table.schema.field(n) for n in key_names))
    cache: dict[tuple[Any, ...], str] = {}
    idents: list[str | None] = []
    first: dict[str, bool] = {}  # each key's first change in the batch: an upsert?
    for i, row in enumerate(zip(*columns)):
        key = row[:n_keys]
        if any(k is None for k in key):
            idents.append(None)  # not a table row (ksqlDB ignores records without a key)
            continue
        ident = cache.get(row) if reuse else None
        if ident is None:
            ident = key_text(list(key), (row[n_keys], row[n_keys + 1]))
            if reuse:
                cache[row] = ident
        idents.append(ident)
        first.setdefault(ident, bool(having[i]))
    to_read = [ident for ident, upsert in first.items() if not upsert]
    read = dict(zip(to_read, (bool(b) for b in present(to_read)))) if to_read else {}
    final: dict[str, bool] = dict(read)
    keep: list[int] = []
    tombstones: list[bool] = []
    for i, ident in enumerate(idents):
        if ident is None:
            continue
        if having[i]:
            final[ident] = True
            keep.append(i)
            tombstones.append(False)
            continue
        if final[ident]:
            keep.append(i)
            tombstones.append(True)
        final[ident] = False
    kept = table.take(pa.array(keep, type=pa.int64()))
    kept = kept.append_column(TOMBSTONE_COL, pa.array(tombstones, type=pa.bool_()))
    # a bit read from the store and ending the batch as it was needs no write
    return kept, {ident: bit for ident, bit in final.items() if read.get(ident) is not bit}


class TableChangesOperator(StatefulProcessor):
    """The ``StatefulProcessor`` of the table-changes step: one call per bucket and micro-batch."""

    def __init__(self, key_names: list[str]) -> None:
        self.key_names = key_names

    def init(self, handle: Any) -> None:
        self.state = handle.getMapState("present", StructType([StructField("k", StringType())]),
                                        StructType([StructField("p", BooleanType())]))

    def handleInputRows(self, key: Any, rows: Any, timerValues: Any = None) -> Iterator[Any]:
        import pandas as pd

        tables = [pa.ipc.open_stream(blob).read_all() for pdf in rows for blob in packed_values(pdf)]
        if not tables:
            return
        calls = MapCalls(self.state)
        kept, final = changes(pa.concat_tables(tables), self.key_names,
                              lambda idents: calls.contains_many([(ident,) for ident in idents]))
        calls.write_many(((ident,), (True,) if bit else None) for ident, bit in final.items())
        if kept.num_rows:
            # the kept rows as one Arrow IPC value, then a null per further row: Spark counts the
            # operator's rows as the records the sink writes (``numOutputRows``)
            yield pd.DataFrame({OUT_COL: pd.Series([_ipc_table(kept)] + [None] * (kept.num_rows - 1), dtype=object)})

    def close(self) -> None:
        pass


def _ipc_table(table: pa.Table) -> bytes:
    return ipc_bytes(table.combine_chunks().to_batches()[0]) if table.num_rows else b""


def output_schema() -> StructType:
    return StructType([StructField(OUT_COL, BinaryType())])


def _kept_schema(schema: StructType) -> tuple[pa.Schema, StructType]:
    """The kept rows' Arrow and Spark schemas: the step's input (``schema``) plus ``__TOMBSTONE``."""
    from pyspark.sql.pandas.types import to_arrow_schema

    out = StructType(list(schema.fields) + [StructField(TOMBSTONE_COL, BooleanType())])
    return to_arrow_schema(out, timezone="UTC"), out


def packed_schema_text(schema: StructType) -> str:
    """The Kafka sink's option for this step's packed rows (``kafka/sink.unpacked``), ``schema``
    the step's input."""
    return sink.packed_schema_text(_kept_schema(schema)[0])


def unpacker(schema: StructType) -> tuple[Any, StructType]:
    """(``mapInArrow`` function, its output schema): the kept rows of each bucket, typed as the
    step's input (``schema``) plus ``__TOMBSTONE`` (where the rows do not go to the Kafka sink
    packed: ``builder._packed_to_sink``)."""
    arrow_schema, out = _kept_schema(schema)

    def unpack(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return sink.unpacked(batches, arrow_schema)

    return unpack, out
