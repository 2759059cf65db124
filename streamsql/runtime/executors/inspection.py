"""SHOW, DESCRIBE, EXPLAIN and PRINT for one engine, and what they read: each persistent query's state,
statistics and consumer lag (also read by the metrics endpoint and ``run --progress``).

These statements change nothing; they read the catalog, the running queries and Kafka's offsets.
Kafka is asked for a topic's offsets through one client per topic, kept for the engine's life
(``topic_offsets``), since lag is asked for every few seconds by the progress line and metrics.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from datetime import UTC
from typing import TYPE_CHECKING, Any

from streamsql import types as t
from streamsql.catalog import QueryInfo, Source
from streamsql.errors import AnalysisError, CatalogError, KafkaError, StreamsqlError, spark_message
from streamsql.functions.registry import unknown_function
from streamsql.kafka import settings as kafka_settings
from streamsql.physical.steps import Collect, PhysicalPlan, SparkAggregate
from streamsql.runtime import internal_topics
from streamsql.runtime import results as r
from streamsql.runtime.config import DEFAULT_PROPERTIES
from streamsql.runtime.executors import Handler, StatementExecutor
from streamsql.sql import ast

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import StreamingQuery

    from streamsql.kafka.admin import EndOffsets, Record
    from streamsql.runtime.engine import Engine
    from streamsql.runtime.progress import PartitionLag

log = logging.getLogger("streamsql")


class Inspection(StatementExecutor):
    """The read-only statements of one engine."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        #: end offsets of the topics queries read, for their lag (one client per topic)
        self._end_offsets: dict[str, EndOffsets] = {}
        self._end_offsets_lock = threading.Lock()

    def handlers(self) -> Mapping[type[ast.Statement], Handler]:
        return {ast.Show: self.show, ast.Describe: self.describe, ast.Explain: self.explain, ast.Print: self.print}

    def close(self) -> None:
        for tracker in self._end_offsets.values():
            tracker.close()
        self._end_offsets.clear()

    def show(self, stmt: ast.Show) -> r.Result:
        what = stmt.what.upper()
        if what in ("STREAMS", "TABLES"):
            sources = self.engine.catalog.streams() if what == "STREAMS" else self.engine.catalog.tables()
            return r.SourceList(stmt.text, what, [_source_info(s) for s in sorted(sources, key=lambda s: s.name)])
        if what == "TOPICS":
            topics = self.engine.admin.topics()
            shown = {n: p for n, p in topics.items() if stmt.all_topics or not n.startswith("_")}
            return r.TopicList(stmt.text, [r.TopicInfo(n, p) for n, p in sorted(shown.items())])
        if what == "QUERIES":
            return r.QueryList(stmt.text, self.describe_queries(stmt.extended))
        if what == "PROPERTIES":
            props = dict(DEFAULT_PROPERTIES)
            props.update(self.engine.config.properties)
            # the Kafka client settings, as the cluster's clients use them
            props.update(self.engine.kafka_settings)
            session = self.engine.active_session
            props.update(session.properties)
            # a secret is never shown, wherever it was set (the file, a flag, a session's SET)
            return r.Properties(stmt.text, kafka_settings.redacted(props),
                                kafka_settings.redacted(dict(session.properties)))
        if what == "FUNCTIONS":
            return r.FunctionList(stmt.text, [r.FunctionInfo(f.name, f.kind, f.category, f.description)
                                              for f in self.engine.functions.all()])
        if what == "VARIABLES":
            return r.Properties(stmt.text, dict(self.engine.active_session.variables), {})
        if what == "TYPES":
            return r.Properties(stmt.text, {k: str(v) for k, v in self.engine.catalog.types.items()}, {})
        if what == "CONNECTORS":
            return self.engine.connectors.show(stmt)
        raise AnalysisError(f"SHOW {what} is not supported")

    def print(self, stmt: ast.Print) -> r.Result:
        internal_topics.check_print(stmt.topic)  # before the lookup: whether it exists is not said either
        topics = self.engine.admin.topics()
        topic = (stmt.topic if stmt.topic in topics
                 else next((n for n in topics if n.upper() == stmt.topic.upper()), None))
        if topic is None:
            raise KafkaError(f"Could not find topic '{stmt.topic}', or the KSQL user does not have permissions to "
                             f"list the topic. Topic names are case-sensitive.")
        stream = r.RowStream(stmt.text, f"print_{topic}", [("record", "STRING")], limit=stmt.limit, kind="print")
        interval = max(1, stmt.interval or 1)

        def pump() -> None:
            try:
                records = self.engine.admin.iter_records(topic, from_beginning=stmt.from_beginning, follow=True)
                for i, rec in enumerate(records):
                    if stream.closed:
                        return
                    if i % interval == 0 and not stream.put([format_record(rec)]):
                        return
            except Exception as e:
                stream.finish(e)

        threading.Thread(target=pump, name=f"print-{topic}", daemon=True).start()
        return stream

    def describe_queries(self, extended: bool = True) -> list[r.QueryDescription]:
        """Every persistent query's state and statistics, then the running push queries (SHOW
        QUERIES [EXTENDED]; ksqlDB lists both, a push query as PUSH with no sink)."""
        return ([self._describe_query(q, extended) for q in self.engine.catalog.queries.values()]
                + [r.QueryDescription(q.id, q.statement, q.sink, q.sources, "RUNNING", q.kind, {})
                   for q in self.engine.queries.push_queries()])

    def _describe_query(self, info: QueryInfo, extended: bool = False) -> r.QueryDescription:
        """A query's state and statistics; ``extended`` (SHOW QUERIES EXTENDED) adds its consumer
        lag, which asks Kafka for the input topics' offsets."""
        running = self.engine.queries.get(info.id)
        plan = self.engine.queries.plans.get(info.id)
        state = "NOT_RUNNING"
        stats: dict[str, Any] = {}
        if info.id in self.engine.queries.paused:
            state = "PAUSED"
        elif running is not None:
            handle = running.handle
            if handle.isActive:
                state = "RUNNING"
            elif (exc := handle.exception()) is not None:
                state = "ERROR"
                stats["error"] = spark_message(exc)
            progress = handle.lastProgress
            if progress:
                stats.update({"batchId": progress.get("batchId"),
                              "inputRowsPerSecond": progress.get("inputRowsPerSecond"),
                              "processedRowsPerSecond": progress.get("processedRowsPerSecond")})
            dropped = self.engine.queries.dropped.get(info.id)
            if dropped is not None:  # ksqlDB's late-record count (records dropped past grace)
                stats["numRowsDroppedByWatermark"] = dropped.value
            elif any(isinstance(s, SparkAggregate) for s in getattr(plan, "steps", ())):
                # Spark's operator drops late rows itself and reports them per micro-batch: the
                # count over the batches Spark keeps progress for (the last 100)
                stats["numRowsDroppedByWatermark"] = sum(
                    int(op.get("numRowsDroppedByWatermark") or 0)
                    for p in handle.recentProgress for op in (p.get("stateOperators") or []))
            for op in (progress.get("stateOperators") if progress else None) or []:  # an aggregation's state
                stats["stateRows"] = stats.get("stateRows", 0) + int(op.get("numRowsTotal") or 0)
                stats["stateMemoryBytes"] = stats.get("stateMemoryBytes", 0) + int(op.get("memoryUsedBytes") or 0)
            if extended and progress and plan is not None:
                stats.update(self._lag_stats(plan, progress))
            spark = self.engine.started_spark
            ui = spark.sparkContext.uiWebUrl if extended and spark is not None else None
            if ui:  # --spark-ui: the query's page in Spark's web UI
                stats["sparkUi"] = f"{ui}/StreamingQuery/statistics/?id={handle.id}"
        return r.QueryDescription(info.id, info.statement, info.sink, info.sources, state, info.kind, stats)

    def _lag_stats(self, plan: PhysicalPlan, progress: dict[str, Any]) -> dict[str, Any]:
        """Consumer lag of a query's inputs for its description's stats."""
        from streamsql.runtime.progress import lag_stats

        rows = self.query_lag(plan, progress)
        return lag_stats(rows) if rows is not None else {}

    def query_lag(self, plan: PhysicalPlan, progress: dict[str, Any]) -> list[PartitionLag] | None:
        """Per input partition: log start and end now, and the offset the query committed
        (``runtime/progress.py``); None if Kafka cannot be asked now (descriptions still answer)."""
        from streamsql.runtime.progress import query_lag

        try:
            return query_lag(plan, progress, self.topic_offsets)
        except StreamsqlError as e:
            log.warning("consumer lag unavailable: %s", e)
            return None

    def topic_offsets(self, topic: str) -> dict[int, tuple[int, int]]:
        """Per partition of ``topic``: (log start, log end) now (one client per topic, kept)."""
        from streamsql.kafka.admin import EndOffsets

        with self._end_offsets_lock:  # one client per topic, used by one caller at a time
            tracker = self._end_offsets.get(topic)
            if tracker is None:
                tracker = self._end_offsets[topic] = EndOffsets(self.engine.bootstrap_servers, topic)
            ends = tracker.ends()
            starts = tracker.earliest(list(ends))
        return {p: (starts.get(p, 0), e) for p, e in ends.items()}

    def _offset_summaries(self, source: Source) -> list[r.OffsetSummary]:
        """DESCRIBE … EXTENDED's consumer groups: each running query that reads ``source``, its
        committed offsets in the source's topic against the topic's ends (ksqlDB's
        ``queryOffsetSummaries``; the group id is the one ksqlDB would give the query)."""
        out = []
        for info in self.engine.catalog.queries_reading(source.name):
            running, plan = self.engine.queries.get(info.id), self.engine.queries.plans.get(info.id)
            progress = running.handle.lastProgress if running is not None else None
            if not progress or plan is None:
                continue
            rows = [row for row in self.query_lag(plan, progress) or [] if row.topic == source.topic]
            if rows:
                out.append(r.OffsetSummary(f"_confluent-ksql-{self.engine.prop('ksql.service.id')}query_{info.id}",
                                           source.topic, [r.PartitionOffsets(x.partition, x.start, x.end, x.committed)
                                                          for x in rows]))
        return out

    def describe(self, stmt: ast.Describe) -> r.Result:
        if stmt.connector:
            return self.engine.connectors.describe(stmt)
        if stmt.function:
            fn = self.engine.functions.get(stmt.name or "")
            if fn is None:
                raise unknown_function(stmt.name or "")
            from streamsql.functions.signatures import variants

            return r.FunctionDescription(stmt.text, r.FunctionInfo(fn.name, fn.kind, fn.category, fn.description),
                                         [r.FunctionVariant(list(v.params), v.returns, v.variadic)
                                          for v in variants(fn)])
        if stmt.listing:
            sources = self.engine.catalog.streams() if stmt.listing == "STREAMS" else self.engine.catalog.tables()
            return r.SourceList(stmt.text, stmt.listing, [_source_info(s) for s in sources])
        source = self.engine.catalog.get(stmt.name or "")
        fields = [r.FieldInfo(t.ROWTIME, "BIGINT", False)] if stmt.extended else []
        fields += [r.FieldInfo(c.name, str(c.type) + (" (header)" if c.role in ("headers", "header") else ""), c.is_key)
                   for c in source.columns]
        return r.SourceDescription(
            stmt.text, _source_info(source), fields, source.partitions, source.timestamp_column, source.statement,
            [q.id for q in self.engine.catalog.queries_reading(source.name)],
            [q.id for q in self.engine.catalog.queries_writing(source.name)], stmt.extended,
            self._offset_summaries(source) if stmt.extended else [])

    def explain(self, stmt: ast.Explain) -> r.Result:
        if stmt.query_id:
            info = self.engine.catalog.queries.get(stmt.query_id.upper())
            if info is None:
                raise CatalogError(f"Query with id:{stmt.query_id} does not exist, use SHOW QUERIES to view the full "
                                   f"set of queries.")
            text = f"Query {info.id}\n{info.statement}"
            physical = self.engine.queries.plans.get(info.id)
            if physical is not None:
                text += "\n\nPhysical steps:\n" + physical.explain()
            running = self.engine.queries.get(info.id)
            if running is not None:
                text += "\n\nSpark plan:\n" + _spark_plan(running.handle)
            return r.Explanation(stmt.text, text)
        inner = stmt.statement
        query = getattr(inner, "query", None)
        if query is None:
            raise AnalysisError("EXPLAIN needs a query or a CREATE ... AS SELECT / INSERT INTO statement")
        sink = getattr(inner, "name", None) or getattr(inner, "target", None)
        plan = self.engine.planner.plan_query(query, persistent=sink is not None, sink_name=sink)
        if isinstance(inner, (ast.CreateAsSelect, ast.InsertInto)):
            target = (self.engine.definitions.sink(inner, plan) if isinstance(inner, ast.CreateAsSelect)
                      else self.engine.catalog.get(inner.target))
            physical = self.engine.persistent.plan(plan, target, None, self.engine.offset_reset())
        else:
            terminal = Collect(_ignore, available_now=query.emit is None)
            physical = self.engine.transient.plan(plan, terminal, self.engine.offset_reset(),
                                          changelog=plan.source.is_table and query.emit is not None)
        return r.Explanation(stmt.text, plan.explain() + "\n\nPhysical steps:\n" + physical.explain())


def _ignore(_df: DataFrame, _batch_id: int) -> None:
    """The terminal step of a plan built only to show its steps."""


def _source_info(s: Source) -> r.SourceInfo:
    return r.SourceInfo(s.name, s.kind, s.topic, s.key_format, s.value_format, s.window_type is not None)


def _spark_plan(handle: StreamingQuery) -> str:
    try:
        return handle._jsq.explainInternal(False)
    except Exception:
        return "(plan not available)"


def format_record(rec: Record) -> str:
    """PRINT's line for one record (ksqlDB's layout)."""
    from datetime import datetime

    ts = datetime.fromtimestamp(rec.timestamp / 1000, tz=UTC).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]

    def text(b: bytes | None) -> str:
        if b is None:
            return "<null>"
        try:
            return b.decode("utf-8")
        except UnicodeDecodeError:
            return b.hex()

    return f"rowtime: {ts} Z, key: {text(rec.key)}, value: {text(rec.value)}, partition: {rec.partition}"
