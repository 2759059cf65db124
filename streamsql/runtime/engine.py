"""The engine: ``execute(statement text) -> typed results``, over one SparkSession and one Kafka
cluster.

Every surface (headless runner, shell, REST server) goes through :meth:`Engine.execute`. The
engine keeps the catalog, runs persistent queries (one Spark streaming query per CSAS / INSERT
INTO, each with its own checkpoint under the data directory) and transient push/pull queries.

Durability follows ksqlDB: successful DDL/DML statements are appended to the command log and
replayed on start, which rebuilds the catalog and restarts persistent queries with the same ids,
so each resumes from its checkpoint. INSERT VALUES is not logged (replaying it would duplicate).
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from streamsql import types as t
from streamsql.catalog import Catalog, FileCommandLog, QueryInfo, Source
from streamsql.catalog.commands import CommandLog
from streamsql.errors import (
    AnalysisError,
    CatalogError,
    ConfigError,
    KafkaError,
    StreamsqlError,
    spark_message,
)
from streamsql.kafka import settings as kafka_settings
from streamsql.kafka import transactions
from streamsql.kafka.transactions import GUARANTEE_PROPERTY
from streamsql.physical.builder import (
    CHECKPOINT_META,
    BuildContext,
    SparkBuilder,
    buckets_for,
    has_committed_batch,
    has_planned_batch,
    operator_for,
)
from streamsql.physical.steps import (
    Aggregate,
    Collect,
    KafkaSink,
    PhysicalPlan,
    physical_plan,
)
from streamsql.planner import ddl
from streamsql.planner.aggregation import AggregatePlan
from streamsql.planner.casts import cast_value
from streamsql.planner.ddl import SourceDefinitions
from streamsql.planner.expressions import quote
from streamsql.planner.joins import JoinedSource
from streamsql.planner.planner import Planner, QueryPlan, source_columns
from streamsql.runtime import results as r
from streamsql.runtime import starts
from streamsql.runtime.config import VALID_OFFSET_RESETS, EngineConfig, property_names, same_property
from streamsql.runtime.data_dir import DataDirLock, check_cluster, record_cluster
from streamsql.runtime.materialized import TableStore
from streamsql.runtime.pull import check_access_path, lookup_for
from streamsql.runtime.session import Session
from streamsql.runtime.topology import Topology
from streamsql.sql import ast, parse
from streamsql.types import TOMBSTONE_COL

if TYPE_CHECKING:
    from pyspark import Accumulator
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from streamsql.kafka.admin import KafkaAdmin

log = logging.getLogger("streamsql")


#: persistent queries whose start waits for the end of a replay: (id, plan, statement, sink name)
Deferred = list[tuple[str, QueryPlan | AggregatePlan, ast.Statement, str]]


@dataclass
class RunningQuery:
    info: QueryInfo
    handle: StreamingQuery
    checkpoint: Path
    #: starts the query again from its checkpoint (after a failure of the machine, not the query)
    restart: Callable[[], None] | None = None
    restarts: int = 0


#: Spark gives each new Python worker 10 s to connect back; an overloaded machine can miss that.
#: The query itself is fine: it is restarted from its checkpoint (nothing lost or repeated).
TRANSIENT_FAILURES = ("Python worker failed to connect back",)
MAX_RESTARTS = 3
PULL_QUERY_HELP = " See https://cnfl.io/queries for more info.\nAdd EMIT CHANGES if you intended to issue a push query."


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


def _enabled(name: str, value: str) -> bool:
    """A boolean property's value; anything but true/false is a configuration error naming it."""
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise ConfigError(f"Invalid value {value} for configuration {name}: Expected value to be either "
                          f"true or false")
    return text == "true"


def _normalize(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip().rstrip(";")).strip().upper()


class Engine:
    def __init__(self, config: EngineConfig, command_log: CommandLog | None = None,
                 spark: SparkSession | None = None) -> None:
        if not config.bootstrap_servers:
            raise ConfigError("the engine needs bootstrap servers "
                              "(the CLI starts an embedded broker when none are given)")
        self.config = config
        self.bootstrap_servers: str = config.bootstrap_servers
        #: every Kafka client of this cluster gets them, in this process and in executors
        self.kafka_settings = config.client_settings()
        kafka_settings.check(self.bootstrap_servers, self.kafka_settings)
        kafka_settings.register(self.bootstrap_servers, self.kafka_settings)
        self.data_dir = Path(config.data_dir)
        self.catalog = Catalog()
        self.planner = Planner(self.catalog)
        self.definitions = SourceDefinitions(self.prop)
        #: the engine's own session (the CLI, shell and runner run under it)
        self.session = Session()
        self._active = self.session
        self.queries: dict[str, RunningQuery] = {}
        self.stores: dict[str, TableStore] = {}
        #: tables whose store follows their changelog topic (caught up per pull query): the
        #: table's own topic, or a source table's internal changelog topic
        self.followed: dict[str, Source] = {}
        #: the steps each persistent query runs (EXPLAIN prints them)
        self.physical_plans: dict[str, PhysicalPlan] = {}
        #: per aggregation query: a Spark accumulator of the records its windows dropped as late
        self.dropped_records: dict[str, Accumulator[int]] = {}
        self._command_log = command_log
        self._claim = DataDirLock(self.data_dir)
        self._spark = spark
        self._admin: KafkaAdmin | None = None
        #: held while a statement executes; hold it to make several engine calls one step
        self.lock = threading.RLock()
        self._transient_seq = 0
        from streamsql.runtime.connectors import ConnectorStatements

        self.connectors = ConnectorStatements(self)
        from streamsql.runtime.inspection import Inspection

        self.inspection = Inspection(self)
        from streamsql.runtime.inserts import ValueInserts

        self.inserts = ValueInserts(self)
        #: plan persistent queries and connectors without starting them (``plan_only``)
        self.planning_only = False

    # --- lifecycle ---------------------------------------------------------------------------

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            from streamsql.runtime.spark import get_spark

            self._spark = get_spark(self.config.spark_master, self.config.spark_conf or None)
        return self._spark

    @property
    def started_spark(self) -> SparkSession | None:
        """The SparkSession if one was started (or given), without starting one."""
        return self._spark

    @property
    def admin(self) -> KafkaAdmin:
        if self._admin is None:
            from streamsql.kafka.admin import KafkaAdmin

            self._admin = KafkaAdmin(self.bootstrap_servers)
        return self._admin

    @property
    def command_log(self) -> CommandLog:
        if self._command_log is None:
            self._command_log = FileCommandLog(self.data_dir / "commands.jsonl")
        return self._command_log

    def start(self) -> list[str]:
        """Connect to Kafka, check that the data directory belongs to this cluster, replay the
        command log. Returns notices for the user (one line each)."""
        notices: list[str] = []
        self._claim.acquire()  # one engine per data directory
        try:
            cluster = self.admin.cluster_id()
            reset = check_cluster(self.data_dir, cluster, self.bootstrap_servers)
        except BaseException:
            self._claim.release()
            raise
        if reset is not None:
            notices.append(reset)
            self._reset_state()
        record_cluster(self.data_dir, cluster, self.bootstrap_servers, self.config.ephemeral_kafka)
        self._create_internal_topic(self.processing_log_topic, 1)
        from streamsql.udf import functions as python_functions

        notices += [f"Python functions: {p}"
                    for p in python_functions.load(self.config.property("ksql.extension.dir") or None)]
        replayed = self._replay()
        if replayed:
            notices.append(f"Restored {len(self.catalog.sources)} source(s) and {len(self.queries)} "
                           f"persistent query(ies) from {replayed} command(s)")
        return notices

    def _reset_state(self) -> None:
        if isinstance(self.command_log, FileCommandLog):
            self.command_log.reset()
        shutil.rmtree(self.data_dir / "checkpoints", ignore_errors=True)

    def _replay(self) -> int:
        commands = self.command_log.read_all()
        deferred: Deferred = []
        #: each query restarts under the properties its statement ran with (auto.offset.reset
        #: decides where a query with no committed checkpoint offsets begins)
        properties_of: dict[str, dict[str, str]] = {}
        for cmd in commands:
            started = len(deferred)
            try:
                with self.session_scope(Session(dict(cmd.properties))):
                    for stmt in parse(cmd.statement, custom_types=self.catalog.types):
                        self._execute(stmt, replay_seq=cmd.seq, deferred=deferred)
            except StreamsqlError as e:
                log.warning("could not replay command %s (%s): %s", cmd.seq, cmd.statement, e)
            finally:
                for entry in deferred[started:]:
                    properties_of[entry[0]] = dict(cmd.properties)
        for query_id, plan, stmt, sink in deferred:
            if query_id in self.catalog.queries:
                with self.session_scope(Session(properties_of.get(query_id, {}))):
                    self._start_persistent(query_id, plan, stmt, self.catalog.get(sink))
        return len(commands)

    def close(self) -> None:
        with self.lock:
            for q in list(self.queries.values()):
                self.stop_handle(q.handle)
            self.queries.clear()
            for store in self.stores.values():
                store.stop_following()
            self.inspection.close()
        if self._admin is not None:
            self._admin.close()
        self._claim.release()

    # --- properties ----------------------------------------------------------------------------

    def prop(self, name: str) -> str:
        """A property's value: the running session's override, else engine config, else
        ksqlDB's default (either spelling of a Kafka Streams property: ``config.property_names``)."""
        for spelling in property_names(name):
            value = self._active.properties.get(spelling)
            if value:
                return value
        return self.config.property(name)

    @property
    def active_session(self) -> Session:
        """The session statements run under now: a caller's inside :meth:`session_scope`, else
        the engine's own."""
        return self._active

    @contextmanager
    def session_scope(self, session: Session) -> Iterator[Session]:
        """Run engine calls under ``session`` (holding the engine's lock): what its statements
        SET or DEFINE stays in it, and the engine's own session is untouched."""
        with self.lock:
            saved, self._active = self._active, session
            try:
                yield session
            finally:
                self._active = saved

    @property
    def processing_log_topic(self) -> str:
        return f"{self.config.property('ksql.service.id')}ksql_processing_log"

    # --- execute -------------------------------------------------------------------------------

    def execute(self, text: str, session: Session | None = None) -> list[r.Result]:
        """Parse ``text`` (one or more statements) and execute each in order, under ``session``
        (default: the running one, see :attr:`active_session`). A failing statement raises;
        statements before it have taken effect."""
        with self.lock:
            session = session or self._active
            out: list[r.Result] = []
            for stmt in parse(text, variables=session.variables, custom_types=self.catalog.types):
                out.append(self.execute_statement(stmt, session))
            return out

    def execute_statement(self, stmt: ast.Statement, session: Session | None = None) -> r.Result:
        """Execute one parsed statement under ``session`` (default: the running one)."""
        with self.lock, self.session_scope(session or self._active):
            try:
                return self._execute(stmt)
            except StreamsqlError as e:
                if e.statement is None:
                    e.statement = stmt.text
                raise

    def _execute(self, stmt: ast.Statement, replay_seq: int | None = None,
                 deferred: Deferred | None = None) -> r.Result:
        handler = getattr(self, f"_do_{type(stmt).__name__}", None)
        if handler is None:
            raise AnalysisError(f"Statement not supported yet: {stmt.text}")
        if replay_seq is not None and isinstance(stmt, (ast.CreateSource, ast.CreateAsSelect, ast.InsertInto,
                                                        ast.DropSource, ast.Terminate, ast.CreateType, ast.DropType,
                                                        ast.CreateConnector, ast.DropConnector)):
            return handler(stmt, replay_seq=replay_seq, deferred=deferred)
        return handler(stmt)

    def log_command(self, stmt: ast.Statement, replay_seq: int | None) -> int:
        """Append an accepted statement to the command log with its session's properties (a
        replayed one is logged already: its sequence number is returned)."""
        if replay_seq is not None:
            return replay_seq
        return self.command_log.append(stmt.text, dict(self._active.properties)).seq

    # --- DDL -----------------------------------------------------------------------------------

    def _do_CreateSource(self, stmt: ast.CreateSource, replay_seq: int | None = None,
                         deferred: Deferred | None = None) -> r.Result:
        existing = self.catalog.find(stmt.name)
        if stmt.or_replace and (stmt.is_source or (existing is not None and existing.is_source)):
            raise CatalogError(f"Cannot add {stmt.kind.lower()} '{stmt.name}': CREATE OR REPLACE is not supported on "
                               f"source {stmt.kind.lower()}s.")
        if existing is not None:
            if _normalize(existing.statement) == _normalize(stmt.text):
                return r.CommandStatus(stmt.text, f"{stmt.kind.title()} {stmt.name} already exists (unchanged)")
            if stmt.if_not_exists:
                return r.Warning_(stmt.text, f"Cannot add {stmt.kind.lower()} {stmt.name}: A {existing.kind.lower()} "
                                             f"with the same name already exists.")
            if not stmt.or_replace:
                raise CatalogError(f"Cannot add {stmt.kind.lower()} '{stmt.name}': A {existing.kind.lower()} "
                                   f"with the same name already exists")
        if replay_seq is None:  # a command an earlier version accepted replays as it ran then
            for column in stmt.columns:
                ddl.check_header_type(column)
        source = self.definitions.source(stmt)
        if stmt.kind == "TABLE" and not source.key_columns:
            raise AnalysisError("Tables require a PRIMARY KEY. Please define the PRIMARY KEY.")
        if replay_seq is None:
            partitions = stmt.properties.get("PARTITIONS")
            if self.admin.topic_exists(source.topic):
                source.partitions = self.admin.partitions(source.topic)
                if partitions is not None and int(partitions) != source.partitions:
                    raise KafkaError(f"A Kafka topic with the name '{source.topic}' already exists, with different "
                                     f"partition count. Existing: {source.partitions}, requested: {partitions}")
            elif partitions is not None:
                replicas = int(stmt.properties.get("REPLICAS", 1))
                self.admin.create_topic(source.topic, int(partitions), replicas)
                source.partitions = int(partitions)
            else:
                raise KafkaError(f"Topic '{source.topic}' does not exist. Create the topic first or set the "
                                 f"PARTITIONS property in the WITH clause to have streamsql create it.")
        else:
            source.partitions = int(stmt.properties.get("PARTITIONS", 1))
        if existing is not None:
            self.catalog.remove(existing.name)
        self.catalog.add(source)
        seq = self.log_command(stmt, replay_seq)
        if source.is_source and source.is_table:
            self._materialize_source_table(source, seq, deferred)
        return r.CommandStatus(stmt.text, f"{stmt.kind.title()} created")

    def _materialize_source_table(self, table: Source, seq: int, deferred: Deferred | None) -> None:
        """A CREATE SOURCE TABLE is queryable (ksqlDB): a query ``CST_<name>_<seq>`` reads the
        topic into the table's store, nothing else. It is the table's writer, so DROP stops it and
        a restart resumes it from its checkpoint like any persistent query."""
        query = parse(f"SELECT * FROM {quote(table.name)} EMIT CHANGES;", custom_types=self.catalog.types)[0]
        assert isinstance(query, ast.SelectStatement)
        plan = self.planner.plan_query(query.query, persistent=True, sink_name=table.name)
        query_id = f"CST_{table.name}_{seq}"
        table.writer_query = query_id
        self.catalog.queries[query_id] = QueryInfo(query_id, table.statement, table.name, [])
        if deferred is not None:
            deferred.append((query_id, plan, query, table.name))
        else:
            self._start_persistent(query_id, plan, query, table)

    # --- Schema Registry formats -------------------------------------------------------------

    def _do_DropSource(self, stmt: ast.DropSource, replay_seq: int | None = None,
                       deferred: Deferred | None = None) -> r.Result:
        source = self.catalog.find(stmt.name)
        if source is None:
            if stmt.if_exists:
                return r.CommandStatus(stmt.text, f"Source {stmt.name} does not exist.")
            raise CatalogError(f"Source {stmt.name} does not exist.")
        if source.kind != stmt.kind:
            raise CatalogError(f"Incompatible data source type is {source.kind}, but statement was DROP {stmt.kind}")
        readers = [q.id for q in self.catalog.queries_reading(stmt.name)]
        inserts = [q.id for q in self.catalog.queries_writing(stmt.name) if q.id != source.writer_query]
        if readers or inserts:
            raise CatalogError(f"Cannot drop {stmt.name}.\nThe following queries read from this source: "
                               f"[{', '.join(readers)}].\nThe following queries write into this source: "
                               f"[{', '.join(inserts)}].\nYou need to terminate them before dropping {stmt.name}.")
        if stmt.delete_topic and source.is_source:
            raise CatalogError(f"Cannot delete topic for read-only source: {stmt.name}")
        changelog = source_changelog_topic(source) if source.is_source and source.is_table else None
        store_path = self.data_dir / "tables" / f"{source.writer_query or source.name}.sqlite"
        if source.writer_query:
            self._terminate(source.writer_query)
        if changelog is not None and replay_seq is None:
            self._delete_topic(changelog)
        self.followed.pop(stmt.name, None)
        store = self.stores.pop(stmt.name, None)
        if store is not None:
            store.close()
        for leftover in (store_path, *store_path.parent.glob(store_path.name + "-*")):  # with SQLite's WAL files
            leftover.unlink(missing_ok=True)
        self.catalog.remove(stmt.name)
        if stmt.delete_topic and replay_seq is None:
            self._delete_topic(source.topic)
        self.log_command(stmt, replay_seq)
        return r.CommandStatus(stmt.text, f"Source `{stmt.name}` (topic: {source.topic}) was dropped.")

    def _delete_topic(self, topic: str) -> None:
        try:
            self.admin.delete_topic(topic)
        except KafkaError as e:
            log.warning("could not delete topic %s: %s", topic, e)

    def _do_CreateType(self, stmt: ast.CreateType, replay_seq: int | None = None,
                       deferred: Deferred | None = None) -> r.Result:
        if stmt.name in self.catalog.types:
            if stmt.if_not_exists:
                return r.Warning_(stmt.text, f"A type with the name '{stmt.name}' already exists")
            raise CatalogError(f"Cannot register custom type '{stmt.name}' since it is already registered "
                               f"with type: {self.catalog.types[stmt.name]}")
        self.catalog.types[stmt.name] = stmt.type
        self.log_command(stmt, replay_seq)
        return r.CommandStatus(stmt.text, f"Registered custom type with name '{stmt.name}' and SQL type {stmt.type}")

    def _do_DropType(self, stmt: ast.DropType, replay_seq: int | None = None,
                     deferred: Deferred | None = None) -> r.Result:
        if stmt.name not in self.catalog.types:
            if stmt.if_exists:
                return r.CommandStatus(stmt.text, f"Type '{stmt.name}' does not exist")
            raise CatalogError(f"Type {stmt.name} does not exist.")
        del self.catalog.types[stmt.name]
        self.log_command(stmt, replay_seq)
        return r.CommandStatus(stmt.text, f"Dropped type '{stmt.name}'")

    # --- persistent queries ------------------------------------------------------------------

    def _do_CreateAsSelect(self, stmt: ast.CreateAsSelect, replay_seq: int | None = None,
                           deferred: Deferred | None = None) -> r.Result:
        existing = self.catalog.find(stmt.name)
        if existing is not None:
            if _normalize(existing.statement) == _normalize(stmt.text):
                return r.CommandStatus(stmt.text, f"{stmt.kind.title()} {stmt.name} already exists (unchanged); "
                                                  f"query {existing.writer_query} resumes from its checkpoint",
                                       query_id=existing.writer_query)
            if stmt.if_not_exists:
                return r.Warning_(stmt.text, f"Cannot add {stmt.kind.lower()} {stmt.name}: A "
                                             f"{existing.kind.lower()} with the same name already exists.")
            raise CatalogError(f"Cannot add {stmt.kind.lower()} '{stmt.name}': A {existing.kind.lower()} "
                               f"with the same name already exists")
        read = self.catalog.find(stmt.query.source.name)
        if read is not None and read.window_type and read.is_table:
            raise AnalysisError("KSQL does not support persistent queries on windowed tables.")
        ddl.check_timestamp_projected(stmt)
        ddl.check_table_is_grouped(stmt)
        plan = self.planner.plan_query(stmt.query, persistent=True, sink_name=stmt.name)
        produces_table = isinstance(plan, AggregatePlan) or plan.source.is_table
        if produces_table and stmt.kind == "STREAM":
            raise AnalysisError("Invalid result type. Your SELECT query produces a TABLE. Please use CREATE TABLE "
                                "AS SELECT statement instead.")
        if not produces_table and stmt.kind == "TABLE":
            raise AnalysisError("Invalid result type. Your SELECT query produces a STREAM. Please use CREATE STREAM "
                                "AS SELECT statement instead.")
        if stmt.query.emit == "FINAL" and (not isinstance(plan, AggregatePlan) or plan.window is None):
            raise AnalysisError("EMIT FINAL is only supported for windowed aggregations.")
        sink = self.definitions.sink(stmt, plan)
        sink.columns = self._output_columns(plan)
        # WITH (TIMESTAMP=...): the records it writes carry that column's time (the builder's sink)
        sink.timestamp_column = self.definitions.timestamp_column(stmt.properties, sink.columns)
        sink.timestamp_format = stmt.properties.get("TIMESTAMP_FORMAT")
        if isinstance(plan, AggregatePlan) and sink.value_format == "DELIMITED" and any(
                c.function.result_type is not None
                and c.function.result_type.kind in (t.Kind.ARRAY, t.Kind.MAP, t.Kind.STRUCT)
                for c in plan.calls):
            raise AnalysisError("One of the functions used in the statement has an intermediate type that the value "
                                "format can not handle. Please remove the function or change the format.")
        sink.key_format_options = ddl.format_options(stmt.properties, "KEY", sink.key_format)
        sink.value_format_options = ddl.format_options(stmt.properties, "VALUE", sink.value_format)
        self.definitions.validate_formats(sink)
        self.definitions.bind_schemas(sink, stmt.properties)
        if replay_seq is None:
            config = {"cleanup.policy": "compact"} if sink.is_table and not sink.window_type else None
            self.admin.create_topic(sink.topic, sink.partitions, int(stmt.properties.get("REPLICAS", 1)), config)
        seq = self.log_command(stmt, replay_seq)
        query_id = f"{'CTAS' if sink.is_table else 'CSAS'}_{stmt.name}_{seq}"
        sink.writer_query = query_id
        self.catalog.add(sink)
        self.catalog.queries[query_id] = QueryInfo(query_id, stmt.text, sink.name, _input_names(plan.source))
        if deferred is not None:
            deferred.append((query_id, plan, stmt, sink.name))
        else:
            self._start_persistent(query_id, plan, stmt, sink)
        return r.CommandStatus(stmt.text, f"Created query with ID {query_id}", command_seq=seq, query_id=query_id)

    def _do_InsertInto(self, stmt: ast.InsertInto, replay_seq: int | None = None,
                       deferred: Deferred | None = None) -> r.Result:
        target = self.catalog.find(stmt.target)
        if target is None:
            where = f"Line: {stmt.target_position[0]}, Col: {stmt.target_position[1]}: " if stmt.target_position else ""
            raise CatalogError(f"{where}Source `{stmt.target}` does not exist.")
        for q in self.catalog.queries_writing(target.name):
            if _normalize(q.statement) == _normalize(stmt.text):
                return r.CommandStatus(stmt.text, f"Query {q.id} already runs this statement (unchanged)",
                                       query_id=q.id)
        if target.is_table:
            raise AnalysisError(f"INSERT INTO can only be used to insert into a stream. {target.name} is a table.")
        if any(c.role in ("headers", "header") for c in target.columns):
            # a query cannot write a record's headers (ksqlDB's rule, checked before read-only)
            raise AnalysisError(f"Cannot insert into {target.name} because it has header columns")
        if target.is_source:
            raise AnalysisError(f"Cannot insert into read-only stream: {target.name}")
        plan = self.planner.plan_query(stmt.query, persistent=True, sink_name=target.name)
        produced = self._output_columns(plan)
        expected = [c for c in target.columns if c.role in ("key", "value")]
        if isinstance(plan, QueryPlan) and _widened(plan, produced, expected):
            # ksqlDB casts numbers up to the sink's types (INT → BIGINT → DECIMAL → DOUBLE)
            produced = self._output_columns(plan)
        if [(c.name, str(c.type), c.role) for c in produced] != [(c.name, str(c.type), c.role) for c in expected]:
            raise AnalysisError(
                f"Incompatible schema between results and sink.\nResult schema is "
                f"{', '.join(c.sql() for c in produced)}\nSink schema is {', '.join(c.sql() for c in expected)}")
        seq = self.log_command(stmt, replay_seq)
        query_id = str(stmt.properties.get("QUERY_ID") or f"INSERTQUERY_{seq}").upper()
        self.catalog.queries[query_id] = QueryInfo(query_id, stmt.text, target.name, _input_names(plan.source))
        if deferred is not None:
            deferred.append((query_id, plan, stmt, target.name))
        else:
            self._start_persistent(query_id, plan, stmt, target)
        return r.CommandStatus(stmt.text, f"Created query with ID {query_id}", command_seq=seq, query_id=query_id)

    def _output_columns(self, plan: QueryPlan | AggregatePlan) -> list[t.Column]:
        """The query's output columns and their types, from Spark's analysis of its plan."""
        builder = SparkBuilder(self.build_context("planning"))
        try:
            return builder.output_columns(physical_plan(plan, Collect(_ignore), self.offset_reset()))
        except Exception as e:  # Spark's analyser: type errors the compiler could not see
            raise AnalysisError(spark_message(e)) from None

    def offset_reset(self) -> str:
        value = self.prop("auto.offset.reset").lower()
        if value not in VALID_OFFSET_RESETS:
            raise ConfigError(f"Invalid value {value} for configuration auto.offset.reset: "
                              f"String must be one of: earliest, latest")
        return value

    def restart_persistent(self, query_id: str, plan: QueryPlan | AggregatePlan, stmt: ast.Statement,
                           sink: Source) -> None:
        """Stop a persistent query and start it again from its checkpoint, planned anew (the
        server's supervisor does this after a failure, under the statement's own session)."""
        with self.lock:
            running = self.queries.get(query_id)
            if running is not None:
                self.stop_handle(running.handle)
            self._start_persistent(query_id, plan, stmt, sink)

    def _start_persistent(self, query_id: str, plan: QueryPlan | AggregatePlan, stmt: ast.Statement,
                          sink: Source) -> None:
        checkpoint = self.data_dir / "checkpoints" / query_id
        resumed = has_committed_batch(checkpoint)
        if checkpoint.exists() and not resumed and not has_planned_batch(checkpoint):
            # stopped before Spark planned its first batch; once planned (its offsets logged),
            # Spark replays that batch over the same offsets, and under exactly_once_v2 under
            # the same query id, so a write that happened before the crash is not repeated
            starts.restart_uncommitted(checkpoint)
        if sink.is_table and sink.is_source and resumed and not (checkpoint / CHECKPOINT_META).exists():
            # a source table's materialization from an earlier streamsql (the driver's store):
            # its changelog is internal and the topic is the input, so it is rebuilt from the start
            log.warning("rebuilding %s's materialization from its topic (written by an earlier streamsql)", sink.name)
            shutil.rmtree(checkpoint, ignore_errors=True)
            resumed = False
        if sink.is_table and sink.is_source:
            changelog = (replace(sink, topic=source_changelog_topic(sink)) if self.planning_only
                         else self._source_changelog(sink, fresh=not resumed))
        else:
            changelog = sink
        physical = self.persistent_plan(plan, changelog, checkpoint, self.offset_reset())
        self.physical_plans[query_id] = physical
        if self.planning_only:
            return
        if not resumed:  # where it begins is decided now, not when Spark plans its first batch
            starts.pin_starts(physical, self.admin.end_offsets, checkpoint)
        if sink.is_table:  # its store follows the changelog topic the query writes
            self._store(sink)
            self.followed[sink.name] = changelog
        context = self.build_context(query_id, count_late=any(isinstance(s, Aggregate) for s in physical.steps))
        handle = SparkBuilder(context).start(physical, checkpoint, query_id)
        info = self.catalog.queries[query_id]
        previous = self.queries.get(query_id)
        self.queries[query_id] = RunningQuery(info, handle, checkpoint,
                                              restart=lambda: self._start_persistent(query_id, plan, stmt, sink),
                                              restarts=previous.restarts if previous is not None else 0)

    def persistent_plan(self, plan: QueryPlan | AggregatePlan, sink: Source, checkpoint: Path | None,
                       starting_offsets: str) -> PhysicalPlan:
        """A persistent query's steps; every one writes its topic from the executors. A table's
        query (an aggregation, a filter/projection, a source table's materialization) writes
        the table's changelog, which its store follows."""
        if isinstance(plan, AggregatePlan):
            buckets = buckets_for(checkpoint, self._buckets(plan)) if checkpoint is not None else self._buckets(plan)
            return physical_plan(plan, KafkaSink(sink), starting_offsets, buckets=buckets,
                                 cache=self._record_cache(),
                                 operator=operator_for(checkpoint) or self._operator())
        if sink.is_table:
            buckets = self._table_buckets(plan)
            if checkpoint is not None:
                buckets = buckets_for(checkpoint, buckets)
            return physical_plan(plan, KafkaSink(sink), starting_offsets, changelog=True, buckets=buckets)
        return physical_plan(plan, KafkaSink(sink), starting_offsets)

    def _create_internal_topic(self, name: str, partitions: int, config: dict[str, str] | None = None) -> None:
        """A topic the engine makes for itself (the processing log, a source table's changelog),
        with ksqlDB's ``ksql.internal.topic.replicas`` and ``ksql.internal.topic.min.insync.replicas``
        (default 1: a single broker) and ``config`` (cleanup policy)."""
        def positive(prop: str) -> int | None:
            value = self.prop(prop).strip()
            if not value:
                return None
            if not value.isdigit() or int(value) < 1:
                raise ConfigError(f"Invalid value {value} for configuration {prop}: must be a positive integer")
            return int(value)

        settings = dict(config or {})
        min_insync = positive("ksql.internal.topic.min.insync.replicas")
        if min_insync is not None:
            settings["min.insync.replicas"] = str(min_insync)
        self.admin.create_topic(name, partitions, positive("ksql.internal.topic.replicas") or 1, settings or None)

    def _source_changelog(self, table: Source, fresh: bool) -> Source:
        """A source table's changelog: its topic is read-only, so its query writes an internal
        topic (``_streamsql-<query>-<topic>-changelog``, hidden from SHOW TOPICS; ksqlDB keeps a
        changelog topic for it too) that the table's store follows. A fresh query starts it
        empty, with an empty store; DROP deletes it."""
        changelog = replace(table, topic=source_changelog_topic(table))
        exists = changelog.topic in self.admin.topics()
        if fresh or not exists:
            if exists:
                self.admin.delete_topic(changelog.topic)
            # compacted, as a table's topic: the latest value per key is what it must keep
            self._create_internal_topic(changelog.topic, max(1, int(table.partitions or 1)),
                                        {} if table.window_type else {"cleanup.policy": "compact"})
            store = self.stores.pop(table.name, None)
            if store is not None:
                store.close()
            (self.data_dir / "tables" / f"{table.writer_query or table.name}.sqlite").unlink(missing_ok=True)
        return changelog

    def collect_plan(self, plan: QueryPlan | AggregatePlan, terminal: Collect, starting_offsets: str,
                      changelog: bool) -> PhysicalPlan:
        """A transient query's steps (push and pull queries, EXPLAIN of a SELECT): an aggregation
        with the session's buckets, record cache and operator choice; ``changelog``: the rows of
        a table read as its changes."""
        if isinstance(plan, AggregatePlan):
            return physical_plan(plan, terminal, starting_offsets, buckets=self._buckets(plan),
                                 cache=self._record_cache(), operator=self._operator())
        return physical_plan(plan, terminal, starting_offsets, changelog=changelog)

    def build_context(self, query_id: str, count_late: bool = False) -> BuildContext:
        """``count_late``: a persistent aggregation counts its late records (one accumulator
        per query id, kept across restarts of the query)."""
        dropped = self.dropped_records.get(query_id)
        if dropped is None and count_late:
            dropped = self.dropped_records[query_id] = self.spark.sparkContext.accumulator(0)
        return BuildContext(
            dropped_counter=dropped,
            spark=self.spark, bootstrap_servers=self.bootstrap_servers,
            processing_log_topic=self.processing_log_topic,
            processing_log_rows=self.prop("ksql.logging.processing.rows.include").strip().lower() == "true",
            max_records=int(self.prop("ksql.streams.max.records.per.batch") or 0) or None,
            throw_on_invalid_timestamp=self.prop("ksql.timestamp.throw.on.invalid").strip().lower() == "true",
            query_id=query_id, limits=self._collection_limits(),
            exactly_once=self.exactly_once())

    def _buckets(self, plan: AggregatePlan) -> int:
        """How many state buckets a new aggregation gets: ``streamsql.aggregation.buckets``, else
        one per partition of its source topic. A bucket is a Kafka Streams task of ksqlDB's
        repartition topic, which has the source's partition count: one stream time each, and
        the records of one bucket keep their order. An aggregation over a TABLE gets one: a
        row that moves to another group must retract its old value there, and its previous
        value is kept by source key (ksqlDB sends the retraction through the repartition topic;
        a two-stage step is the way to more buckets)."""
        if plan.over_table:
            return 1
        return _bucket_count(self.prop(BUCKETS_PROPERTY).strip() or str(getattr(plan.source, "partitions", 1) or 1))

    def _table_buckets(self, plan: QueryPlan) -> int:
        """How many state buckets a new table-changes step gets: as an aggregation over a
        stream, ``streamsql.aggregation.buckets`` or one per partition of its source."""
        return _bucket_count(self.prop(BUCKETS_PROPERTY).strip() or str(getattr(plan.source, "partitions", 1) or 1))

    def _record_cache(self) -> bool:
        """ksqlDB's record cache (``ksql.streams.cache.max.bytes.buffering`` > 0, its default):
        an aggregation emits the latest value per key per commit (here per micro-batch); 0 (what
        ksqlDB's test harness and ``streamsql test`` set) emits every update."""
        return _cache_bytes(self.prop(CACHE_PROPERTY).strip() or RECORD_CACHE_DEFAULT) > 0

    def exactly_once(self) -> bool:
        """``processing.guarantee`` (or ``ksql.streams.processing.guarantee``) is
        ``exactly_once_v2``: queries started now write transactionally (kafka/transactions.py)."""
        return transactions.guarantee(self.prop(GUARANTEE_PROPERTY)) == transactions.EXACTLY_ONCE_V2

    def _operator(self) -> str | None:
        """``streamsql.aggregation.operator`` as ``physical_plan``'s ``operator`` (None: choose)."""
        return _operator_choice(self.prop(OPERATOR_PROPERTY))

    def _collection_limits(self) -> dict[str, int]:
        """``ksql.functions.collect_list.limit`` / ``collect_set.limit`` when set."""
        out = {}
        for name in ("collect_list", "collect_set"):
            value = self._active.properties.get(f"ksql.functions.{name}.limit")
            if value is not None and str(value).lstrip("-").isdigit():
                out[name] = int(value)
        return out

    def _store(self, table: Source) -> TableStore:
        store = self.stores.get(table.name)
        if store is None:
            store = TableStore(self.data_dir / "tables" / f"{table.writer_query or table.name}.sqlite")
            self.stores[table.name] = store
        return store

    def _do_Terminate(self, stmt: ast.Terminate, replay_seq: int | None = None,
                      deferred: Deferred | None = None) -> r.Result:
        ids = [stmt.query_id.upper()] if stmt.query_id else list(self.catalog.queries)
        for qid in ids:
            if qid not in self.catalog.queries:
                raise CatalogError(f"Unknown queryId: {qid}")
        for qid in ids:
            self._terminate(qid)
        self.log_command(stmt, replay_seq)
        return r.CommandStatus(stmt.text, "Query terminated." if stmt.query_id else "All queries terminated.")

    def _terminate(self, query_id: str) -> None:
        """Stop a persistent query for good (TERMINATE, or DROP of its sink) and remove what it
        kept: its checkpoint (offsets and state store) — ksqlDB deletes a terminated query's
        internal topics and state the same way; nothing can resume it, so nothing is left."""
        running = self.queries.pop(query_id, None)
        if running is not None:
            self.stop_handle(running.handle)
        self.physical_plans.pop(query_id, None)
        shutil.rmtree(self.data_dir / "checkpoints" / query_id, ignore_errors=True)
        info = self.catalog.queries.pop(query_id, None)
        if info is not None:
            sink = self.catalog.find(info.sink)
            if sink is not None and sink.writer_query == query_id:
                sink.writer_query = None

    @staticmethod
    def stop_handle(handle: StreamingQuery) -> None:
        try:
            handle.stop()
        except Exception as e:  # a failed query may not stop cleanly; it is gone either way
            log.debug("stopping query: %s", e)

    # --- connectors (runtime/connectors.py) -----------------------------------------------------

    def _do_CreateConnector(self, stmt: ast.CreateConnector, replay_seq: int | None = None,
                            deferred: Deferred | None = None) -> r.Result:
        return self.connectors.create(stmt, replay_seq)

    def _do_DropConnector(self, stmt: ast.DropConnector, replay_seq: int | None = None,
                          deferred: Deferred | None = None) -> r.Result:
        return self.connectors.drop(stmt, replay_seq)

    # --- INSERT VALUES -------------------------------------------------------------------------

    def _do_InsertValues(self, stmt: ast.InsertValues) -> r.Result:
        return self.inserts.insert(stmt)


    # --- transient queries ---------------------------------------------------------------------

    def _do_SelectStatement(self, stmt: ast.SelectStatement) -> r.Result:
        if stmt.query.emit is None:
            self._check_pull_query(stmt.query)
        plan = self.planner.plan_query(stmt.query, persistent=False)
        self._transient_seq += 1
        push = stmt.query.emit is not None
        query_id = f"transient_{plan.source.name}_{int(time.time() * 1000)}{self._transient_seq}"
        if not push:
            if isinstance(plan, AggregatePlan):
                raise AnalysisError("Pull queries don't support GROUP BY clauses." + PULL_QUERY_HELP)
            if plan.source.is_table:
                return self._pull_table(stmt, plan)
        starting = self.offset_reset() if push else "earliest"
        builder = SparkBuilder(self.build_context(query_id))
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

        physical = self.collect_plan(plan, Collect(on_batch, available_now=not push), starting,
                                      changelog=push and plan.source.is_table)
        starts.pin_starts(physical, self.admin.end_offsets)  # a push query sees what follows its acceptance
        df = builder.dataframe(physical)  # built once: its columns name the result, then it runs
        columns = builder.result_columns(plan, df)
        stream = r.RowStream(stmt.text, query_id, [(c.name, str(c.type)) for c in columns],
                             limit=plan.limit, kind="push" if push else "pull")
        checkpoint = Path(tempfile.mkdtemp(prefix="streamsql-transient-"))
        handle = builder.start(physical, checkpoint, df=df)

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
                self.stop_handle(handle)
                shutil.rmtree(checkpoint, ignore_errors=True)

        stream.on_close(lambda: self.stop_handle(handle))
        threading.Thread(target=watch, name=f"watch-{query_id}", daemon=True).start()
        return stream

    def _check_pull_query(self, query: ast.Query) -> None:
        """What a pull query may not have, in ksqlDB's words, before planning would fail on it
        with a less helpful message."""
        if query.joins:
            raise AnalysisError("Pull queries don't support JOIN clauses." + PULL_QUERY_HELP)
        if query.group_by:
            raise AnalysisError("Pull queries don't support GROUP BY clauses." + PULL_QUERY_HELP)
        source = self.catalog.find(query.source.name)
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

    def _pull_table(self, stmt: ast.SelectStatement, plan: QueryPlan) -> r.Result:
        """A pull query over a materialized table: the store's current rows, through the
        query's WHERE and projection (evaluated by Spark as a batch query)."""
        from pyspark.sql import types as st

        table = plan.source
        scans, ranges = ("ksql.query.pull.table.scan.enabled", "ksql.query.pull.range.scan.enabled")
        check_access_path(stmt.query.where, table, _enabled(scans, self.prop(scans)),
                          _enabled(ranges, self.prop(ranges)))
        store = self.stores.get(table.name)
        if store is not None and table.name in self.followed:
            try:
                store.follow(self.bootstrap_servers, self.followed[table.name], read_committed=self.exactly_once())
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
        columns = source_columns(table)
        extra = [(t.ROWTIME, st.LongType()), (t.ROWPARTITION, st.IntegerType()), (t.ROWOFFSET, st.LongType()),
                 ("__HEADERS", st.ArrayType(st.StructType([st.StructField("KEY", st.StringType()),
                                                            st.StructField("VALUE", st.BinaryType())]))),
                 (TOMBSTONE_COL, st.BooleanType())]
        schema = st.StructType([st.StructField(c.name, t.to_spark(c.type)) for c in columns]
                               + [st.StructField(n, ty) for n, ty in extra])
        key_names = [c.name for c in table.key_columns]
        data = []
        types = {c.name: c.type for c in columns}
        for key, wstart, wend, value, rowtime in store.rows(lookup_for(stmt.query.where, table)):
            rec: dict[str, Any] = dict(zip(key_names, key))
            rec.update(value)
            rec = {n: _spark_value(v, types[n]) if n in types else v for n, v in rec.items()}
            rec.update({t.WINDOWSTART: wstart, t.WINDOWEND: wend, t.ROWTIME: rowtime, TOMBSTONE_COL: False})
            data.append(tuple(rec.get(f.name) for f in schema.fields))
        builder = SparkBuilder(self.build_context("pull"))
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

    def _do_Print(self, stmt: ast.Print) -> r.Result:
        return self.inspection.print(stmt)


    # --- meta ----------------------------------------------------------------------------------
    def _do_Show(self, stmt: ast.Show) -> r.Result:
        return self.inspection.show(stmt)

    def _do_Describe(self, stmt: ast.Describe) -> r.Result:
        return self.inspection.describe(stmt)

    def _do_Explain(self, stmt: ast.Explain) -> r.Result:
        return self.inspection.explain(stmt)

    def _do_SetProperty(self, stmt: ast.SetProperty) -> r.Result:
        if same_property(stmt.name, "auto.offset.reset") and stmt.value.lower() not in VALID_OFFSET_RESETS:
            raise ConfigError(f"Invalid value {stmt.value} for configuration auto.offset.reset: "
                              f"String must be one of: earliest, latest")
        if same_property(stmt.name, CACHE_PROPERTY):
            _cache_bytes(stmt.value)
        if stmt.name == BUCKETS_PROPERTY:
            _bucket_count(stmt.value)
        if stmt.name == OPERATOR_PROPERTY:
            _operator_choice(stmt.value)
        if same_property(stmt.name, GUARANTEE_PROPERTY):
            transactions.guarantee(stmt.value)
        self._active.properties[stmt.name] = stmt.value
        return r.CommandStatus(stmt.text, f"Successfully changed local property '{stmt.name}' to '{stmt.value}'.")

    def _do_UnsetProperty(self, stmt: ast.UnsetProperty) -> r.Result:
        self._active.properties.pop(stmt.name, None)
        return r.CommandStatus(stmt.text, f"Successfully unset local property '{stmt.name}'.")

    def _do_DefineVariable(self, stmt: ast.DefineVariable) -> r.Result:
        self._active.variables[stmt.name] = stmt.value
        return r.CommandStatus(stmt.text, f"Defined variable {stmt.name}")

    def _do_UndefineVariable(self, stmt: ast.UndefineVariable) -> r.Result:
        if self._active.variables.pop(stmt.name, None) is None:
            return r.Warning_(stmt.text, f"Cannot undefine variable '{stmt.name}' which was never defined")
        return r.CommandStatus(stmt.text, f"Undefined variable {stmt.name}")

    # --- waiting -------------------------------------------------------------------------------

    # --- the pipeline as a graph (runtime/topology.py) ------------------------------------------

    def plan_only(self, text: str) -> list[str]:
        """Plan ``text``'s statements as a replay does — sources and queries enter the catalog,
        each query gets its physical steps — without the command log or starting anything
        (``streamsql topology FILE.sql``). The engine's Kafka must be a scratch cluster (the CLI
        starts an embedded broker): each declared or created source's topic is created there,
        since Spark's analysis of a query reads its inputs' metadata. Returns the statements it
        skipped (INSERT VALUES, SELECT, PRINT, SHOW...: they draw nothing)."""
        from streamsql.udf import functions as python_functions

        self.planning_only = True
        python_functions.load(self.config.property("ksql.extension.dir") or None)
        planned = (ast.CreateSource, ast.CreateAsSelect, ast.InsertInto, ast.DropSource, ast.Terminate,
                   ast.CreateType, ast.DropType, ast.CreateConnector, ast.DropConnector)
        session = (ast.SetProperty, ast.UnsetProperty, ast.DefineVariable, ast.UndefineVariable)
        skipped: list[str] = []
        seq = 0
        for stmt in parse(text, variables=self._active.variables, custom_types=self.catalog.types):
            try:
                if isinstance(stmt, planned):
                    self._execute(stmt, replay_seq=seq)  # the sequence number a fresh command log gives it
                    seq += 1
                    declared = self.catalog.find(getattr(stmt, "name", "") or "")
                    if isinstance(stmt, (ast.CreateSource, ast.CreateAsSelect)) and declared is not None:
                        # Spark's analysis of the next statements reads the topic's metadata
                        self.admin.create_topic(declared.topic, max(1, int(declared.partitions or 1)))
                elif isinstance(stmt, session):
                    self._execute(stmt)
                else:
                    skipped.append(stmt.text)
            except StreamsqlError as e:
                if e.statement is None:
                    e.statement = stmt.text
                raise
        return skipped

    def topology(self, query_id: str | None = None) -> Topology:
        """The pipeline as it runs (or as :meth:`plan_only` planned it): sources, queries with
        their physical steps, connectors, internal topics, and each running query's input rate.
        ``query_id``: only that query and what it touches (EXPLAIN of one query)."""
        from streamsql.runtime import topology

        with self.lock:
            rates: dict[str, dict[str, float]] = {}
            for qid, q in self.queries.items():
                progress = q.handle.lastProgress
                if progress and progress.get("processedRowsPerSecond") is not None:
                    rates[qid] = {"in": float(progress["processedRowsPerSecond"])}
            internal = {source_changelog_topic(s): s.writer_query for s in self.catalog.sources.values()
                        if s.is_source and s.is_table and s.writer_query}
            graph = topology.build(self.catalog, self.physical_plans, self.processing_log_topic, rates, internal)
        if query_id is None:
            return graph
        qid = query_id.upper()
        if qid not in self.catalog.queries:
            raise CatalogError(f"Query with id:{query_id} does not exist, use SHOW QUERIES to view the full set of "
                               f"queries.")
        return topology.focus(graph, qid)

    def wait_until_idle(self, max_rounds: int = 100) -> None:
        """Process everything available in the source topics, through chains of queries (a
        query's output may be another's input), then return. Raises if a query failed."""
        for _ in range(max_rounds):
            before = self._progress_marks()
            for qid in list(self.queries):
                self._drain(qid)
            if self._progress_marks() == before:
                return

    def _drain(self, query_id: str) -> None:
        """``processAllAvailable`` on one query; a query that fails for a transient reason is
        restarted from its checkpoint (at most MAX_RESTARTS times) and drained again."""
        while True:
            q = self.queries.get(query_id)
            if q is None:
                return
            self._check_alive(q)  # raises for a real failure; replaces q after a restart
            q = self.queries[query_id]
            try:
                q.handle.processAllAvailable()
                return
            except Exception:
                if q.handle.exception() is None:
                    raise

    def _progress_marks(self) -> dict[str, Any]:
        marks = {}
        for qid, q in self.queries.items():
            p = q.handle.lastProgress
            marks[qid] = json.dumps([s.get("endOffset") for s in p.get("sources", [])], sort_keys=True) if p else None
        return marks

    def _check_alive(self, q: RunningQuery) -> None:
        exc = q.handle.exception()
        if exc is not None and self._restart_if_transient(q, exc):
            return
        if exc is not None:
            raise StreamsqlError(f"Query {q.info.id} failed: {spark_message(exc)}", q.info.statement)

    def _restart_if_transient(self, q: RunningQuery, exc: BaseException) -> bool:
        message = spark_message(exc)
        if q.restart is None or q.restarts >= MAX_RESTARTS or not any(m in message for m in TRANSIENT_FAILURES):
            return False
        log.warning("query %s failed for a transient reason (%s); restarting it from its checkpoint",
                    q.info.id, message.splitlines()[0][:200])
        q.restarts += 1
        self.stop_handle(q.handle)
        q.restart()
        self.queries[q.info.id].restarts = q.restarts
        return True

    def failed_queries(self) -> list[tuple[str, str]]:
        """The persistent queries that stopped with an error, and the error (a handle whose JVM
        side is gone counts as failed); the runner reports them, the supervisor restarts them."""
        out = []
        for qid, q in list(self.queries.items()):
            try:
                exc = q.handle.exception() if not q.handle.isActive else None
            except Exception as e:  # noqa: BLE001 - the handle itself is broken
                out.append((qid, spark_message(e)))
                continue
            if exc is not None:
                out.append((qid, spark_message(exc)))
        return out


#: ksqlDB's default ``ksql.streams.cache.max.bytes.buffering`` (10 MB)
RECORD_CACHE_DEFAULT = "10485760"
CACHE_PROPERTY = "ksql.streams.cache.max.bytes.buffering"


_NUMERIC_RANK = {t.Kind.INTEGER: 0, t.Kind.BIGINT: 1, t.Kind.DECIMAL: 2, t.Kind.DOUBLE: 3}


def _widened(plan: QueryPlan, produced: list[t.Column], expected: list[t.Column]) -> bool:
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


BUCKETS_PROPERTY = "streamsql.aggregation.buckets"
#: ``auto`` (default: Spark's own aggregation where it is exact, else the Python operator) or
#: ``python`` (always the Python operator: to compare the two, or to keep a query on it)
OPERATOR_PROPERTY = "streamsql.aggregation.operator"
OPERATOR_CHOICES = ("auto", "python")


def source_changelog_topic(table: Source) -> str:
    """The internal changelog topic of a source table's materialization (one per query: a
    re-created table starts a new one)."""
    name = f"_streamsql-{table.writer_query or table.name}-{table.topic}-changelog"
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)[:249]


def _cache_bytes(value: str) -> int:
    """The record cache's size, or a configuration error naming the property and the value."""
    try:
        size = int(value)
    except ValueError:
        size = -1
    if size < 0:
        raise ConfigError(f"Invalid value {value} for configuration {CACHE_PROPERTY}: "
                          f"Not a number of type LONG at least 0")
    return size


def _operator_choice(value: str) -> str | None:
    """``streamsql.aggregation.operator`` as ``physical_plan``'s ``operator`` (None: the planner
    chooses), or a configuration error naming the property and the value."""
    choice = value.strip().lower() or "auto"
    if choice not in OPERATOR_CHOICES:
        raise ConfigError(f"Invalid value {value} for configuration {OPERATOR_PROPERTY}: "
                          f"String must be one of: {', '.join(OPERATOR_CHOICES)}")
    return None if choice == "auto" else choice


def _bucket_count(value: str) -> int:
    """An aggregation's bucket count, or a configuration error naming the property and the value."""
    try:
        buckets = int(value)
    except ValueError:
        buckets = 0
    if buckets < 1:
        raise ConfigError(f"Invalid value {value} for configuration {BUCKETS_PROPERTY}: "
                          f"a positive number of buckets is expected")
    return buckets


def _ignore(_df: DataFrame, _batch_id: int) -> None:
    """The terminal step of a plan built only to learn its output columns."""


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


def _input_names(source: Source) -> list[str]:
    """The catalog sources a query reads (both sides of a join)."""
    if isinstance(source, JoinedSource) and source.join is not None:
        return [side.source.name for side in source.join.leaves()]
    return [source.name]

