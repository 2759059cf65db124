"""SELECT: push queries (``EMIT CHANGES``: a transient Spark query whose rows stream to the
caller until it closes the stream or the LIMIT is reached) and pull queries (a table's current
rows from its store, or a stream's rows so far, read once).

A transient query gets a temporary checkpoint and no command-log entry; it stops when its
reader closes the result's row stream. Where a push query begins is pinned when it is accepted
(``runtime/starts.py``), so it sees every record that follows its acceptance.
"""

from __future__ import annotations

import copy
import itertools
import logging
import shutil
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from streamsql import types as t
from streamsql.catalog import QueryInfo
from streamsql.errors import AnalysisError, ConfigError, KafkaError, spark_message
from streamsql.physical.builder import SparkBuilder
from streamsql.physical.steps import Collect, PhysicalPlan, physical_plan
from streamsql.planner.aggregation import AggregatePlan
from streamsql.planner.planner import QueryPlan, source_columns, source_scope
from streamsql.runtime import push, starts
from streamsql.runtime import results as r
from streamsql.runtime.executors import Handler, StatementExecutor
from streamsql.runtime.materialized import Lookup
from streamsql.runtime.pull import ArrowPull, cached_arrow_pull, check_access_path, lookup_for
from streamsql.runtime.push import ArrowPush, arrow_push
from streamsql.runtime.queries import stop_handle
from streamsql.runtime.recently_used import RecentlyUsed
from streamsql.sql import ast
from streamsql.types import TOMBSTONE_COL

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from streamsql.runtime.engine import Engine

log = logging.getLogger("streamsql")

#: Kafka's offset for a partition's earliest record (``OFFSET_BEGINNING``)
EARLIEST = -2
PULL_QUERY_HELP = " See https://cnfl.io/queries for more info.\nAdd EMIT CHANGES if you intended to issue a push query."


@dataclass
class PullPlan:
    """What a pull query over a table needs besides the store's rows, made once per statement
    text and table (a client's repeated lookups by key cost no planning, no WHERE analysis and
    no Arrow translation): its plan, the rows its WHERE selects (``pull.lookup_for``), its Arrow
    programs (``pull.ArrowPull``, None: Spark's path) and the (table scans, range scans)
    settings under which its access path was checked and allowed (``pull.check_access_path``,
    which raises ksqlDB's error under others). The Arrow programs are made on the first run
    that passed the access check (``translated``)."""

    plan: QueryPlan
    lookup: Lookup
    fast: ArrowPull | None = None
    translated: bool = False
    allowed_paths: set[tuple[bool, bool]] = field(default_factory=set)


class TransientQueries(StatementExecutor):
    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        #: makes transient query ids unique within one millisecond (``next`` of a count is
        #: atomic: queries of several clients start at once)
        self._seq = itertools.count(1)
        #: the plans of pull queries over tables sent again (a dashboard's, a service's lookups
        #: by key): planning was a tenth of such a query's cost in the server
        self._pull_plans: RecentlyUsed[PullPlan] = RecentlyUsed(256)
        #: pull queries over tables answered per path: ``arrow`` (``pull.ArrowPull``, no Spark
        #: job) or ``spark`` (a batch query over the stored rows); tests read it
        self.pull_paths: Counter[str] = Counter()
        #: whether a pull query may take the Arrow path (tests compare it with Spark's)
        self.arrow_pulls = True
        #: push queries answered per path: ``arrow`` (``push.ArrowPush``, the engine follows the
        #: topic) or ``spark`` (a streaming query); and whether the first may be taken (tests)
        self.push_paths: Counter[str] = Counter()
        self.arrow_pushes = True

    def handlers(self) -> Mapping[type[ast.Statement], Handler]:
        return {ast.SelectStatement: self.select}

    def plan(self, plan: QueryPlan | AggregatePlan, terminal: Collect, starting_offsets: str,
             changelog: bool) -> PhysicalPlan:
        """A transient query's steps (push and pull queries, EXPLAIN of a SELECT): an aggregation
        with the session's buckets, record cache and operator choice; ``changelog``: the rows of
        a table read as its changes."""
        engine = self.engine
        if isinstance(plan, AggregatePlan):
            return physical_plan(plan, terminal, starting_offsets, buckets=engine.aggregation_buckets(plan),
                                 cache=engine.record_cache(), operator=engine.aggregation_operator())
        return physical_plan(plan, terminal, starting_offsets, changelog=changelog)

    def select(self, stmt: ast.SelectStatement) -> r.Result:
        engine = self.engine
        push = stmt.query.emit is not None
        if not push:
            known = self._pull_plans.get(self._pull_plan_key(stmt))
            if known is not None and known.plan.source is engine.catalog.find(stmt.query.source.name):
                return self._pull_table(stmt, known)
            # a pull statement may be the parse cache's own (``ParseCache``): planned from a copy
            stmt = copy.deepcopy(stmt)
            self._check_pull_query(stmt.query)
        plan = engine.planner.plan_query(stmt.query, persistent=False)
        query_id = f"transient_{plan.source.name}_{int(time.time() * 1000)}{next(self._seq)}"
        if not push:
            if isinstance(plan, AggregatePlan):
                raise AnalysisError("Pull queries don't support GROUP BY clauses." + PULL_QUERY_HELP)
            if plan.source.is_table:
                pull = PullPlan(plan, lookup_for(stmt.query.where, plan.source))
                self._pull_plans.put(self._pull_plan_key(stmt), pull)
                return self._pull_table(stmt, pull)
        if push and self.arrow_pushes and not isinstance(plan, AggregatePlan):
            fast = arrow_push(plan)
            if fast is not None:
                return self._push_in_process(stmt, plan, fast, query_id)
        starting = engine.offset_reset() if push else "earliest"
        builder = SparkBuilder(engine.build_context(query_id))
        names = [c.name for c in plan.columns]

        def on_batch(batch_df: DataFrame, _batch_id: int) -> None:
            if stream.closed:
                return
            if isinstance(plan, AggregatePlan):
                for row in batch_df.where("__HAVING").select(*[f"`{n}`" for n in names]).collect():
                    if not stream.put([_to_python(v) for v in row]):
                        break
                return
            if push and plan.source.is_table:
                kept = [c.is_key or c.name in (t.WINDOWSTART, t.WINDOWEND) for c in plan.columns]
                for row in batch_df.select(*[f"`{n}`" for n in names], "__HAVING").collect():
                    values = [_to_python(v) for v in row[:-1]]
                    if not row[-1]:
                        values = r.TombstoneRow(v if keep else None for v, keep in zip(values, kept))
                    if not stream.put(values):
                        break
                return
            for row in batch_df.where(f"NOT {TOMBSTONE_COL}").select(*[f"`{n}`" for n in names]).collect():
                if not stream.put([_to_python(v) for v in row]):
                    break

        physical = self.plan(plan, Collect(on_batch, available_now=not push), starting,
                                      changelog=push and plan.source.is_table)
        starts.pin_starts(physical, engine.admin.end_offsets)  # a push query sees what follows its acceptance
        df = builder.dataframe(physical)  # built once: its columns name the result, then it runs
        columns = builder.result_columns(plan, df)
        stream = r.RowStream(stmt.text, query_id, [(c.name, str(c.type)) for c in columns],
                             limit=plan.limit, kind="push" if push else "pull")
        checkpoint = Path(tempfile.mkdtemp(prefix="streamsql-transient-"))
        handle = builder.start(physical, checkpoint, df=df)

        if push:  # listed by SHOW QUERIES until it ends; TERMINATE <id> ends it
            engine.queries.push_started(QueryInfo(query_id, stmt.text, "", [plan.source.name], "PUSH"), stream.close)
            self.push_paths["spark"] += 1

        def watch() -> None:
            try:
                while handle.isActive and not stream.closed:
                    # a float is fine (pyspark multiplies by 1000); the stubs say int
                    handle.awaitTermination(0.2)  # type: ignore[arg-type]
                exc = handle.exception()
                stream.finish(AnalysisError(spark_message(exc)) if exc is not None else None)
            except Exception as e:  # the query died: surface it to the reader
                stream.finish(e)
            finally:
                engine.queries.push_ended(query_id)
                stop_handle(handle)
                shutil.rmtree(checkpoint, ignore_errors=True)

        stream.on_close(lambda: stop_handle(handle))
        threading.Thread(target=watch, name=f"watch-{query_id}", daemon=True).start()
        return stream

    def _push_in_process(self, stmt: ast.SelectStatement, plan: QueryPlan, fast: ArrowPush,
                         query_id: str) -> r.RowStream:
        """A push query over a stream that the engine follows itself (``runtime/push.py``):
        from the topic's end at acceptance (or its start under ``auto.offset.reset=earliest``),
        listed by SHOW QUERIES and ended by TERMINATE as a Spark push query is."""
        from streamsql.kafka.options import SourceOptions
        from streamsql.physical import io

        engine = self.engine
        source = plan.source
        ctx = engine.build_context(query_id)
        if engine.offset_reset() == "latest":
            begin = engine.admin.end_offsets(source.topic)
        else:
            begin = {p: EARLIEST for p in range(engine.admin.partitions(source.topic))}
        opts = SourceOptions.parse(io.stream_options(
            ctx.bootstrap_servers, source, starting_offsets="latest", query_id=query_id,
            processing_log_topic=ctx.processing_log_topic, processing_log_rows=ctx.processing_log_rows,
            read_committed=ctx.exactly_once))
        stream = r.RowStream(stmt.text, query_id, [(c.name, str(c.type)) for c in fast.result], limit=plan.limit,
                             kind="push")
        engine.queries.push_started(QueryInfo(query_id, stmt.text, "", [source.name], "PUSH"), stream.close)
        self.push_paths["arrow"] += 1
        threading.Thread(target=push.serve, name=f"push-{query_id}", daemon=True,
                         args=(fast, opts, begin, stream, lambda: engine.queries.push_ended(query_id))).start()
        return stream

    def _pull_plan_key(self, stmt: ast.SelectStatement) -> tuple[Any, ...]:
        """What a pull query's plan depends on besides its table (checked on a hit: a change
        replaces the table object): its text, variables substituted, the catalog's types and
        whether the Arrow path may be taken."""
        types = self.engine.catalog.types
        return (stmt.text, tuple(sorted((k, str(v)) for k, v in types.items())) if types else (),
                self.arrow_pulls)

    def _check_pull_query(self, query: ast.Query) -> None:
        """What a pull query may not have, in ksqlDB's words, before planning would fail on it
        with a less helpful message."""
        engine = self.engine
        if query.joins:
            raise AnalysisError("Pull queries don't support JOIN clauses." + PULL_QUERY_HELP)
        if query.group_by:
            raise AnalysisError("Pull queries don't support GROUP BY clauses." + PULL_QUERY_HELP)
        source = engine.catalog.find(query.source.name)
        if source is None or not source.is_table:
            return
        # the store keeps no partition/offset per row (ksqlDB's state store neither)
        used = [n for n in (t.ROWPARTITION, t.ROWOFFSET)
                if any(c.name.upper() == n for item in query.select if item.expression is not None
                       for c in item.expression.find_all(exp.Column))]
        if used:
            raise AnalysisError("Pull queries don't support the following columns in SELECT clauses: "
                                + ", ".join(f"`{n}`" for n in used))
        if not source.window_type and query.where is not None:
            for column in query.where.find_all(exp.Column):
                if column.name.upper() in (t.WINDOWSTART, t.WINDOWEND):
                    raise AnalysisError(f"WHERE column '{column.name.upper()}' cannot be resolved.")

    def _changelog_writes(self) -> Callable[[], int] | None:
        """What a table store's catch-up counts the writes it must see by (``TableStore.catch_up``):
        the micro-batches every query on the engine's SparkSession committed plus the rows the
        process's Kafka clients had acknowledged — or None (ask Kafka every time) while no
        progress listener counts the batches (an engine without ``progress.count_from_start``)."""
        from streamsql.kafka.admin import acknowledged_writes
        from streamsql.runtime.progress import listener_of

        listener = listener_of(self.engine)
        if listener is None:
            return None
        return lambda: listener.batches + acknowledged_writes()

    def _pull_table(self, stmt: ast.SelectStatement, pull: PullPlan) -> r.Result:
        """A pull query over a materialized table: the store's current rows, through the
        query's WHERE and projection — evaluated in pyarrow by the translation a stream's
        reader tasks use (``pull.ArrowPull``) where it covers the whole query, else by Spark
        as a batch query over the rows."""
        from pyspark.sql import types as st

        engine = self.engine
        plan = pull.plan
        table = plan.source
        scans, ranges = ("ksql.query.pull.table.scan.enabled", "ksql.query.pull.range.scan.enabled")
        allowed = (enabled(scans, engine.prop(scans)), enabled(ranges, engine.prop(ranges)))
        if allowed not in pull.allowed_paths:  # raises where the session's settings forbid the path
            check_access_path(stmt.query.where, table, *allowed)
            pull.allowed_paths.add(allowed)
        store = engine.stores.get(table.name)
        if store is not None and table.name in engine.followed:
            try:
                store.catch_up(engine.bootstrap_servers, engine.followed[table.name],
                               read_committed=engine.exactly_once(), writes=self._changelog_writes())
            except KafkaError as e:
                # Kafka unreachable (an outage): answer from what the store holds, as ksqlDB
                # answers from its local state store, if it ever caught up (an empty store that
                # never did would answer "no rows", which is not what the table holds)
                if not store.offsets():
                    raise
                log.warning("pull query over %s answered from its store as last caught up: %s", table.name, e)
        if store is None:
            raise AnalysisError(f"The `{table.name}` table isn't queryable. To derive a queryable table, you can do "
                                f"'CREATE TABLE QUERYABLE_{table.name} AS SELECT * FROM {table.name}'. See "
                                f"https://cnfl.io/queries for more info.")
        key_names = [c.name for c in table.key_columns]
        rows = store.rows(pull.lookup)
        if not pull.translated:  # (the statement may be the parse cache's: translated from a copy)
            where = stmt.query.where.copy() if stmt.query.where is not None else None
            pull.fast = (cached_arrow_pull(where, plan, table, source_scope(table, plan.alias))
                         if self.arrow_pulls else None)
            pull.translated = True
        fast = pull.fast
        if fast is not None:
            self.pull_paths["arrow"] += 1
            stream = r.RowStream(stmt.text, f"query_{int(time.time() * 1000)}",
                                 [(c.name, str(c.type)) for c in fast.result], limit=plan.limit, kind="pull")
            for values in fast.run(rows, key_names):
                if not stream.put(values):
                    break
            stream.finish()
            return stream
        self.pull_paths["spark"] += 1
        columns = source_columns(table)
        extra = [(t.ROWTIME, st.LongType()), (t.ROWPARTITION, st.IntegerType()), (t.ROWOFFSET, st.LongType()),
                 ("__HEADERS", st.ArrayType(st.StructType([st.StructField("KEY", st.StringType()),
                                                            st.StructField("VALUE", st.BinaryType())]))),
                 (TOMBSTONE_COL, st.BooleanType())]
        schema = st.StructType([st.StructField(c.name, t.to_spark(c.type)) for c in columns]
                               + [st.StructField(n, ty) for n, ty in extra])
        data = []
        types = {c.name: c.type for c in columns}
        for key, wstart, wend, value, rowtime in rows:
            rec: dict[str, Any] = dict(zip(key_names, key))
            rec.update(value)
            rec = {n: _spark_value(v, types[n]) if n in types else v for n, v in rec.items()}
            rec.update({t.WINDOWSTART: wstart, t.WINDOWEND: wend, t.ROWTIME: rowtime, TOMBSTONE_COL: False})
            data.append(tuple(rec.get(f.name) for f in schema.fields))
        builder = SparkBuilder(engine.build_context("pull"))
        out = builder.stored_rows(plan, schema, data)
        result = builder.result_columns(plan, out)
        names = [c.name for c in plan.columns]
        stream = r.RowStream(stmt.text, f"query_{int(time.time() * 1000)}", [(c.name, str(c.type)) for c in result],
                             limit=plan.limit, kind="pull")
        for row in out.select(*[f"`{n}`" for n in names]).collect():
            if not stream.put([_to_python(v) for v in row]):
                break
        stream.finish()
        return stream

def enabled(name: str, value: str) -> bool:
    """A boolean property's value; anything but true/false is a configuration error naming it."""
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise ConfigError(f"Invalid value {value} for configuration {name}: Expected value to be either "
                          f"true or false")
    return text == "true"


def _spark_value(value: Any, sql_type: t.SqlType) -> Any:
    """A stored value in the shape ``createDataFrame`` accepts: Arrow gives maps as lists of
    (key, value) pairs, Spark wants dicts (also inside arrays and structs)."""
    if value is None:
        return None
    kind = sql_type.kind
    if kind == t.Kind.MAP and isinstance(sql_type, t.Map):
        pairs = value.items() if isinstance(value, dict) else value
        return {k: _spark_value(v, sql_type.value) for k, v in pairs}
    if kind == t.Kind.ARRAY and isinstance(sql_type, t.Array):
        return [_spark_value(v, sql_type.element) for v in value]
    if kind == t.Kind.STRUCT and isinstance(sql_type, t.Struct) and isinstance(value, dict):
        return {f.name: _spark_value(value.get(f.name), f.type) for f in sql_type.fields}
    return value


def _to_python(value: Any) -> Any:
    from pyspark.sql import Row

    if isinstance(value, Row):
        return {k: _to_python(v) for k, v in value.asDict().items()}
    if isinstance(value, list):
        return [_to_python(v) for v in value]
    if isinstance(value, dict):
        return {k: _to_python(v) for k, v in value.items()}
    if isinstance(value, (bytes, bytearray)):
        import base64

        return base64.b64encode(bytes(value)).decode()
    return value
