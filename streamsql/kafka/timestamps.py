"""Record times from a TIMESTAMP column, as ksqlDB's timestamp extractors take them.

Two places take a record's time from one of its columns:

* a source declared ``WITH (TIMESTAMP='col')``: ROWTIME is that column (ksqlDB's
  ``TimestampExtractor``). A BIGINT or TIMESTAMP column is read in the Kafka reader itself
  (:func:`column_times`, no extra step); a string column is parsed in Spark SQL with its
  TIMESTAMP_FORMAT, then checked by :class:`CheckedTimes`;
* a query's sink ``WITH (TIMESTAMP='col') AS SELECT``: each written record's time (ksqlDB's sink
  timestamp transformer), computed in Spark SQL and checked by :class:`CheckedTimes`.

A time that cannot be taken — the column is null, its text does not match the format, or the
value is negative (Kafka has no times before 1970) — drops that record (a tombstone keeps its
record's time), writes a
``recordProcessingError`` naming the column, the value and the record's partition and offset to
the processing log, and the query goes on with the records around it, as ksqlDB. With
``ksql.timestamp.throw.on.invalid`` the query fails on a source record whose column is null or
unparsable instead, as ksqlDB's. A negative time at a source is only skipped by Kafka Streams (a
warning, no processing-log entry, whatever that setting); streamsql logs it too
(docs/differences.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from streamsql import types as T
from streamsql.errors import StreamsqlError
from streamsql.kafka import processing_log as plog

#: the column a Spark SQL time is computed into, for :class:`CheckedTimes`
COMPUTED_TIME = "__TIME"
_SOURCE_MESSAGE = "Failed to extract timestamp from row"
_SINK_MESSAGE = "Error writing row with extracted timestamp"


class TimestampExtractionError(StreamsqlError):
    """A record's TIMESTAMP column gave no time and ``ksql.timestamp.throw.on.invalid`` is set."""


def column_times(values: pa.Array) -> pa.Array:
    """Milliseconds since 1970 from a BIGINT (or other integer) or TIMESTAMP column."""
    if pa.types.is_timestamp(values.type):
        micros = pc.cast(pc.cast(values, pa.timestamp("us")), pa.int64())
        return pc.cast(pc.floor(pc.divide(pc.cast(micros, pa.float64()), 1000)), pa.int64())
    return pc.cast(values, pa.int64())


def problems(times: pa.Array, values: pa.Array, column: str, fmt: str | None) -> dict[int, str]:
    """Row → why its time cannot be used, for the rows whose time is null or negative."""
    bad = pc.fill_null(pc.or_kleene(pc.is_null(times), pc.less(times, 0)), True)
    if not pc.any(bad).as_py():
        return {}
    out: dict[int, str] = {}
    for i, (is_bad, time, value) in enumerate(zip(bad.to_pylist(), times.to_pylist(), values.to_pylist())):
        if not is_bad:
            continue
        if value is None:
            out[i] = f"the TIMESTAMP column {column} is null"
        elif time is None:
            out[i] = f"the TIMESTAMP column {column} value '{value}' does not match TIMESTAMP_FORMAT '{fmt}'"
        else:
            out[i] = (f"the TIMESTAMP column {column} value {value} is before 1970 "
                      f"(a record's time is milliseconds since 1970, never negative)")
    return out


def fail_if_unextractable(times: pa.Array, bad: dict[int, str], logged: list[dict[str, Any]]) -> None:
    """``ksql.timestamp.throw.on.invalid`` at a source: fail the query on the first record whose
    time could not be extracted (the column null or its text unparsable; ``logged`` are the
    entries of ``bad``'s rows in row order). A negative time is skipped even then, as Kafka
    Streams skips it whatever the extractor's setting."""
    for row, entry in zip(sorted(bad), logged):
        if times[row].as_py() is None:
            raise TimestampExtractionError("Fatal user code error in TimestampExtractor callback for record: "
                                           + entry["message"]["recordProcessingError"]["errorMessage"])


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value if isinstance(value, (str, int, float, bool)) or value is None else str(value)


def entries(batch: pa.RecordBatch, bad: dict[int, str], logger: str, at_sink: bool) -> list[dict[str, Any]]:
    """The processing-log entries of a batch's bad rows: the reason, where the record was
    (partition and offset, when the rows carry them) and its columns."""
    names = [n for n in batch.schema.names if not n.startswith("__") or n == T.ROWTIME]
    rows = batch.select(names).take(pa.array(sorted(bad), pa.int64())).to_pylist()
    out = []
    for i, row in zip(sorted(bad), rows):
        where = ""
        if row.get(T.ROWOFFSET) is not None:
            where = f" (partition {row.get(T.ROWPARTITION)}, offset {row.get(T.ROWOFFSET)})"
        message = f"{_SINK_MESSAGE if at_sink else _SOURCE_MESSAGE}{where}: {bad[i]}"
        out.append(plog.record_processing_error(logger, message, json.dumps(_jsonable(row)), bad[i]))
    return out


@dataclass(frozen=True)
class CheckedTimes:
    """``mapInArrow``: ROWTIME from the Spark SQL time in :data:`COMPUTED_TIME` (dropped from the
    output), the rows without a usable time dropped and logged. A tombstone keeps its ROWTIME: it
    has no value column (ksqlDB's sink stamps it with the stream time; at a source streamsql keeps
    the record's time rather than drop a table's delete). ``at_sink``: the sink's wording."""

    column: str
    timestamp_format: str | None
    at_sink: bool
    logger: str
    log: plog.LogTarget
    throw_on_invalid: bool = False

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from streamsql.types import TOMBSTONE_COL

        for batch in batches:
            names = batch.schema.names
            times = batch.column(names.index(COMPUTED_TIME))
            rest = batch.drop_columns([COMPUTED_TIME])
            if TOMBSTONE_COL in names:
                tombstone = pc.fill_null(batch.column(names.index(TOMBSTONE_COL)), False)
                times = pc.if_else(tombstone, batch.column(names.index(T.ROWTIME)), times)
            bad = problems(times, batch.column(names.index(self.column)), self.column, self.timestamp_format)
            out = rest.set_column(rest.schema.get_field_index(T.ROWTIME), T.ROWTIME,
                                  pc.cast(times, rest.schema.field(T.ROWTIME).type))
            if bad:
                logged = entries(rest, bad, self.logger, self.at_sink)
                self.log.publish(logged)
                if self.throw_on_invalid and not self.at_sink:
                    fail_if_unextractable(times, bad, logged)
                out = out.filter(pa.array([i not in bad for i in range(batch.num_rows)], pa.bool_()))
            if out.num_rows:
                yield out
