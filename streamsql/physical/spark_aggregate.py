"""Spark's own stateful aggregation (the JVM's ``groupBy().agg()``) for the GROUP BY shapes it
computes exactly as ksqlDB: the :class:`~streamsql.physical.steps.SparkAggregate` step.

Which shapes (:func:`unsupported_reason` says why one is not): a STREAM source; COUNT, and SUM,
MIN, MAX of an INT, BIGINT or DOUBLE argument; no window, or TUMBLING/HOPPING; no HAVING;
grouping keys Spark can group by (no ARRAY, MAP, STRUCT). Everything else — tables (a changed
row retracts its old value), SESSION windows, HAVING's tombstones, collection/offset/Python
aggregates — takes the Python operator (``physical/aggregate.py``).

How ksqlDB's semantics map onto it:

* **Output per micro-batch.** EMIT CHANGES runs in Spark's *update* mode: one row per changed key
  and window per micro-batch, which is ksqlDB's record cache flushing at a commit. With the
  record cache off (``ksql.streams.cache.max.bytes.buffering=0``, ``streamsql test``) the source
  admits one Kafka record per micro-batch (:attr:`SparkAggregate.per_record`), so every update is
  emitted, by the same operator. EMIT FINAL runs in *append* mode: a window's row is written once,
  when the watermark passes its end.
* **Stream time and grace.** The watermark is ``max(event time) − grace``; Spark drops an input
  row for a window whose end is at or before it, and evicts (EMIT FINAL: emits) such windows —
  Kafka Streams' rule ``windowEnd <= streamTime − grace`` (checked on a probe, 2026-11-25). Spark
  moves the watermark between micro-batches, so with the record cache on a record late only
  relative to earlier records of its own batch is counted (docs/differences.md); per record
  (cache off) it is exact. The watermark is the query's, over all partitions (ksqlDB: per task).
* **Values.** ``SUM`` starts at 0 (ksqlDB's initial value: all-null input sums to 0) and keeps
  the argument's type (INT wraps as Java's int: the sum modulo 2³² is the same in any order);
  ``COUNT(*)``/``COUNT(x)``, ``MIN``/``MAX`` skip nulls as ksqlDB's do. ROWTIME of a result is
  the largest ROWTIME among its records, as the Python operator writes it. Hopping windows
  start at 0 or later (Kafka Streams creates none before the epoch). A record whose grouping
  key has a null column is dropped before the aggregation (and so does not move stream time).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from streamsql import types as t
from streamsql.planner import aggregation
from streamsql.planner.expressions import quote
from streamsql.types import TOMBSTONE_COL

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from streamsql.planner.aggregation import AggregateCall, AggregatePlan

#: the event-time column the watermark is declared on, and the window struct
EVENT_TIME_COL = "__EVENT_TIME"
WINDOW_COL = "__WINDOW"
_NUMERIC = (t.Kind.INTEGER, t.Kind.BIGINT, t.Kind.DOUBLE)
_GROUPABLE = (t.Kind.BOOLEAN, t.Kind.INTEGER, t.Kind.BIGINT, t.Kind.DOUBLE, t.Kind.DECIMAL, t.Kind.STRING,
              t.Kind.BYTES, t.Kind.DATE, t.Kind.TIME, t.Kind.TIMESTAMP)


def _call_sql(call: AggregateCall) -> str | None:
    """The Spark SQL aggregate of one call, typed as ksqlDB types its result; None when the
    call is not one Spark computes exactly."""
    fn = call.function
    types = fn.arg_types
    if fn.params or len(call.arg_columns) > 1:
        return None
    if fn.name == "COUNT":
        return f"count({quote(call.arg_columns[0])})" if call.arg_columns else "count(1)"
    if not call.arg_columns or types[0] is None or types[0].kind not in _NUMERIC:
        return None
    arg = quote(call.arg_columns[0])
    if fn.name == "SUM":
        spark_type = t.to_spark(types[0]).simpleString()
        return f"CAST(coalesce(sum({arg}), 0) AS {spark_type})"
    if fn.name in ("MIN", "MAX"):
        return f"{fn.name.lower()}({arg})"
    return None


def unsupported_reason(plan: AggregatePlan) -> str | None:
    """Why Spark's aggregation cannot run ``plan`` exactly as ksqlDB would, or None if it can."""
    if plan.over_table:
        return "a table source (a changed row retracts its old value)"
    if plan.window is not None and plan.window.type not in ("TUMBLING", "HOPPING"):
        return f"a {plan.window.type} window"
    if plan.having:
        return "HAVING (a row that stops passing it becomes a tombstone)"
    if plan.limit is not None:
        return "LIMIT"
    for _, _, ty in plan.keys:
        if ty is None or ty.kind not in _GROUPABLE:
            return f"a grouping key of type {ty}"
    for call in plan.calls:
        if _call_sql(call) is None:
            return f"the aggregate {call.shown or call.text}"
    return None


def build(plan: AggregatePlan, pre: DataFrame) -> DataFrame:
    """The aggregated rows of ``pre`` (the plan's pre-aggregation select) in the columns every
    aggregation step gives its sink: the table's columns, ROWTIME, ``__WINDOWSTART``/
    ``__WINDOWEND``, ``__TOMBSTONE`` (false) and ``__HAVING`` (true)."""
    from pyspark.sql import functions as F

    keys = [quote(name) for name, _, _ in plan.keys]
    if keys:  # ksqlDB drops a record whose grouping key is (partly) null
        pre = pre.where(" AND ".join(f"{k} IS NOT NULL" for k in keys))
    aggregates = [F.expr(f"{_call_sql(c)} AS {quote(c.name)}") for c in plan.calls]
    aggregates.append(F.expr(f"max({t.ROWTIME}) AS {t.ROWTIME}"))
    window = plan.window
    if window is None:
        grouped = pre.groupBy(*[F.col(k) for k in keys]).agg(*aggregates)
        bounds = ["CAST(NULL AS BIGINT) AS WINDOWSTART", "CAST(NULL AS BIGINT) AS WINDOWEND"]
    else:
        advance = window.advance_ms or window.size_ms
        timed = (pre.withColumn(EVENT_TIME_COL, F.expr(f"timestamp_millis({t.ROWTIME})"))
                 .withWatermark(EVENT_TIME_COL, f"{plan.grace_ms} milliseconds"))
        windowed = (timed.select("*", F.window(EVENT_TIME_COL, f"{window.size_ms} milliseconds",
                                               f"{advance} milliseconds").alias(WINDOW_COL))
                    .where(f"{WINDOW_COL}.start >= timestamp_millis(0)"))
        grouped = windowed.groupBy(F.col(WINDOW_COL), *[F.col(k) for k in keys]).agg(*aggregates)
        bounds = [f"unix_millis({WINDOW_COL}.start) AS WINDOWSTART", f"unix_millis({WINDOW_COL}.end) AS WINDOWEND"]
    names = keys + [quote(c.name) for c in plan.calls]
    post = grouped.selectExpr(*names, t.ROWTIME, *bounds).selectExpr(*aggregation.post_select(plan))
    return post.selectExpr(*[quote(c.name) for c in plan.columns], t.ROWTIME,
                           f"{t.WINDOWSTART} AS __WINDOWSTART", f"{t.WINDOWEND} AS __WINDOWEND",
                           f"false AS {TOMBSTONE_COL}", "true AS __HAVING")


def output_mode(plan: AggregatePlan) -> str:
    """EMIT FINAL: append (a window once, when it closes); EMIT CHANGES: update."""
    return "append" if plan.emit == "FINAL" else "update"


def batch_watermark(checkpoint: Path, batch_id: int) -> int:
    """The watermark Spark evicted (EMIT FINAL: emitted) windows against in micro-batch
    ``batch_id``: ``batchWatermarkMs`` of the batch's entry in the checkpoint's offset log (its
    second line; Spark writes it before the batch runs)."""
    lines = (checkpoint / "offsets" / str(batch_id)).read_text(encoding="utf-8").splitlines()
    return int(json.loads(lines[1]).get("batchWatermarkMs", 0))


def batch_writer(plan: AggregatePlan, checkpoint: Path, sink: Callable[[DataFrame, int], None],
                 per_record: bool) -> Callable[[DataFrame, int], None]:
    """The ``foreachBatch`` function handing ``sink`` a micro-batch's results in ksqlDB's order
    within each output partition. EMIT CHANGES: by window start (a record's hopping windows),
    then time. EMIT FINAL: as Kafka Streams' suppression buffer releases closed windows, by
    window end, then key.

    EMIT FINAL, one record per batch, also leaves out the windows Kafka Streams' segmented window
    store would have dropped before they closed: when stream time jumps past a window's end +
    grace and past its store segment's retention at once, ksqlDB never emits it (segments of
    retention/2; the Python operator's ``_expired`` is the same rule); stream time at emission is
    the batch's watermark + grace. With many records a batch the stream time at which a window
    closed is not known, so nothing is left out (docs/differences.md).

    ``per_record`` (one input record per batch, the record cache off): the batch's few results
    go to one task, so their order holds across the whole output (a key's hopping windows and
    the windows closing together hash to different shuffle partitions); with the cache on the
    order holds within each task, as a record cache's flush has no order across keys either."""
    window = plan.window
    final = plan.emit == "FINAL" and window is not None
    # only per record is the batch's watermark the stream time at which the window closed; with
    # many records a batch, a window closes somewhere inside it (no jump: nothing to leave out)
    expiring = final and per_record
    retention, grace = plan.retention_ms, plan.grace_ms
    segment = max(retention // 2, 1)
    order = (["__WINDOWEND", *[quote(c.name) for c in plan.key_columns]] if final
             else ["__WINDOWSTART", t.ROWTIME])

    def write(batch_df: DataFrame, batch_id: int) -> None:
        df = batch_df
        if expiring:
            now = batch_watermark(checkpoint, batch_id) + grace
            oldest = max(now - retention, 0) // segment
            df = df.where(f"floor(__WINDOWSTART / {segment}) >= {oldest}")
        if per_record:
            df = df.coalesce(1)
        sink(df.sortWithinPartitions(*order), batch_id)

    return write


def kafka_sink(options: dict[str, str]) -> Callable[[DataFrame, int], None]:
    """Write a micro-batch's results to Kafka from the executors (Python stream writers take
    append mode only; the batch write runs in the executors, nothing is collected to the driver
    but a count per task)."""
    from streamsql.kafka.sink import produce_dataframe

    def write(batch_df: DataFrame, _batch_id: int) -> None:
        produce_dataframe(batch_df, options)

    return write
