"""Rows a stateful step hands to the Kafka sink packed (``kafka/sink.unpacked``): Arrow IPC
values, with a null standing for each further row, back as typed batches."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa

from streamsql.kafka.options import PACKED_OPTION, SinkOptions
from streamsql.kafka.sink import packed_schema_text, unpacked
from streamsql.physical.aggregate import ipc_bytes

SCHEMA = pa.schema([("K", pa.string()), ("N", pa.int64()), ("D", pa.decimal128(10, 2)),
                    ("T", pa.timestamp("us", tz="UTC")), ("__TOMBSTONE", pa.bool_())])


def _rows(keys: list[str]) -> pa.RecordBatch:
    n = len(keys)
    return pa.RecordBatch.from_pydict(
        {"K": keys, "N": [None if i % 2 else i for i in range(n)], "D": [Decimal("1.25")] * n,
         "T": [dt.datetime(2026, 1, 1, tzinfo=dt.UTC)] * n, "__TOMBSTONE": [i == n - 1 for i in range(n)]},
        schema=SCHEMA)


def test_packed_rows_come_back_typed_in_order_and_the_nulls_stand_for_rows() -> None:
    first, second = _rows(["a", "b", "c"]), _rows(["d", "e"])
    packed = pa.RecordBatch.from_pydict({"__OUT": [ipc_bytes(first), None, None, ipc_bytes(second), None]},
                                        schema=pa.schema([("__OUT", pa.binary())]))
    out = pa.Table.from_batches(list(unpacked([packed], packed_schema_text(SCHEMA))))
    assert out.schema == SCHEMA
    assert out.to_pylist() == pa.Table.from_batches([first, second]).to_pylist()  # a nullable BIGINT stays an int


def test_the_sink_option_carries_the_schema() -> None:
    opts = SinkOptions.parse({"kafka.bootstrap.servers": "localhost:9092", "topic": "t",
                              PACKED_OPTION.lower(): packed_schema_text(SCHEMA)})  # Spark lower-cases names
    assert opts.packed_schema is not None
    assert pa.Table.from_batches(list(unpacked(
        [pa.RecordBatch.from_pydict({"__OUT": [ipc_bytes(_rows(["x"]))]})], opts.packed_schema))).schema == SCHEMA
    assert SinkOptions.parse({"kafka.bootstrap.servers": "b", "topic": "t"}).packed_schema is None
