"""Record times from a TIMESTAMP column (kafka/timestamps.py) on Arrow batches, without Kafka or
Spark: which rows have no usable time and why, ROWTIME replaced, tombstones at a sink kept, the
bad rows dropped with a processing-log entry each, and ksql.timestamp.throw.on.invalid."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pyarrow as pa
import pytest

from streamsql import types as T
from streamsql.kafka import timestamps
from streamsql.kafka.processing_log import LogTarget
from streamsql.types import TOMBSTONE_COL


class Recorder(LogTarget):
    """A LogTarget that keeps what it would publish (no topic: nothing is written to Kafka)."""

    def __init__(self) -> None:
        super().__init__(None, None)
        object.__setattr__(self, "published", [])

    def publish(self, entries: Any, settings: Any = None) -> None:
        self.published.extend(entries)  # type: ignore[attr-defined]


def test_column_times_are_milliseconds_from_bigint_and_timestamp_columns() -> None:
    assert timestamps.column_times(pa.array([5, None, -1], pa.int64())).to_pylist() == [5, None, -1]
    moments = pa.array([dt.datetime(1970, 1, 1, 0, 0, 1, 500999, tzinfo=dt.UTC), None], pa.timestamp("us", "UTC"))
    assert timestamps.column_times(moments).to_pylist() == [1500, None]


def test_problems_name_the_column_the_value_and_why() -> None:
    times = pa.array([10, None, None, -2], pa.int64())
    values = pa.array(["2018-05-11T21:58:33Z", None, "not a timestamp", "-2"])
    assert timestamps.problems(times, values, "EVENT_TS", "yyyy-MM-dd'T'HH:mm:ssX") == {
        1: "the TIMESTAMP column EVENT_TS is null",
        2: "the TIMESTAMP column EVENT_TS value 'not a timestamp' does not match TIMESTAMP_FORMAT "
           "'yyyy-MM-dd'T'HH:mm:ssX'",
        3: "the TIMESTAMP column EVENT_TS value -2 is before 1970 (a record's time is milliseconds since 1970, "
           "never negative)",
    }
    assert timestamps.problems(pa.array([0, 7], pa.int64()), pa.array([0, 7]), "T", None) == {}


def _batch(times: list[int | None], ids: list[int], tombstones: list[bool] | None = None) -> pa.RecordBatch:
    columns: dict[str, pa.Array] = {
        "ID": pa.array(ids, pa.int64()),
        "SINK_TS": pa.array(times, pa.int64()),
        T.ROWTIME: pa.array([1_000_000 + i for i in ids], pa.int64()),
        T.ROWPARTITION: pa.array([0] * len(ids), pa.int32()),
        T.ROWOFFSET: pa.array([100 + i for i in ids], pa.int64()),
    }
    if tombstones is not None:
        columns[TOMBSTONE_COL] = pa.array(tombstones)
    columns[timestamps.COMPUTED_TIME] = pa.array(times, pa.int64())
    return pa.RecordBatch.from_pydict(columns)


def test_a_sink_writes_each_row_at_its_columns_time_and_drops_the_rest_to_the_processing_log() -> None:
    """ksqlDB's 'override output timestamp for CTAS': ids 1 and 3 at times 1 and 3; id 2 (time -2)
    is not written and its entry says why and where the record was."""
    log = Recorder()
    check = timestamps.CheckedTimes("SINK_TS", None, True, "CTAS_TS_1", log)
    [out] = list(check(iter([_batch([1, -2, 3], [1, 2, 3])])))
    assert out.schema.names == ["ID", "SINK_TS", T.ROWTIME, T.ROWPARTITION, T.ROWOFFSET]
    assert out.column("ID").to_pylist() == [1, 3] and out.column(T.ROWTIME).to_pylist() == [1, 3]
    [entry] = log.published  # type: ignore[attr-defined]
    error = entry["message"]["recordProcessingError"]
    assert entry["logger"] == "CTAS_TS_1" and entry["message"]["type"] == 1
    assert error["errorMessage"] == ("Error writing row with extracted timestamp (partition 0, offset 102): "
                                     "the TIMESTAMP column SINK_TS value -2 is before 1970 (a record's time is "
                                     "milliseconds since 1970, never negative)")
    assert json.loads(error["record"]) == {"ID": 2, "SINK_TS": -2, "ROWTIME": 1000002, "ROWPARTITION": 0,
                                           "ROWOFFSET": 102}


def test_a_tombstone_at_a_sink_keeps_its_time() -> None:
    log = Recorder()
    check = timestamps.CheckedTimes("SINK_TS", None, True, "q", log)
    [out] = list(check(iter([_batch([None, 5], [1, 2], tombstones=[True, False])])))
    assert out.column(T.ROWTIME).to_pylist() == [1_000_001, 5] and not log.published  # type: ignore[attr-defined]


def test_a_batch_of_only_bad_rows_yields_nothing_and_throw_on_invalid_fails_a_source() -> None:
    assert list(timestamps.CheckedTimes("SINK_TS", None, False, "q", Recorder())(iter([_batch([None], [1])]))) == []
    throwing = timestamps.CheckedTimes("SINK_TS", None, False, "q", Recorder(), throw_on_invalid=True)
    with pytest.raises(timestamps.TimestampExtractionError,
                       match="Fatal user code error in TimestampExtractor callback for record: Failed to extract "
                             r"timestamp from row \(partition 0, offset 101\): the TIMESTAMP column SINK_TS is null"):
        list(throwing(iter([_batch([None], [1])])))


def test_throw_on_invalid_skips_a_negative_time_as_kafka_streams_does() -> None:
    """ksqlDB fails the query only when the extractor cannot give a time; a negative one is
    skipped (and logged) even with ksql.timestamp.throw.on.invalid."""
    log = Recorder()
    throwing = timestamps.CheckedTimes("SINK_TS", None, False, "q", log, throw_on_invalid=True)
    [out] = list(throwing(iter([_batch([-5, 7], [1, 2])])))
    assert out.column("ID").to_pylist() == [2] and len(log.published) == 1  # type: ignore[attr-defined]
    with pytest.raises(timestamps.TimestampExtractionError,
                       match=r"offset 102\): the TIMESTAMP column SINK_TS is null"):
        list(throwing(iter([_batch([-5, None], [1, 2])])))


def test_a_sinks_timestamp_column_missing_from_the_projection_is_named_before_the_key_rules() -> None:
    """ksqlDB's timestampformat case: the projection lacks the stream's key (a key error too), but
    the TIMESTAMP column's message comes first; a projection it cannot name yet is left to the
    check after planning."""
    from streamsql.errors import AnalysisError
    from streamsql.planner.ddl import check_timestamp_projected
    from streamsql.sql import parse

    [missing] = parse("CREATE STREAM TS WITH (timestamp='invalid_ts') AS SELECT id, event_ts FROM test;")
    with pytest.raises(AnalysisError, match="^The TIMESTAMP column set in the WITH clause does not exist in the "
                                            "schema: 'INVALID_TS'$"):
        check_timestamp_projected(missing)  # type: ignore[arg-type]
    for text in ("CREATE STREAM TS WITH (timestamp='ets') AS SELECT k, event_ts AS ets FROM test;",
                 "CREATE STREAM TS WITH (timestamp='nope') AS SELECT * FROM test;",
                 "CREATE STREAM TS WITH (timestamp='nope') AS SELECT k, id + 1 FROM test;",
                 # a join names B.TS B_TS when both sides have a TS column: only the planner knows
                 "CREATE STREAM J WITH (timestamp='B_TS') AS SELECT A.ID, B.TS FROM A JOIN B WITHIN 1 SECOND "
                 "ON A.ID = B.ID;"):
        [stmt] = parse(text)
        check_timestamp_projected(stmt)  # type: ignore[arg-type]
