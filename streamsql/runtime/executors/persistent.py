"""Persistent queries: CREATE STREAM/TABLE … AS SELECT, INSERT INTO … SELECT, TERMINATE, and
the one way such a query starts — on its statement, on a replay of the command log, after a
failure (the supervisor's restart) — from its checkpoint under the data directory.

Each query writes its sink topic from Spark's executors (``physical/builder.py``); a table's
query writes the table's changelog, which the table's store follows for pull queries. A source
table's materialization is a persistent query too (``CST_<table>_<seq>``), writing an internal
changelog topic since its own topic is read-only.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from streamsql import types as t
from streamsql.catalog import QueryInfo, Source
from streamsql.errors import AnalysisError, CatalogError, spark_message
from streamsql.formats.features import features
from streamsql.functions.casts import cast_value
from streamsql.physical.builder import (
    CHECKPOINT_META,
    SparkBuilder,
    buckets_for,
    has_committed_batch,
    has_planned_batch,
    operator_for,
)
from streamsql.physical.steps import Aggregate, Collect, KafkaSink, PhysicalPlan, physical_plan
from streamsql.planner import ddl
from streamsql.planner.aggregation import AggregatePlan
from streamsql.planner.expressions import quote
from streamsql.planner.joins import JoinedSource
from streamsql.planner.planner import QueryPlan
from streamsql.runtime import internal_topics, paths, starts
from streamsql.runtime import results as r
from streamsql.runtime.executors import Deferred, Handler, StatementExecutor, same_statement
from streamsql.runtime.materialized import TableStore
from streamsql.runtime.queries import stop_handle
from streamsql.sql import ast, parse

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger("streamsql")


class PersistentQueries(StatementExecutor):
    def handlers(self) -> Mapping[type[ast.Statement], Handler]:
        return {ast.CreateAsSelect: self.create_as_select, ast.InsertInto: self.insert_into,
                ast.Terminate: self.terminate_statement, ast.PauseQuery: self.pause_statement,
                ast.ResumeQuery: self.resume_statement}

    # --- statements ----------------------------------------------------------------------------

    def create_as_select(self, stmt: ast.CreateAsSelect, replay_seq: int | None = None,
                         deferred: Deferred | None = None) -> r.Result:
        engine = self.engine
        existing = engine.catalog.find(stmt.name)
        if existing is not None:
            if same_statement(existing.statement, stmt.text):
                return r.CommandStatus(stmt.text, f"{stmt.kind.title()} {stmt.name} already exists (unchanged); "
                                                  f"query {existing.writer_query} resumes from its checkpoint",
                                       query_id=existing.writer_query)
            if stmt.if_not_exists:
                return r.Warning_(stmt.text, f"Cannot add {stmt.kind.lower()} {stmt.name}: A "
                                             f"{existing.kind.lower()} with the same name already exists.")
            raise CatalogError(f"Cannot add {stmt.kind.lower()} '{stmt.name}': A {existing.kind.lower()} "
                               f"with the same name already exists")
        ddl.check_no_windowed_table(engine.catalog, stmt.query)
        ddl.check_timestamp_projected(stmt)
        ddl.check_table_is_grouped(stmt, engine.functions)
        plan = engine.planner.plan_query(stmt.query, persistent=True, sink_name=stmt.name)
        produces_table = isinstance(plan, AggregatePlan) or plan.source.is_table
        if produces_table and stmt.kind == "STREAM":
            raise AnalysisError("Invalid result type. Your SELECT query produces a TABLE. Please use CREATE TABLE "
                                "AS SELECT statement instead.")
        if not produces_table and stmt.kind == "TABLE":
            raise AnalysisError("Invalid result type. Your SELECT query produces a STREAM. Please use CREATE STREAM "
                                "AS SELECT statement instead.")
        if stmt.query.emit == "FINAL" and (not isinstance(plan, AggregatePlan) or plan.window is None):
            raise AnalysisError("EMIT FINAL is only supported for windowed aggregations.")
        sink = engine.definitions.sink(stmt, plan)
        if replay_seq is None:
            internal_topics.check_insert(sink.topic)
        sink.columns = self.output_columns(plan)
        # WITH (TIMESTAMP=...): the records it writes carry that column's time (the builder's sink)
        sink.timestamp_column = engine.definitions.timestamp_column(stmt.properties, sink.columns)
        sink.timestamp_format = stmt.properties.get("TIMESTAMP_FORMAT")
        if isinstance(plan, AggregatePlan) and not features(sink.value_format).complex_state and any(
                c.function.complex_state for c in plan.calls):
            raise AnalysisError("One of the functions used in the statement has an intermediate type that the value "
                                "format can not handle. Please remove the function or change the format.")
        sink.key_format_options = ddl.format_options(stmt.properties, "KEY", sink.key_format)
        sink.value_format_options = ddl.format_options(stmt.properties, "VALUE", sink.value_format)
        engine.definitions.validate_formats(sink)
        engine.definitions.bind_schemas(sink, stmt.properties)
        if replay_seq is None:
            config = {"cleanup.policy": "compact"} if sink.is_table and not sink.window_type else None
            replicas = int(stmt.properties.get("REPLICAS") or engine.prop("ksql.sink.replicas") or 1)
            engine.admin.create_topic(sink.topic, sink.partitions, replicas, config)
        seq = engine.log_command(stmt, replay_seq)
        query_id = f"{'CTAS' if sink.is_table else 'CSAS'}_{stmt.name}_{seq}"
        sink.writer_query = query_id
        engine.catalog.add(sink)
        return self._created(query_id, seq, plan, stmt, sink, deferred)

    def insert_into(self, stmt: ast.InsertInto, replay_seq: int | None = None,
                    deferred: Deferred | None = None) -> r.Result:
        engine = self.engine
        target = engine.catalog.find(stmt.target)
        if target is None:
            where = f"Line: {stmt.target_position[0]}, Col: {stmt.target_position[1]}: " if stmt.target_position else ""
            raise CatalogError(f"{where}Source `{stmt.target}` does not exist.")
        for q in engine.catalog.queries_writing(target.name):
            if same_statement(q.statement, stmt.text):
                return r.CommandStatus(stmt.text, f"Query {q.id} already runs this statement (unchanged)",
                                       query_id=q.id)
        if target.is_table:
            raise AnalysisError(f"INSERT INTO can only be used to insert into a stream. {target.name} is a table.")
        if any(c.role in ("headers", "header") for c in target.columns):
            # a query cannot write a record's headers (ksqlDB's rule, checked before read-only)
            raise AnalysisError(f"Cannot insert into {target.name} because it has header columns")
        if target.is_source:
            raise AnalysisError(f"Cannot insert into read-only stream: {target.name}")
        if replay_seq is None:
            internal_topics.check_insert(target.topic)
        ddl.check_no_windowed_table(engine.catalog, stmt.query)
        plan = engine.planner.plan_query(stmt.query, persistent=True, sink_name=target.name)
        produced = self.output_columns(plan)
        expected = [c for c in target.columns if c.role in ("key", "value")]
        if isinstance(plan, QueryPlan) and widened(plan, produced, expected):
            # ksqlDB casts numbers up to the sink's types (INT → BIGINT → DECIMAL → DOUBLE)
            produced = self.output_columns(plan)
        if [(c.name, str(c.type), c.role) for c in produced] != [(c.name, str(c.type), c.role) for c in expected]:
            raise AnalysisError(
                f"Incompatible schema between results and sink.\nResult schema is "
                f"{', '.join(c.sql() for c in produced)}\nSink schema is {', '.join(c.sql() for c in expected)}")
        if "QUERY_ID" in stmt.properties:
            # a logged one was accepted before these checks: its id stays (its state's path is encoded)
            requested = str(stmt.properties["QUERY_ID"]).upper()
            check_query_id(requested, engine.catalog.queries, new=replay_seq is None)
        seq = engine.log_command(stmt, replay_seq)
        query_id = str(stmt.properties.get("QUERY_ID") or f"INSERTQUERY_{seq}").upper()
        return self._created(query_id, seq, plan, stmt, target, deferred)

    def _created(self, query_id: str, seq: int, plan: QueryPlan | AggregatePlan,
                 stmt: ast.CreateAsSelect | ast.InsertInto, sink: Source, deferred: Deferred | None) -> r.Result:
        """A logged CREATE … AS SELECT / INSERT INTO becomes query ``query_id`` in the catalog and
        starts now, or after the replay when ``deferred`` collects the log's queries."""
        self.engine.catalog.add_query(QueryInfo(query_id, stmt.text, sink.name, _input_names(plan.source)))
        if deferred is not None:
            deferred.append((query_id, plan, stmt, sink.name))
        else:
            self.start(query_id, plan, stmt, sink)
        return r.CommandStatus(stmt.text, f"Created query with ID {query_id}", command_seq=seq, query_id=query_id)

    def terminate_statement(self, stmt: ast.Terminate, replay_seq: int | None = None,
                            deferred: Deferred | None = None) -> r.Result:
        push = self.engine.queries.find_push(stmt.query_id) if stmt.query_id and replay_seq is None else None
        if push is not None:  # a push query: ended, not logged (nothing of it outlives the server)
            self.engine.queries.end_push(push)
            return r.CommandStatus(stmt.text, "Query terminated.")
        for qid in self._query_ids(stmt.query_id):
            self.terminate(qid)
        self.engine.log_command(stmt, replay_seq)
        return r.CommandStatus(stmt.text, "Query terminated." if stmt.query_id else "All queries terminated.")

    def _query_ids(self, query_id: str | None) -> list[str]:
        """The queries a TERMINATE / PAUSE / RESUME names (ALL: every one), each checked to exist
        before any is touched."""
        catalog = self.engine.catalog
        ids = [query_id.upper()] if query_id else list(catalog.queries)
        for qid in ids:
            if qid not in catalog.queries:
                raise CatalogError(f"Unknown queryId: {qid}")
        return ids

    def pause_statement(self, stmt: ast.PauseQuery, replay_seq: int | None = None,
                        deferred: Deferred | None = None) -> r.Result:
        """PAUSE: the query stops reading; its offsets and state stay in its checkpoint, so
        RESUME (or a restart of the engine, which keeps it paused: the command is logged) goes on
        from there. Connectors are not queries here and are not paused."""
        for qid in self._query_ids(stmt.query_id):
            if replay_seq is not None and deferred is not None:
                self._pause_deferred(qid, deferred)
            else:
                self.engine.queries.pause(qid)
        self.engine.log_command(stmt, replay_seq)
        return r.CommandStatus(stmt.text, "Query paused.")

    def _pause_deferred(self, query_id: str, deferred: Deferred) -> None:
        """During a replay the query has not started yet: take it out of the start list and
        keep how to start it for RESUME."""
        for i, entry in enumerate(deferred):
            if entry[0] == query_id:
                del deferred[i]
                self.engine.queries.paused_before_start(query_id, functools.partial(self._start_entry, entry))
                return
        self.engine.queries.pause(query_id)

    def _start_entry(self, entry: tuple[str, QueryPlan | AggregatePlan, ast.Statement, str]) -> None:
        query_id, plan, query, sink_name = entry
        self.start(query_id, plan, query, self.engine.catalog.get(sink_name))

    def resume_statement(self, stmt: ast.ResumeQuery, replay_seq: int | None = None,
                         deferred: Deferred | None = None) -> r.Result:
        for qid in self._query_ids(stmt.query_id):
            if replay_seq is not None and deferred is not None and qid not in self.engine.queries.paused:
                continue
            self.engine.queries.resume(qid)
        self.engine.log_command(stmt, replay_seq)
        return r.CommandStatus(stmt.text, "Query resumed.")

    def materialize_source_table(self, table: Source, seq: int, deferred: Deferred | None) -> None:
        """A CREATE SOURCE TABLE is queryable (ksqlDB): a query ``CST_<name>_<seq>`` reads the
        topic into the table's store, nothing else. It is the table's writer, so DROP stops it and
        a restart resumes it from its checkpoint like any persistent query."""
        engine = self.engine
        query = parse(f"SELECT * FROM {quote(table.name)} EMIT CHANGES;", custom_types=engine.catalog.types)[0]
        assert isinstance(query, ast.SelectStatement)
        plan = engine.planner.plan_query(query.query, persistent=True, sink_name=table.name)
        query_id = f"CST_{table.name}_{seq}"
        table.writer_query = query_id
        engine.catalog.add_query(QueryInfo(query_id, table.statement, table.name, []))
        if deferred is not None:
            deferred.append((query_id, plan, query, table.name))
        else:
            self.start(query_id, plan, query, table)

    # --- the query's output ----------------------------------------------------------------------

    def output_columns(self, plan: QueryPlan | AggregatePlan) -> list[t.Column]:
        """The query's output columns and their types, from Spark's analysis of its plan."""
        engine = self.engine
        builder = SparkBuilder(engine.build_context("planning"))
        try:
            return builder.output_columns(physical_plan(plan, Collect(_ignore), engine.offset_reset()))
        except Exception as e:  # Spark's analyser: type errors the compiler could not see
            raise AnalysisError(spark_message(e)) from None

    def plan(self, plan: QueryPlan | AggregatePlan, sink: Source, checkpoint: Path | None,
             starting_offsets: str) -> PhysicalPlan:
        """A persistent query's steps; every one writes its topic from the executors. A table's
        query (an aggregation, a filter/projection, a source table's materialization) writes
        the table's changelog, which its store follows."""
        engine = self.engine
        if isinstance(plan, AggregatePlan):
            wanted = engine.aggregation_buckets(plan)
            buckets = buckets_for(checkpoint, wanted) if checkpoint is not None else wanted
            return physical_plan(plan, KafkaSink(sink), starting_offsets, buckets=buckets,
                                 cache=engine.record_cache(),
                                 operator=operator_for(checkpoint) or engine.aggregation_operator())
        if sink.is_table:
            buckets = engine.table_buckets(plan)
            if checkpoint is not None:
                buckets = buckets_for(checkpoint, buckets)
            return physical_plan(plan, KafkaSink(sink), starting_offsets, changelog=True, buckets=buckets)
        # exactly-once writes a transaction per sink task, and the reader's tasks read committed
        # records: those queries keep Spark's plan (kafka/pipe.py)
        return physical_plan(plan, KafkaSink(sink), starting_offsets, in_reader=not engine.exactly_once())

    # --- starting and stopping -------------------------------------------------------------------

    def restart(self, query_id: str, plan: QueryPlan | AggregatePlan, stmt: ast.Statement, sink: Source) -> None:
        """Stop a persistent query and start it again from its checkpoint, planned anew (the
        server's supervisor does this after a failure, under the statement's own session)."""
        engine = self.engine
        with engine.command_lock:
            running = engine.queries.get(query_id)
            if running is not None:
                stop_handle(running.handle)
            self.start(query_id, plan, stmt, sink)

    def start(self, query_id: str, plan: QueryPlan | AggregatePlan, stmt: ast.Statement, sink: Source) -> None:
        """Start (or resume, from its checkpoint) the persistent query ``query_id``; with
        ``engine.planning_only``, only record its steps."""
        engine = self.engine
        checkpoint = paths.checkpoint_dir(engine.data_dir, query_id)
        resumed = has_committed_batch(checkpoint)
        if checkpoint.exists() and not resumed and not has_planned_batch(checkpoint):
            # stopped before Spark planned its first batch; once planned (its offsets logged),
            # Spark replays that batch over the same offsets, and under exactly_once_v2 under
            # the same query id, so a write that happened before the crash is not repeated
            starts.restart_uncommitted(checkpoint, engine.data_dir)
        if sink.is_table and sink.is_source and resumed and not (checkpoint / CHECKPOINT_META).exists():
            # a source table's materialization from an earlier streamsql (the driver's store):
            # its changelog is internal and the topic is the input, so it is rebuilt from the start
            log.warning("rebuilding %s's materialization from its topic (written by an earlier streamsql)", sink.name)
            paths.remove_tree(engine.data_dir, checkpoint)
            resumed = False
        if sink.is_table and sink.is_source:
            changelog = (replace(sink, topic=source_changelog_topic(sink)) if engine.planning_only
                         else self._source_changelog(sink, fresh=not resumed))
        else:
            changelog = sink
        physical = self.plan(plan, changelog, checkpoint, engine.offset_reset())
        engine.queries.plans[query_id] = physical
        if engine.planning_only:
            return
        if not resumed:  # where it begins is decided now, not when Spark plans its first batch
            starts.pin_starts(physical, engine.admin.end_offsets, checkpoint)
        if sink.is_table:  # its store follows the changelog topic the query writes
            self._store(sink)
            engine.followed[sink.name] = changelog
        count_late = any(isinstance(s, Aggregate) for s in physical.steps)
        context = replace(engine.build_context(query_id, count_late=count_late),
                          trigger_interval_ms=engine.commit_interval_ms())
        handle = SparkBuilder(context).start(physical, checkpoint, query_id)
        engine.queries.started(engine.catalog.queries[query_id], handle, checkpoint,
                               restart=lambda: self.start(query_id, plan, stmt, sink))

    def terminate(self, query_id: str) -> None:
        """Stop a persistent query for good (TERMINATE, or DROP of its sink) and remove what it
        kept: its checkpoint (offsets and state store) — ksqlDB deletes a terminated query's
        internal topics and state the same way; nothing can resume it, so nothing is left."""
        engine = self.engine
        engine.queries.stop(query_id)
        paths.remove_tree(engine.data_dir, paths.checkpoint_dir(engine.data_dir, query_id))
        info = engine.catalog.remove_query(query_id)
        if info is not None:
            sink = engine.catalog.find(info.sink)
            if sink is not None and sink.writer_query == query_id:
                sink.writer_query = None

    def _source_changelog(self, table: Source, fresh: bool) -> Source:
        """A source table's changelog: its topic is read-only, so its query writes an internal
        topic (``_streamsql-<query>-<topic>-changelog``, hidden from SHOW TOPICS; ksqlDB keeps a
        changelog topic for it too) that the table's store follows. A fresh query starts it
        empty, with an empty store; DROP deletes it."""
        engine = self.engine
        changelog = replace(table, topic=source_changelog_topic(table))
        exists = changelog.topic in engine.admin.topics()
        if fresh or not exists:
            if exists:
                engine.admin.delete_topic(changelog.topic)
            # compacted, as a table's topic: the latest value per key is what it must keep
            engine.create_internal_topic(changelog.topic, max(1, int(table.partitions or 1)),
                                         {} if table.window_type else {"cleanup.policy": "compact"})
            store = engine.stores.pop(table.name, None)
            if store is not None:
                store.close()
            paths.remove_table_store(engine.data_dir, table.writer_query or table.name)
        return changelog

    def _store(self, table: Source) -> TableStore:
        engine = self.engine
        store = engine.stores.get(table.name)
        if store is None:
            store = TableStore(paths.table_store(engine.data_dir, table.writer_query or table.name))
            engine.stores[table.name] = store
        return store


def source_changelog_topic(table: Source) -> str:
    """The internal changelog topic of a source table's materialization (one per query: a
    re-created table starts a new one)."""
    name = f"_streamsql-{table.writer_query or table.name}-{table.topic}-changelog"
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)[:249]


#: the query ids streamsql gives its own queries begin so: INSERT INTO's QUERY_ID may not
#: (ksqlDB's QueryIdUtil.ReservedQueryIdsPrefixes, in its order)
RESERVED_QUERY_ID_PREFIXES = ("INSERTQUERY_", "CTAS_", "CSAS_", "CST_")
_VALID_QUERY_ID = re.compile(r"[A-Za-z0-9_]+")


def check_query_id(query_id: str, existing: Mapping[str, QueryInfo], new: bool) -> None:
    """INSERT INTO's upper-cased ``WITH (QUERY_ID=…)`` as ksqlDB checks it: no reserved prefix,
    only ``[A-Za-z0-9_]`` (QueryIdUtil), not an existing query's (EngineExecutor). ``new``: the
    statement is not a replay; a logged one was accepted by an earlier version without the first
    two rules and keeps its id (its state's path is encoded: runtime/paths.py)."""
    if new:
        if query_id.startswith(RESERVED_QUERY_ID_PREFIXES):
            raise AnalysisError(f"Query IDs must not start with a reserved query ID prefix "
                                f"({', '.join(RESERVED_QUERY_ID_PREFIXES)}). Got '{query_id}'.")
        if not _VALID_QUERY_ID.fullmatch(query_id):
            raise AnalysisError(f"Query IDs may contain only alphanumeric characters and '_'. Got: '{query_id}'")
    if query_id in existing:
        raise CatalogError(f"Query ID '{query_id}' already exists.")


_NUMERIC_RANK = {t.Kind.INTEGER: 0, t.Kind.BIGINT: 1, t.Kind.DECIMAL: 2, t.Kind.DOUBLE: 3}


def widened(plan: QueryPlan, produced: list[t.Column], expected: list[t.Column]) -> bool:
    """Cast the plan's numeric columns up to the sink's wider numeric types, in place, when that
    is all that differs (ksqlDB's implicit casts for INSERT INTO); whether any was cast."""
    if [(c.name, c.role) for c in produced] != [(c.name, c.role) for c in expected]:
        return False
    casts: dict[str, t.SqlType] = {}
    for have, want in zip(produced, expected):
        if str(have.type) == str(want.type):
            continue
        lo, hi = _NUMERIC_RANK.get(have.type.kind), _NUMERIC_RANK.get(want.type.kind)
        if lo is None or hi is None or lo > hi:
            return False
        casts[have.name] = want.type
    if not casts:
        return False
    types = {c.name: c.type for c in produced}
    plan.columns = [replace(c, sql=cast_value(c.sql, types[c.name], casts[c.name]), type=casts[c.name])
                    if c.name in casts else c for c in plan.columns]
    return True


def _ignore(_df: DataFrame, _batch_id: int) -> None:
    """The terminal step of a plan built only to learn its output columns."""


def _input_names(source: Source) -> list[str]:
    """The catalog sources a query reads (both sides of a join)."""
    if isinstance(source, JoinedSource) and source.join is not None:
        return [side.source.name for side in source.join.leaves()]
    return [source.name]
