"""The one place that turns physical steps into Spark: DataFrames and streaming writers.

One method per step kind (``_scan``, ``_join``, ``_select``, ``_aggregate``, ``_table_changes``, and the terminal
steps in :meth:`SparkBuilder.start`). Nothing else in streamsql calls ``readStream``, ``writeStream``,
``foreachBatch`` or builds a query's DataFrame; the engine asks for a physical plan and starts it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamsql import types as t
from streamsql.arrow_map import map_in_arrow
from streamsql.errors import StreamsqlError
from streamsql.kafka import settings as kafka_settings
from streamsql.kafka import transactions
from streamsql.kafka.options import PACKED_OPTION
from streamsql.kafka.pipe import ReaderPipe
from streamsql.kafka.processing_log import LogTarget
from streamsql.physical import aggregate as agg
from streamsql.physical import frames, io, joins, spark_aggregate
from streamsql.physical import table_changes as tc
from streamsql.physical.buckets import BUCKET_COL, bucket_expression, bucket_values, recorded_shuffle_partitions
from streamsql.physical.in_reader import reader_columns
from streamsql.physical.steps import (
    STATEFUL_STEPS,
    Aggregate,
    Collect,
    ConnectorSink,
    Join,
    KafkaSink,
    PhysicalPlan,
    Scan,
    Select,
    SparkAggregate,
    Step,
    TableChanges,
    TopicScan,
)
from streamsql.planner import aggregation
from streamsql.planner.aggregation import AggregatePlan
from streamsql.planner.expressions import quote
from streamsql.types import TOMBSTONE_COL

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from streamsql.functions.python.library import PythonFunctions
    from streamsql.planner.planner import QueryPlan

#: written into a stateful query's checkpoint: what its state layout depends on
CHECKPOINT_META = "streamsql.json"
_PROVIDER_KEY = "spark.sql.streaming.stateStore.providerClass"
_ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
#: the layout of aggregate state this version writes (bump when it changes incompatibly)
STATE_FORMAT = 1
_ALLOW_MULTIPLE_KEY = "spark.sql.streaming.statefulOperator.allowMultiple"
#: held around every ``writer.start()``: a query snapshots the session's SQL conf when it starts,
#: and Spark's aggregation starts with ``allowMultiple=false`` set for it alone; without the lock
#: a query starting on another thread (the test runner starts three at once) could snapshot that
#: value, or an aggregation could snapshot ``true`` restored by another's start.
_START_LOCK = threading.Lock()


class CheckpointError(StreamsqlError):
    """A checkpoint this version cannot resume (written by an earlier version)."""


@dataclass
class BuildContext:
    """What building needs besides the steps: the session, Kafka, the processing log."""

    spark: SparkSession
    bootstrap_servers: str
    processing_log_topic: str | None = None
    #: ``ksql.logging.processing.rows.include``: undecodable records' bytes in their entries
    processing_log_rows: bool = False
    max_records: int | None = None
    query_id: str = "planning"
    limits: dict[str, int] = field(default_factory=dict)
    #: a Spark accumulator the aggregate step adds its late (dropped) records to
    dropped_counter: Any = None
    #: ``ksql.timestamp.throw.on.invalid``: a source record without a usable time fails the query
    throw_on_invalid_timestamp: bool = False
    #: ``processing.guarantee=exactly_once_v2``: Kafka sinks write each task's rows in one
    #: transaction (kafka/transactions.py), sources read committed records only
    exactly_once: bool = False
    #: a stateful query's micro-batches start at most this often (``Engine.commit_interval_ms``)
    trigger_interval_ms: int | None = None
    #: the engine's Python functions, made callable in Spark's SQL before a plan is built
    python_functions: PythonFunctions | None = None


class SparkBuilder:
    def __init__(self, ctx: BuildContext) -> None:
        self.ctx = ctx
        #: a resumed query's shuffle-partition count (its checkpoint's), which its buckets follow
        self._shuffle_partitions: int | None = None
        #: the Kafka sink option of a table-changes step whose rows reach the sink packed
        #: (``kafka/sink.unpacked``): set by :meth:`_table_changes`, read by :meth:`start`
        self._packed_sink_schema: str | None = None

    def _install_functions(self) -> None:
        """The engine's Python functions and the built-ins that run in Python, callable in the
        session's SQL (the plan's expressions call them by their Spark names)."""
        from streamsql.functions.python import library

        ctx = self.ctx
        library.install(ctx.spark, ctx.python_functions, ctx.bootstrap_servers, ctx.processing_log_topic)

    # --- DataFrames ------------------------------------------------------------------------

    def output_columns(self, plan: PhysicalPlan) -> list[t.Column]:
        """The columns the plan's query produces, with the types Spark's analysis gives them
        (authoritative: it also rejects type errors the compiler could not see). An
        aggregation's are analysed up to its pre-aggregation select, then read from its output
        projection."""
        logical = plan.steps[1].plan if isinstance(plan.steps[1], (Aggregate, SparkAggregate)) else None
        if logical is None:
            df = self.dataframe(plan)
            select = next(s for s in plan.steps if isinstance(s, Select))
            return self.result_columns(select.plan, df)
        frames.pre_aggregate(logical, self.dataframe(plan, upto=1))  # Spark analyses the keys and arguments
        return self.result_columns(logical, None)

    def result_columns(self, plan: QueryPlan | AggregatePlan, df: DataFrame | None) -> list[t.Column]:
        """The output columns of ``df``, the plan's built DataFrame, typed by Spark. An
        aggregation's are those of its output projection over the operator's rows."""
        if isinstance(plan, AggregatePlan):
            df = _empty_frame(self.ctx.spark, aggregation.post_schema(plan)).selectExpr(
                *aggregation.post_select(plan))
        assert df is not None, "a stateless plan's columns are read from its DataFrame"
        fields = {f.name: f.dataType for f in df.schema.fields}
        return [t.Column(c.name, t.from_spark(fields[c.name]), "key" if c.is_key else "value") for c in plan.columns]

    def stored_rows(self, plan: QueryPlan, schema: Any, rows: list[tuple[Any, ...]]) -> DataFrame:
        """A pull query over a table's store: the plan's filter and projection applied to the
        stored rows (``schema``: the table's columns and the source's internal columns)."""
        self._install_functions()
        return frames.select(plan, self.ctx.spark.createDataFrame(rows, schema))

    def dataframe(self, plan: PhysicalPlan, upto: int | None = None, checkpoint: Path | None = None) -> DataFrame:
        """The streaming DataFrame of the plan's steps (all but a terminal one). ``checkpoint``: a
        resumed query's, whose recorded shuffle-partition count places its state buckets."""
        self._shuffle_partitions = recorded_shuffle_partitions(checkpoint)
        steps = [s for s in plan.steps if not isinstance(s, (KafkaSink, ConnectorSink, Collect))]
        if upto is not None:
            steps = steps[:upto]
        # every update of Spark's aggregation (the record cache off): one record per micro-batch
        per_record = any(isinstance(s, SparkAggregate) and s.per_record for s in plan.steps)
        piped = in_reader(plan)
        if piped is not None:  # the scan's tasks run the select and the sink (kafka/pipe.py)
            scan = plan.steps[0]
            assert isinstance(scan, Scan) and isinstance(plan.terminal, KafkaSink)
            columns = reader_columns(piped.plan)
            assert columns is not None  # in_reader is set only when every column translates
            pipe = ReaderPipe(columns, piped.plan.exact_filter,
                              tuple(sorted(self._sink_options(plan.terminal).items())))
            return self._source(scan, self.ctx.max_records, pipe.to_json())
        df: Any = None
        self._packed_sink_schema = None
        for step in steps:
            if isinstance(step, TableChanges) and _packed_to_sink(plan):
                df = self._table_changes(step, df, to_sink=True)
            elif isinstance(step, TopicScan):
                df = self._topic_scan(step)
            elif isinstance(step, (Scan, Join)):
                df = self._source(step, 1 if per_record else self.ctx.max_records)
            else:
                df = self._build(step, df)
        return df

    def _build(self, step: Step, df: Any) -> DataFrame:
        if isinstance(step, Select):
            return self._select(step, df)
        if isinstance(step, Aggregate):
            return self._aggregate(step, df)
        if isinstance(step, SparkAggregate):
            return spark_aggregate.build(step.plan, frames.pre_aggregate(step.plan, df))
        if isinstance(step, TableChanges):
            return self._table_changes(step, df)
        raise TypeError(f"not a transformation step: {step!r}")

    def _source(self, step: Scan | Join, max_records: int | None, pipe: str | None = None) -> DataFrame:
        self._install_functions()
        return self._join(step, max_records) if isinstance(step, Join) else self._scan(step, max_records, pipe)

    def _scan(self, step: Scan, max_records: int | None, pipe: str | None = None) -> DataFrame:
        ctx = self.ctx
        return io.read_stream(ctx.spark, ctx.bootstrap_servers, step.source, starting_offsets=step.starting_offsets,
                              pinned=step.pinned, query_id=ctx.query_id, max_records=max_records,
                              processing_log_topic=ctx.processing_log_topic,
                              processing_log_rows=ctx.processing_log_rows,
                              throw_on_invalid_timestamp=ctx.throw_on_invalid_timestamp,
                              read_committed=ctx.exactly_once, source_filter=step.source_filter, pipe=pipe)

    def _join(self, step: Join, max_records: int | None) -> DataFrame:
        """Both inputs (the left one a join itself in an n-way join), then the join's operators."""
        self._use_rocksdb()
        left = self._join(step.left, max_records) if isinstance(step.left, Join) else self._scan(step.left, max_records)
        right = self._scan(step.right, max_records)
        if step.spec.foreign_key:
            return joins.foreign_key_join(step.spec, left, right)
        bucket = bucket_expression(["__JK"], self._bucket_values(step.buckets), "__PART" if step.by_partition else None)
        return joins.key_join(step.spec, left, right, bucket)

    def _bucket_values(self, buckets: int) -> list[int]:
        return bucket_values(self.ctx.spark, buckets, self._shuffle_partitions)

    def _topic_scan(self, step: TopicScan) -> DataFrame:
        """The raw records of every topic, one DataFrame (Spark tasks stay one per partition)."""
        from streamsql.kafka.datasource import read_stream

        ctx = self.ctx
        frames = [read_stream(ctx.spark, {"kafka.bootstrap.servers": ctx.bootstrap_servers,
                                          **kafka_settings.as_options(ctx.bootstrap_servers), "topic": topic,
                                          "startingOffsets": step.starting_offsets, "queryId": ctx.query_id,
                                          **({"maxRecordsPerBatch": str(ctx.max_records)} if ctx.max_records else {})})
                  for topic in step.topics]
        df = frames[0]
        for other in frames[1:]:
            df = df.unionByName(other)
        return df

    def _select(self, step: Select, df: DataFrame) -> DataFrame:
        if step.changelog:
            # records without a key are not table rows (ksqlDB ignores them); a multi-column key
            # with some null columns is still a key
            keyed = " OR ".join(f"{quote(c.name)} IS NOT NULL" for c in step.plan.source.key_columns)
            return frames.select_changes(step.plan, df.where(keyed) if keyed else df)
        return frames.select(step.plan, df)

    def _aggregate(self, step: Aggregate, df: DataFrame) -> DataFrame:
        """pre-aggregation select → bucket → pack → stateful operator → unpack → projection and
        HAVING over the new and the previous value → the table's change rows."""
        plan = step.plan
        self._use_rocksdb()
        pre = frames.pre_aggregate(plan, df)
        values = self._bucket_values(step.buckets)
        keyed = pre.withColumn(BUCKET_COL, _expr(bucket_expression([n for n, _, _ in plan.keys], values)))
        packed = map_in_arrow(keyed, agg.pack, f"{BUCKET_COL} BIGINT, {agg.ROW_COL} BINARY")
        functions = self.ctx.python_functions
        udafs = functions.aggregates([c.function.name for c in plan.calls]) if functions is not None else None
        operator = agg.AggregateOperator(plan, self.ctx.limits, step.cache, self.ctx.bootstrap_servers,
                                         self.ctx.processing_log_topic, self.ctx.dropped_counter, udafs)
        updates = packed.groupBy(BUCKET_COL).transformWithStateInPandas(
            statefulProcessor=operator, outputStructType=agg.output_schema(), outputMode="Append", timeMode="None")
        unpack, schema = agg.unpacker(plan)
        typed = map_in_arrow(updates, unpack, schema)
        had_having = f"coalesce({agg.old_having(plan)}, false)" if plan.having else "true"
        post = typed.selectExpr(*aggregation.post_select(plan), f"{agg.HAD_COL} AND {had_having} AS __HADROW",
                                agg.REMOVED_COL)
        # Kafka Streams' table filter with old values: a change that fails HAVING is a
        # tombstone only when the previous value passed it; otherwise nothing is written
        new_row = f"__HAVING AND NOT {agg.REMOVED_COL}"
        keys_present = " AND ".join(f"{quote(c.name)} IS NOT NULL" for c in plan.key_columns) or "true"
        out = post.where(f"({new_row} OR __HADROW) AND {keys_present}")
        names = [quote(c.name) for c in plan.columns]
        return out.selectExpr(*names, t.ROWTIME, f"{t.WINDOWSTART} AS __WINDOWSTART", f"{t.WINDOWEND} AS __WINDOWEND",
                              f"NOT ({new_row}) AS {TOMBSTONE_COL}", f"{new_row} AS __HAVING")

    def _table_changes(self, step: TableChanges, df: DataFrame, to_sink: bool = False) -> DataFrame:
        """change rows → bucket → pack → the present-bit operator → the changelog's rows, typed,
        or with ``to_sink`` as the operator gives them, for the Kafka sink to unpack: Spark then
        does not convert every kept row into its own rows and back (one Python pass and two
        conversions of each row fewer)."""
        self._use_rocksdb()
        values = self._bucket_values(step.buckets)
        keyed = df.withColumn(BUCKET_COL, _expr(bucket_expression(step.key_names, values)))
        packed = map_in_arrow(keyed, agg.pack, f"{BUCKET_COL} BIGINT, {agg.ROW_COL} BINARY")
        kept = packed.groupBy(BUCKET_COL).transformWithStateInPandas(
            statefulProcessor=tc.TableChangesOperator(step.key_names), outputStructType=tc.output_schema(),
            outputMode="Append", timeMode="None")
        if to_sink:
            self._packed_sink_schema = tc.packed_schema_text(df.schema)
            return kept
        unpack, schema = tc.unpacker(df.schema)
        return map_in_arrow(kept, unpack, schema)

    def _use_rocksdb(self) -> None:
        """``transformWithState`` needs the RocksDB state store provider (session-wide)."""
        spark = self.ctx.spark
        if spark.conf.get(_PROVIDER_KEY, None) != _ROCKSDB:
            spark.conf.set(_PROVIDER_KEY, _ROCKSDB)

    # --- starting -------------------------------------------------------------------------

    def start(self, plan: PhysicalPlan, checkpoint: Path, query_name: str | None = None,
              df: DataFrame | None = None) -> StreamingQuery:
        """Start the plan as a streaming query with its terminal step as the writer (``df``: the
        plan's DataFrame when the caller already built it with :meth:`dataframe`)."""
        terminal = plan.terminal
        if any(isinstance(s, STATEFUL_STEPS) for s in plan.steps):
            check_checkpoint(checkpoint, plan)
        join = next((s for s in plan.steps if isinstance(s, Join)), None)
        if join is not None:
            check_join_checkpoint(checkpoint, join.buckets)
        if df is None:
            df = self.dataframe(plan, checkpoint=checkpoint)
        spark_agg = next((s for s in plan.steps if isinstance(s, SparkAggregate)), None)
        if isinstance(terminal, KafkaSink) and terminal.target.timestamp_column and spark_agg is None:
            # WITH (TIMESTAMP=...) on the sink: its records carry that column's time (ksqlDB's
            # sink timestamp); a tombstone keeps its ROWTIME, a row without a usable time is
            # dropped to the processing log
            df = io.checked_times(df, terminal.target, LogTarget(self.ctx.bootstrap_servers,
                                                                 self.ctx.processing_log_topic),
                                  self.ctx.query_id, at_sink=True)
        if isinstance(terminal, KafkaSink) and spark_agg is not None:
            sink = spark_aggregate.kafka_sink(self._sink_options(terminal))
            writer = (df.writeStream.foreachBatch(spark_aggregate.batch_writer(spark_agg.plan, checkpoint, sink,
                                                                            spark_agg.per_record))
                      .outputMode(spark_aggregate.output_mode(spark_agg.plan)))
        elif isinstance(terminal, KafkaSink) and in_reader(plan) is not None:
            writer = df.writeStream.format("noop").outputMode("append")  # the reader's tasks wrote the rows
        elif isinstance(terminal, KafkaSink):
            options = self._sink_options(terminal)
            if any(isinstance(s, Select) and s.plan.repartitioned for s in plan.steps):
                options["computedKey"] = "true"  # PARTITION BY: a key of nulls is still a key
            if _packed_to_sink(plan):
                assert self._packed_sink_schema is not None, "the plan's DataFrame is built by this builder"
                options[PACKED_OPTION] = self._packed_sink_schema
            writer = df.writeStream.format(io.DATA_SOURCE).options(**options).outputMode("append")
        elif isinstance(terminal, ConnectorSink):
            writer = df.writeStream.foreachBatch(_connector_batch(terminal, self.ctx)).outputMode("append")
        elif isinstance(terminal, Collect):
            if spark_agg is not None:
                writer = (df.writeStream.foreachBatch(spark_aggregate.batch_writer(
                    spark_agg.plan, checkpoint, terminal.on_batch, spark_agg.per_record))
                          .outputMode(spark_aggregate.output_mode(spark_agg.plan)))
            else:
                writer = df.writeStream.foreachBatch(terminal.on_batch)
            if terminal.available_now:
                writer = writer.trigger(availableNow=True)
        else:
            raise TypeError(f"not a terminal step: {terminal!r}")
        if self.ctx.trigger_interval_ms and any(isinstance(s, STATEFUL_STEPS) for s in plan.steps) and not (
                isinstance(terminal, Collect) and terminal.available_now):
            writer = writer.trigger(processingTime=f"{self.ctx.trigger_interval_ms} milliseconds")
        writer = writer.option("checkpointLocation", str(checkpoint))
        if query_name:
            writer = writer.queryName(query_name)
        return start_writer(self.ctx.spark, writer, late_rows_on_batch_watermark=spark_agg is not None)

    def _sink_options(self, terminal: KafkaSink) -> dict[str, str]:
        """The Kafka sink's options: the target's formats, and transactions under exactly-once."""
        options = io.kafka_options(self.ctx.bootstrap_servers, terminal.target)
        if self.ctx.exactly_once:
            options[transactions.OPTION] = "true"
        return options


def in_reader(plan: PhysicalPlan) -> Select | None:
    """The plan's select when the reader's tasks run it with the sink (``Select.in_reader``)."""
    return next((s for s in plan.steps if isinstance(s, Select) and s.in_reader), None)


def start_writer(spark: SparkSession, writer: Any, late_rows_on_batch_watermark: bool) -> StreamingQuery:
    """``writer.start()`` under the start lock. ``late_rows_on_batch_watermark``: start with
    ``allowMultiple=false``, so Spark's aggregation judges late rows on the current batch's
    watermark (docs/differences.md); the session's own value is restored for the queries
    started after it."""
    with _START_LOCK:
        if not late_rows_on_batch_watermark:
            return writer.start()
        previous = spark.conf.get(_ALLOW_MULTIPLE_KEY, "true") or "true"
        spark.conf.set(_ALLOW_MULTIPLE_KEY, "false")
        try:
            return writer.start()
        finally:
            spark.conf.set(_ALLOW_MULTIPLE_KEY, previous)


def _empty_frame(spark: Any, schema: Any) -> DataFrame:
    """A DataFrame of no rows with ``schema``'s columns (all nullable), for Spark to type
    expressions over. Not ``createDataFrame([], schema)`` nor ``lit(None)``: each imports pandas
    into the driver (~34 MB of PSS, kept for the process's life) to check whether its input is a
    pandas or NumPy value."""
    from pyspark.sql import functions as F

    return spark.range(0).select(*[F.expr("NULL").cast(f.dataType).alias(f.name) for f in schema.fields])


def _connector_batch(step: ConnectorSink, ctx: BuildContext) -> Callable[[Any, int], None]:
    """The ``foreachBatch`` function of a sink connector: the batch's tasks write from the
    executors (``mapInArrow``); the driver only waits for their counts, so Spark commits the
    batch's offsets after every record of it was written."""
    from streamsql.connectors.sink import RESULT_SCHEMA, partition_task

    task = partition_task(step.config, LogTarget(ctx.bootstrap_servers, ctx.processing_log_topic))

    def write(batch_df: Any, _batch_id: int) -> None:
        map_in_arrow(batch_df, task, RESULT_SCHEMA).collect()

    return write


def _packed_to_sink(plan: PhysicalPlan) -> bool:
    """Whether the plan's table-changes step hands its rows to the Kafka sink packed: always, but
    where the sink checks a TIMESTAMP column's time first (Spark SQL over the typed rows)."""
    terminal = plan.terminal
    return (any(isinstance(s, TableChanges) for s in plan.steps) and isinstance(terminal, KafkaSink)
            and not terminal.target.timestamp_column)


def _expr(sql: str) -> Any:
    from pyspark.sql import functions as F

    return F.expr(sql)


def _checkpoint_meta(checkpoint: Path) -> dict[str, Any] | None:
    try:
        meta = json.loads((checkpoint / CHECKPOINT_META).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def operator_for(checkpoint: Path | None) -> str | None:
    """The aggregation operator a query's checkpoint holds state for (``"spark"`` or
    ``"python"``; checkpoints from before Spark's operator hold the Python one's), or None for
    a new query (the planner then chooses)."""
    meta = _checkpoint_meta(checkpoint) if checkpoint is not None else None
    if meta is None:
        return None
    return str(meta.get("operator", "python"))


def buckets_for(checkpoint: Path, default: int) -> int:
    """An aggregate query's bucket count: the one its checkpoint was written with (its state is
    keyed by bucket), else ``default`` (``spark.sql.shuffle.partitions``) for a new query."""
    meta_path = checkpoint / CHECKPOINT_META
    if meta_path.exists():
        try:
            return int(json.loads(meta_path.read_text(encoding="utf-8"))["buckets"])
        except (ValueError, KeyError, TypeError):
            pass
    return default


def has_committed_batch(checkpoint: Path) -> bool:
    """Whether Spark committed a micro-batch in ``checkpoint`` (its ``commits/<n>`` files)."""
    return _has_entry(checkpoint / "commits")


def has_planned_batch(checkpoint: Path) -> bool:
    """Whether Spark planned a micro-batch in ``checkpoint`` (its ``offsets/<n>`` files, written
    before the batch runs)."""
    return _has_entry(checkpoint / "offsets")


def _has_entry(log_dir: Path) -> bool:
    return log_dir.exists() and any(p.name.isdigit() for p in log_dir.iterdir())


def check_checkpoint(checkpoint: Path, plan: PhysicalPlan) -> None:
    """Refuse a checkpoint whose state this version cannot read, with the way to rebuild;
    record this version's layout in a new one. An earlier streamsql ran aggregations and a
    table's filter/projection on the driver with their state in the table's SQLite file: such a
    checkpoint holds offsets only."""
    meta_path = checkpoint / CHECKPOINT_META
    step = next(s for s in plan.steps if isinstance(s, STATEFUL_STEPS))
    what = "table-changes" if isinstance(step, TableChanges) else "aggregation"
    rebuild = ("To rebuild the table from its input topics, stop streamsql, delete that directory and start "
               "again (the query re-reads its sources from the earliest offset).")
    layout: dict[str, Any] = {"state_format": STATE_FORMAT}
    if isinstance(step, SparkAggregate):
        layout["operator"] = "spark"
    else:
        layout["buckets"] = step.buckets
        if isinstance(step, TableChanges):
            layout["step"] = "table_changes"
    committed = has_committed_batch(checkpoint)
    if meta_path.exists():
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if isinstance(step, SparkAggregate):
            if meta.get("operator") != "spark":
                raise CheckpointError(
                    f"the checkpoint {checkpoint} holds the state of streamsql's Python aggregation operator, "
                    f"not of Spark's. {rebuild}")
            return
        if meta.get("state_format") != STATE_FORMAT or meta.get("buckets") != step.buckets \
                or meta.get("step") != layout.get("step"):
            raise CheckpointError(
                f"the checkpoint {checkpoint} holds {meta.get('step', 'aggregation').replace('_', '-')} state in "
                f"layout {meta.get('state_format')} with {meta.get('buckets')} bucket(s); this streamsql writes "
                f"{what} state in layout {STATE_FORMAT} with {step.buckets}. {rebuild}")
        return
    if committed:
        raise CheckpointError(
            f"the checkpoint {checkpoint} was written by an earlier streamsql, which kept {what} state on the "
            f"driver; this version keeps it in Spark's state store and cannot resume it. To rebuild the table from "
            f"its input topics, stop streamsql, delete that directory and start again with "
            f"SET 'auto.offset.reset'='earliest' (the output topic receives the rebuilt values).")
    checkpoint.mkdir(parents=True, exist_ok=True)
    meta_path.write_text(json.dumps(layout), encoding="utf-8")


def check_join_checkpoint(checkpoint: Path, buckets: int) -> None:
    """Refuse a join query's checkpoint whose state is in another layout (physical/joins.py
    ``JOIN_STATE``: an earlier streamsql's) or spread over another number of buckets (its first
    source's partition count changed), with the way to rebuild; record the layout in a new one.
    Runs after :func:`check_checkpoint`, whose layout a table-table join's file also holds."""
    meta = _checkpoint_meta(checkpoint) or {}
    if meta.get("join_state") == joins.JOIN_STATE and meta.get("join_buckets") == buckets:
        return
    rebuild = ("To rebuild the join from its input topics, stop streamsql, delete that directory and start again "
               "with SET 'auto.offset.reset'='earliest'.")
    if has_committed_batch(checkpoint):
        if meta.get("join_state") == joins.JOIN_STATE:
            raise CheckpointError(
                f"the checkpoint {checkpoint} holds join state in {meta.get('join_buckets')} bucket(s), one per "
                f"partition of the join's first source, which now has {buckets}. {rebuild}")
        raise CheckpointError(
            f"the checkpoint {checkpoint} holds join state written by an earlier streamsql (layout "
            f"{meta.get('join_state', 'applyInPandasWithState')}); this version keeps a join's state per bucket in "
            f"transformWithState (layout {joins.JOIN_STATE}) and cannot resume it. {rebuild}")
    checkpoint.mkdir(parents=True, exist_ok=True)
    meta["join_state"] = joins.JOIN_STATE
    meta["join_buckets"] = buckets
    (checkpoint / CHECKPOINT_META).write_text(json.dumps(meta), encoding="utf-8")
