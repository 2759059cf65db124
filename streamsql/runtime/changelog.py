"""Write a table's changes: the changelog topic and the materialized store, from ``foreachBatch``
(the ``ChangelogSink`` step: a filtered/projected table and a source table's materialization;
aggregations write from the executors, ``physical/aggregate.py``).

A TABLE result (CREATE TABLE AS SELECT) changes per micro-batch: a set of rows, each either an
upsert or a removal (``__HAVING`` false: the key left the result — a tombstone came in, the WHERE
or HAVING no longer holds). ksqlDB writes a tombstone only for keys that were in the result
("avoid spurious tombstones"); the materialized store knows which keys are, so removals of keys it
does not hold are dropped.

Windowed keys are laid out by the Kafka sink (``windowType`` option), as Kafka Streams writes them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

from streamsql import types as t
from streamsql.catalog import Source
from streamsql.kafka.sink import write_arrow
from streamsql.runtime import io
from streamsql.runtime.materialized import TableStore

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class ChangelogWriter:
    """The ``foreachBatch`` function of a CTAS query."""

    def __init__(self, bootstrap_servers: str, table: Source, store: TableStore, emit: bool = True) -> None:
        self.table = table
        #: False for a source table's materialization: rows go to the store only
        self.emit = emit
        self.store = store
        self.key_names = [c.name for c in table.key_columns]
        self.value_names = [c.name for c in table.value_columns]
        self.options = io.kafka_options(bootstrap_servers, table)  # windowed tables: windowType too

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        if batch_id <= self.store.last_batch:
            return  # replay of a batch already applied and written
        rows = batch_df.toArrow().to_pylist()
        rows.sort(key=lambda r: (r[t.ROWTIME] or 0, r.get("__WINDOWSTART") or 0))
        final: dict[str, tuple[bool, Any]] = {}  # ident -> (present, upsert or delete), last change wins
        present: dict[str, bool] = {}
        out: list[tuple[dict[str, Any], bool]] = []
        for row in rows:
            key = [row[n] for n in self.key_names]
            window = (row.get("__WINDOWSTART"), row.get("__WINDOWEND"))
            ident = repr((key, window))
            if any(k is None for k in key):
                continue
            if row["__HAVING"]:
                final[ident] = (True, (key, window, {n: row[n] for n in self.value_names}, row[t.ROWTIME]))
                present[ident] = True
                out.append((row, False))
            elif present.get(ident, self.store.contains(key, window)):
                final[ident] = (False, (key, window))
                present[ident] = False
                out.append((row, True))
        upserts = [change for up, change in final.values() if up]
        deletes = [change for up, change in final.values() if not up]
        if out and self.emit:
            write_arrow([self._encode(out)], self.options)
        self.store.apply(batch_id, upserts, deletes)

    def _encode(self, out: list[tuple[dict[str, Any], bool]]) -> pa.RecordBatch:
        arrays: dict[str, pa.Array] = {}
        for c in self.table.key_columns + self.table.value_columns:
            arrays[c.name] = pa.array([r[c.name] for r, _ in out], type=t.to_arrow(c.type))
        arrays[t.ROWTIME] = pa.array([r[t.ROWTIME] for r, _ in out], type=pa.int64())
        arrays["__WINDOWSTART"] = pa.array([r.get("__WINDOWSTART") for r, _ in out], type=pa.int64())
        arrays["__WINDOWEND"] = pa.array([r.get("__WINDOWEND") for r, _ in out], type=pa.int64())
        arrays["__TOMBSTONE"] = pa.array([tomb for _, tomb in out], type=pa.bool_())
        return pa.RecordBatch.from_pydict(arrays)
