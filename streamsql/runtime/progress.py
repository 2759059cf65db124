"""How far behind a query is: per input topic and partition, the end offset now minus the offset
the query has committed (ksqlDB's consumer lag in ``DESCRIBE … EXTENDED``).

Spark's Kafka source of streamsql commits no consumer-group offsets (progress lives in the
checkpoint), so Kafka's own lag tools see nothing; the committed position is the ``endOffset``
of each source in the query's last progress report (Spark reports a batch after committing it),
and the end is read from the topic now (:class:`~streamsql.kafka.admin.EndOffsets`, which takes
the high watermark from a fetch: tansu's ListOffsets can under-report it). Sources appear in a
query's progress in the order its plan reads them: a join's left side, then its right.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.streaming import StreamingQueryListener

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamsql.physical.steps import PhysicalPlan
    from streamsql.runtime.engine import Engine


@dataclass
class PartitionLag:
    """One input partition of a query: ksqlDB's ``logStartOffset``, ``logEndOffset`` and
    ``consumerOffset``."""

    topic: str
    partition: int
    start: int
    end: int
    committed: int

    @property
    def lag(self) -> int:
        return max(0, self.end - self.committed)


def input_topics(plan: PhysicalPlan) -> list[str]:
    """The topics a query reads, in the order Spark lists its sources."""
    from streamsql.physical.steps import Join, Scan, TopicScan

    topics: list[str] = []
    for step in plan.steps:
        if isinstance(step, TopicScan):
            topics += list(step.topics)
        elif isinstance(step, Join):
            topics += [scan.source.topic for scan in step.scans()]
        elif isinstance(step, Scan):
            topics.append(step.source.topic)
    return topics


def committed_offsets(progress: Mapping[str, Any] | None, topics: list[str]) -> dict[str, dict[int, int]]:
    """Per topic, the offsets the query's last reported batch ended at (committed)."""
    out: dict[str, dict[int, int]] = {}
    for topic, source in zip(topics, (progress or {}).get("sources") or []):
        end = source_offsets(source.get("endOffset"))
        if end is not None:
            merged = out.setdefault(topic, {})
            for p, o in end.items():
                merged[p] = max(merged.get(p, 0), o)
    return out


def source_offsets(value: Any) -> dict[int, int] | None:
    """A source's reported offsets (our Kafka source's partition → offset, as JSON text or a
    dict), or None for another source's or none."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if not isinstance(value, dict):
        return None
    try:
        return {int(p): int(o) for p, o in value.items()}
    except (TypeError, ValueError):
        return None


def consumed_records(source: Mapping[str, Any]) -> int:
    """The records one source of a micro-batch read: its end offsets less its start offsets
    where both are known, else Spark's ``numInputRows``. Not ``numInputRows`` alone: a stream
    reader that applies a pushed WHERE (``planner/pushdown.py``) hands Spark only the rows it
    keeps. A query's first batch has no start offsets in its progress: its rows are Spark's
    count (those the reader kept)."""
    start, end = source_offsets(source.get("startOffset")), source_offsets(source.get("endOffset"))
    if start is None or end is None:
        return int(source.get("numInputRows") or 0)
    return sum(max(0, o - start.get(p, o)) for p, o in end.items())


def query_lag(plan: PhysicalPlan, progress: Mapping[str, Any] | None,
              offsets_of: Callable[[str], dict[int, tuple[int, int]]]) -> list[PartitionLag]:
    """Lag per input partition (``offsets_of(topic)``: partition → (log start, log end) now). A
    partition the query has committed nothing for counts from its log start."""
    topics = input_topics(plan)
    committed = committed_offsets(progress, topics)
    rows = []
    for topic in dict.fromkeys(topics):
        done = committed.get(topic, {})
        for partition, (start, end) in sorted(offsets_of(topic).items()):
            rows.append(PartitionLag(topic, partition, start, end, done.get(partition, start)))
    return rows


def lag_stats(rows: list[PartitionLag]) -> dict[str, Any]:
    """The ``stats`` entries of a query description: total lag and per ``topic/partition``."""
    return {"consumerTotalLag": sum(r.lag for r in rows),
            "consumerLag": {f"{r.topic}/{r.partition}": r.lag for r in rows},
            "committedOffsets": {f"{r.topic}/{r.partition}": r.committed for r in rows}}


@dataclass
class QueryTotals:
    batches: int = 0
    input_rows: int = 0
    #: -1 while the query's sink does not count its rows (``foreachBatch``, Python sinks)
    output_rows: int = -1
    dropped_by_watermark: int = 0


class ProgressTotals(StreamingQueryListener):
    """Spark reports every micro-batch of every query to this listener in the driver: the totals
    over each query's life, since a query's own ``recentProgress`` keeps only its last 100
    batches (``/metrics`` and ``streamsql run``'s closing summary read them). Keyed by query
    name (streamsql's query id)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.totals: dict[str, QueryTotals] = {}
        #: micro-batches reported by every query on the session, each after it committed (only
        #: grows: a pull query's catch-up asks Kafka again when it did, ``TableStore.catch_up``)
        self.batches = 0

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        progress = event.progress
        name = progress.name
        if not name:
            return
        with self.lock:
            t = self.totals.setdefault(name, QueryTotals())
            t.batches += 1
            self.batches += 1
            t.input_rows += sum(consumed_records({"startOffset": source.startOffset, "endOffset": source.endOffset,
                                                  "numInputRows": source.numInputRows})
                                for source in progress.sources or [])
            out = getattr(getattr(progress, "sink", None), "numOutputRows", -1)
            if out is not None and out >= 0:
                t.output_rows = max(t.output_rows, 0) + int(out)
            t.dropped_by_watermark += sum(int(op.numRowsDroppedByWatermark or 0)
                                          for op in progress.stateOperators or [])

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass

    @property
    def _jlistener(self) -> Any:
        """What the JVM calls: :class:`_ProgressAsJson`, not PySpark's own wrapper (see there)."""
        from pyspark import SparkContext

        made = getattr(self, "_jlistenerobj", None)
        if made is None:
            assert SparkContext._jvm is not None
            made = self._jlistenerobj = SparkContext._jvm.PythonStreamingQueryListenerWrapper(_ProgressAsJson(self))
        return made

    def snapshot(self, name: str) -> QueryTotals:
        with self.lock:
            t = self.totals.get(name)
            return QueryTotals(t.batches, t.input_rows, t.output_rows, t.dropped_by_watermark) if t else QueryTotals()


class _ProgressAsJson:
    """The py4j callback of :class:`ProgressTotals`: each micro-batch's progress crosses from the
    JVM as one JSON string. PySpark's own wrapper builds the event field by field, a py4j round
    trip per field, per source, per state operator and per metric (a few hundred per batch): that
    kept Spark's listener thread at ~0.35 of a core for a table's 2 batches a second on a team's
    server (``benchmarks/server_load.py``, 2026-12-07). The other events are not needed."""

    def __init__(self, listener: ProgressTotals) -> None:
        self.listener = listener

    def onQueryStarted(self, jevent: Any) -> None:
        pass

    def onQueryProgress(self, jevent: Any) -> None:
        from pyspark.sql.streaming.listener import QueryProgressEvent

        self.listener.onQueryProgress(QueryProgressEvent.fromJson({"progress": json.loads(jevent.progress().json())}))

    def onQueryIdle(self, jevent: Any) -> None:
        pass

    def onQueryTerminated(self, jevent: Any) -> None:
        pass

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]


_LISTENERS: dict[int, ProgressTotals] = {}
_LISTENERS_LOCK = threading.Lock()


def progress_totals(spark: SparkSession) -> ProgressTotals:
    """The session's listener, added once (queries of every engine on the session report to it)."""
    with _LISTENERS_LOCK:
        listener = _LISTENERS.get(id(spark))
        if listener is None:
            listener = _LISTENERS[id(spark)] = ProgressTotals()
            spark.streams.addListener(listener)
        return listener


def count_from_start(engine: Engine) -> None:
    """Sum the engine's query progress from when its SparkSession starts (or now, if it runs
    already), so the first scrape shows every batch since then, without starting Spark itself."""
    if progress_totals not in engine.on_spark_start:
        engine.on_spark_start.append(progress_totals)
    if engine.started_spark is not None:
        progress_totals(engine.started_spark)


def listener_of(engine: Engine) -> ProgressTotals | None:
    """The totals of the engine's SparkSession, if it started and counts (:func:`count_from_start`)."""
    spark = engine.started_spark
    return _LISTENERS.get(id(spark)) if spark is not None else None


def engine_totals(engine: Engine) -> QueryTotals:
    """The sum over the engine's persistent queries (output rows: of those whose sink counts them)."""
    listener = listener_of(engine)
    total = QueryTotals(output_rows=0)
    if listener is None:
        return total
    for qid in list(engine.queries):
        t = listener.snapshot(qid)
        total.batches += t.batches
        total.input_rows += t.input_rows
        total.output_rows += max(t.output_rows, 0)
        total.dropped_by_watermark += t.dropped_by_watermark
    return total
