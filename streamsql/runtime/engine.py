"""The engine: ``execute(statement text) -> typed results``, over one SparkSession and one Kafka
cluster.

Every surface (headless runner, shell, REST server) goes through :meth:`Engine.execute`. The
engine is the composition root of a running streamsql: it holds the catalog, the planner, the
running queries (``runtime/queries.py``), the table stores and the session statements run under,
and hands each parsed statement to its executor (``runtime/executors/``: one per kind of
statement). Persistent queries run one Spark streaming query each (CSAS / CTAS / INSERT INTO),
with its own checkpoint under the data directory; push and pull queries are transient.

Durability follows ksqlDB: successful DDL/DML statements are appended to the command log and
replayed on start, which rebuilds the catalog and restarts persistent queries with the same ids,
so each resumes from its checkpoint. INSERT VALUES is not logged (replaying it would duplicate).

Concurrency follows ksqlDB too: statements that change the catalog or start and stop queries
(``executors.changes_catalog``) run one at a time under :attr:`Engine.command_lock`, in the
order they enter the command log; everything else (push and pull queries, SHOW, DESCRIBE,
EXPLAIN, PRINT, INSERT VALUES, SET) runs beside them and beside each other, each under the
session of its own caller (:meth:`Engine.session_scope` binds it to the calling thread's
context, never to the engine). Parsing happens before any lock.
"""

from __future__ import annotations

import contextvars
import copy
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamsql.catalog import Catalog, FileCommandLog, Source
from streamsql.catalog.commands import CommandLog
from streamsql.errors import AnalysisError, CatalogError, ConfigError, StreamsqlError
from streamsql.functions.catalog import builtin_registry
from streamsql.functions.python.library import PythonFunctions
from streamsql.kafka import settings as kafka_settings
from streamsql.kafka import transactions
from streamsql.kafka.transactions import GUARANTEE_PROPERTY
from streamsql.physical.builder import BuildContext
from streamsql.planner.aggregation import AggregatePlan
from streamsql.planner.ddl import SourceDefinitions
from streamsql.planner.planner import Planner, QueryPlan
from streamsql.runtime import query_settings as qs
from streamsql.runtime import results as r
from streamsql.runtime.config import (
    COMMIT_INTERVAL_PROPERTY,
    VALID_OFFSET_RESETS,
    EngineConfig,
    commit_interval_ms,
    property_names,
)
from streamsql.runtime.data_dir import DataDirLock, check_cluster, record_cluster, reset_state
from streamsql.runtime.executors import (
    LOGGED_STATEMENTS,
    Deferred,
    StatementExecutor,
    changes_catalog,
    dispatch_table,
)
from streamsql.runtime.executors.asserts import AssertStatements
from streamsql.runtime.executors.connectors import ConnectorStatements
from streamsql.runtime.executors.inserts import ValueInserts
from streamsql.runtime.executors.inspection import Inspection
from streamsql.runtime.executors.persistent import PersistentQueries, source_changelog_topic
from streamsql.runtime.executors.session_statements import SessionStatements
from streamsql.runtime.executors.sources import SourceStatements
from streamsql.runtime.executors.transient import TransientQueries
from streamsql.runtime.materialized import TableStore
from streamsql.runtime.queries import QueryRegistry
from streamsql.runtime.recently_used import RecentlyUsed
from streamsql.runtime.session import Session
from streamsql.runtime.topology import Topology
from streamsql.sql import ast, parse

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamsql.kafka.admin import KafkaAdmin

log = logging.getLogger("streamsql")


class ParseCache:
    """Recently parsed statement texts, so the same statement sent again — a dashboard's pull
    query, a client's push query — is not tokenized and parsed again (~0.5-1 ms of a pull
    query's ~2.5 ms). Keyed by everything the parse depends on: the text, the session's
    variables, the catalog's custom types and the size limit. Each caller gets its own copy
    (the executors may annotate the statements they are given), except of pull queries: the
    pull query executor reads its statement and plans from its own copy, so the cache's
    statements are shared read-only (the copy was ~6% of a pull query's CPU in the server)."""

    SIZE = 512
    #: longer texts are parsed each time (scripts, rarely repeated; a copy costs more)
    MAX_TEXT = 8192

    def __init__(self) -> None:
        self._entries: RecentlyUsed[list[ast.Statement]] = RecentlyUsed(self.SIZE)

    def get(self, text: str, variables: Mapping[str, str], types: Mapping[str, Any],
            max_bytes: int | None) -> list[ast.Statement]:
        if len(text) > self.MAX_TEXT:
            return parse(text, variables=variables, custom_types=types, max_statement_bytes=max_bytes)
        key = (text, tuple(sorted(variables.items())), tuple(sorted((k, str(v)) for k, v in types.items())),
               max_bytes)
        hit = self._entries.get(key)
        if hit is None:
            hit = parse(text, variables=variables, custom_types=types, max_statement_bytes=max_bytes)
            self._entries.put(key, hit)
        if all(isinstance(stmt, ast.SelectStatement) and stmt.query.emit is None for stmt in hit):
            return list(hit)
        return copy.deepcopy(hit)


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
        self._parsed = ParseCache()
        #: the functions this engine's statements may call: the built-ins and its own Python
        #: functions (``ksql.extension.dir``), which no other engine in the process sees
        self.functions = builtin_registry()
        self.python_functions = PythonFunctions(self.functions)
        self.planner = Planner(self.catalog, self.functions)
        self.definitions = SourceDefinitions(self.prop)
        #: the engine's own session (the CLI, shell and runner run under it)
        self.session = Session()
        #: the session of the statement the calling thread (context) runs now, if a caller gave
        #: one (:meth:`session_scope`); per context, so concurrent requests never see each other's
        self._caller_session: contextvars.ContextVar[Session | None] = contextvars.ContextVar(
            f"streamsql-session-{id(self)}", default=None)
        #: the running persistent queries and connectors, their steps and late-record counters
        self.queries = QueryRegistry()
        self.stores: dict[str, TableStore] = {}
        #: tables whose store follows their changelog topic (caught up per pull query): the
        #: table's own topic, or a source table's internal changelog topic
        self.followed: dict[str, Source] = {}
        self._command_log = command_log
        self._claim = DataDirLock(self.data_dir)
        self._spark = spark
        #: called with the SparkSession when this engine starts it (``runtime/metrics.py`` adds its
        #: progress listener before any query runs)
        self.on_spark_start: list[Callable[[SparkSession], object]] = []
        #: per thread: whether this engine's session was made the thread's active session
        self._session_thread = threading.local()
        self._admin: KafkaAdmin | None = None
        #: held while a statement that changes the catalog or starts/stops queries executes
        #: (``executors.changes_catalog``), and by anything else that changes them (a restart by
        #: the supervisor, TERMINATE CLUSTER, the replay); reads never take it
        self.command_lock = threading.RLock()
        #: plan persistent queries and connectors without starting them (``plan_only``)
        self.planning_only = False
        # the executors, one per kind of statement (runtime/executors/)
        self.sources = SourceStatements(self)
        self.persistent = PersistentQueries(self)
        self.transient = TransientQueries(self)
        self.connectors = ConnectorStatements(self)
        self.inspection = Inspection(self)
        self.inserts = ValueInserts(self)
        self._executors: list[StatementExecutor] = [
            self.sources, self.persistent, self.transient, SessionStatements(self), self.connectors,
            self.inspection, self.inserts, AssertStatements(self)]
        self._handlers = dispatch_table(self._executors)

    # --- lifecycle ---------------------------------------------------------------------------
    @property
    def spark(self) -> SparkSession:
        """The session, started on first use; made the active session of each thread that asks
        for it (Spark finds Python data sources in the JVM thread's *active* session only, and
        only the thread that started the session has it active: ``runtime.spark.activate``)."""
        if self._spark is None:
            from streamsql.runtime.spark import get_spark

            self._spark = get_spark(self.config.spark_master, self.config.spark_conf or None)
            for callback in self.on_spark_start:
                callback(self._spark)
        if not getattr(self._session_thread, "active", False):
            from streamsql.runtime.spark import activate

            activate(self._spark)
            self._session_thread.active = True
        return self._spark

    def warm_up_in_background(self) -> None:
        """Start the SparkSession and warm it while the engine waits for statements (a server
        or an interactive shell): its first query then runs without the session's one-off costs
        (``runtime/warm_up.py``). A session already started (a replay restored queries) is
        warm from its own queries and is left alone."""
        if self._spark is None:
            from streamsql.runtime import warm_up

            warm_up.start_in_background(lambda: self.spark)

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

    def _load_python_functions(self) -> list[str]:
        """Load the Python function files (``ksql.extension.dir`` and the seeds) into this
        engine's function registry, and have their directories shipped to a cluster's executors (the
        helper modules a file imports). Returns one problem line per file or function not loaded."""
        from streamsql.runtime.spark import ship_directory

        problems = self.python_functions.load(self.config.property("ksql.extension.dir") or None)
        for directory in self.python_functions.code_directories():
            ship_directory(directory)
        return problems

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
        self.create_internal_topic(self.processing_log_topic, 1)
        notices += [f"Python functions: {p}" for p in self._load_python_functions()]
        with self.command_lock:
            replayed = self._replay()
        if replayed:
            notices.append(f"Restored {len(self.catalog.sources)} source(s) and {len(self.queries)} "
                           f"persistent query(ies) from {replayed} command(s)")
        return notices

    def _reset_state(self) -> None:
        if isinstance(self.command_log, FileCommandLog):
            self.command_log.reset()
        reset_state(self.data_dir)

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
                    # accepted once: replayed whatever the size limit is now
                    for stmt in parse(cmd.statement, custom_types=self.catalog.types, max_statement_bytes=None):
                        self._execute(stmt, replay_seq=cmd.seq, deferred=deferred)
            except StreamsqlError as e:
                log.warning("could not replay command %s (%s): %s", cmd.seq, cmd.statement, e)
            finally:
                for entry in deferred[started:]:
                    properties_of[entry[0]] = dict(cmd.properties)
        for query_id, plan, stmt, sink in deferred:
            if query_id in self.catalog.queries:
                with self.session_scope(Session(properties_of.get(query_id, {}))):
                    self.persistent.start(query_id, plan, stmt, self.catalog.get(sink))
        return len(commands)

    def close(self) -> None:
        with self.command_lock:
            self.queries.stop_all()
            for store in self.stores.values():
                store.stop_following()
            for executor in self._executors:
                executor.close()
        if self._admin is not None:
            self._admin.close()
        self._claim.release()

    # --- properties ----------------------------------------------------------------------------

    def prop(self, name: str) -> str:
        """A property's value: the running session's override, else engine config, else
        ksqlDB's default (either spelling of a Kafka Streams property: ``config.property_names``)."""
        session = self.active_session
        for spelling in property_names(name):
            value = session.properties.get(spelling)
            if value:
                return value
        return self.config.property(name)

    @property
    def active_session(self) -> Session:
        """The session the calling thread's statements run under now: a caller's inside
        :meth:`session_scope`, else the engine's own."""
        return self._caller_session.get() or self.session

    @contextmanager
    def session_scope(self, session: Session) -> Iterator[Session]:
        """Run this thread's engine calls under ``session``: what its statements SET or DEFINE
        stays in it, and neither the engine's own session nor another thread's is touched. Takes
        no lock: requests of different clients run side by side."""
        token = self._caller_session.set(session)
        try:
            yield session
        finally:
            self._caller_session.reset(token)

    @property
    def processing_log_topic(self) -> str:
        return f"{self.config.property('ksql.service.id')}ksql_processing_log"

    # --- execute -------------------------------------------------------------------------------

    def execute(self, text: str, session: Session | None = None) -> list[r.Result]:
        """Parse ``text`` (one or more statements) and execute each in order, under ``session``
        (default: the running one, see :attr:`active_session`). A failing statement raises;
        statements before it have taken effect."""
        session = session or self.active_session
        return [self.execute_statement(stmt, session) for stmt in self.parse(text, session)]

    def parse(self, text: str, session: Session | None = None) -> list[ast.Statement]:
        """``text``'s statements, parsed with ``session``'s variables and the catalog's types
        (each statement with what the ones before it define) within the operator's size limit
        (``streamsql.statement.max.bytes``). Takes no lock: parsing a huge statement costs its
        own caller only."""
        session = session or self.active_session
        return self._parsed.get(text, session.variables, self.catalog.types, self.config.statement_max_bytes())

    def execute_statement(self, stmt: ast.Statement, session: Session | None = None) -> r.Result:
        """Execute one parsed statement under ``session`` (default: the running one). A statement
        that changes the catalog waits for the one before it (:attr:`command_lock`); any other
        runs at once."""
        with self.session_scope(session or self.active_session):
            try:
                if changes_catalog(stmt):
                    with self.command_lock:
                        return self._execute(stmt)
                return self._execute(stmt)
            except StreamsqlError as e:
                if e.statement is None:
                    e.statement = stmt.text
                raise
    def _execute(self, stmt: ast.Statement, replay_seq: int | None = None,
                 deferred: Deferred | None = None) -> r.Result:
        handler = self._handlers.get(type(stmt))
        if handler is None:
            raise AnalysisError(f"Statement not supported yet: {stmt.text}")
        if replay_seq is not None and isinstance(stmt, LOGGED_STATEMENTS):
            return handler(stmt, replay_seq=replay_seq, deferred=deferred)
        return handler(stmt)

    def log_command(self, stmt: ast.Statement, replay_seq: int | None) -> int:
        """Append an accepted statement to the command log with its session's properties (a
        replayed one is logged already: its sequence number is returned)."""
        if replay_seq is not None:
            return replay_seq
        return self.command_log.append(stmt.text, dict(self.active_session.properties)).seq

    # --- DDL -----------------------------------------------------------------------------------
    # --- how new queries are built, under the running session ---------------------------------

    def offset_reset(self) -> str:
        value = self.prop("auto.offset.reset").lower()
        if value not in VALID_OFFSET_RESETS:
            raise ConfigError(f"Invalid value {value} for configuration auto.offset.reset: "
                              f"String must be one of: earliest, latest")
        return value

    def build_context(self, query_id: str, count_late: bool = False) -> BuildContext:
        """``count_late``: a persistent aggregation counts its late records (one accumulator
        per query id, kept across restarts of the query)."""
        dropped = self.queries.dropped.get(query_id)
        if dropped is None and count_late:
            dropped = self.queries.dropped[query_id] = self.spark.sparkContext.accumulator(0)
        return BuildContext(
            dropped_counter=dropped,
            spark=self.spark, bootstrap_servers=self.bootstrap_servers,
            processing_log_topic=self.processing_log_topic,
            processing_log_rows=self.prop("ksql.logging.processing.rows.include").strip().lower() == "true",
            max_records=int(self.prop("ksql.streams.max.records.per.batch") or 0) or None,
            throw_on_invalid_timestamp=self.prop("ksql.timestamp.throw.on.invalid").strip().lower() == "true",
            query_id=query_id, limits=self._collection_limits(),
            exactly_once=self.exactly_once(), python_functions=self.python_functions)

    def aggregation_buckets(self, plan: AggregatePlan) -> int:
        """How many state buckets a new aggregation gets: ``streamsql.aggregation.buckets``, else
        one per partition of its source topic. A bucket is a Kafka Streams task of ksqlDB's
        repartition topic, which has the source's partition count: one stream time each, and
        the records of one bucket keep their order. An aggregation over a TABLE gets one: a
        row that moves to another group must retract its old value there, and its previous
        value is kept by source key (ksqlDB sends the retraction through the repartition topic;
        a two-stage step is the way to more buckets)."""
        if plan.over_table:
            return 1
        return self.table_buckets(plan)

    def table_buckets(self, plan: QueryPlan | AggregatePlan) -> int:
        """How many state buckets a new table-changes step gets: as an aggregation over a
        stream, ``streamsql.aggregation.buckets`` or one per partition of its source."""
        return qs.bucket_count(self.prop(qs.BUCKETS_PROPERTY).strip()
                               or str(getattr(plan.source, "partitions", 1) or 1))

    def record_cache(self) -> bool:
        """ksqlDB's record cache (``ksql.streams.cache.max.bytes.buffering`` > 0, its default):
        an aggregation emits the latest value per key per commit (here per micro-batch); 0 (what
        ksqlDB's test harness and ``streamsql test`` set) emits every update."""
        return qs.cache_bytes(self.prop(qs.CACHE_PROPERTY).strip() or qs.RECORD_CACHE_DEFAULT) > 0

    def commit_interval_ms(self) -> int | None:
        """How often a persistent stateful query runs a micro-batch at most (a Spark
        processing-time trigger), or None for as soon as records arrive. ksqlDB's record cache
        emits an aggregation's updates at each commit (``ksql.streams.commit.interval.ms``); so
        do we with the cache on, which spares the JVM a micro-batch — tens to hundreds of
        milliseconds of CPU — per handful of rows while records trickle in. The cache off
        (``streamsql test``, ksqlDB's harness) emits every update as soon as it can."""
        if not self.record_cache():
            return None
        return commit_interval_ms(self.prop(COMMIT_INTERVAL_PROPERTY) or "0") or None

    def exactly_once(self) -> bool:
        """``processing.guarantee`` (or ``ksql.streams.processing.guarantee``) is
        ``exactly_once_v2``: queries started now write transactionally (kafka/transactions.py)."""
        return transactions.guarantee(self.prop(GUARANTEE_PROPERTY)) == transactions.EXACTLY_ONCE_V2

    def aggregation_operator(self) -> str | None:
        """``streamsql.aggregation.operator`` as ``physical_plan``'s ``operator`` (None: choose)."""
        return qs.operator_choice(self.prop(qs.OPERATOR_PROPERTY))

    def _collection_limits(self) -> dict[str, int]:
        """``ksql.functions.collect_list.limit`` / ``collect_set.limit`` when set."""
        out = {}
        for name in ("collect_list", "collect_set"):
            value = self.active_session.properties.get(f"ksql.functions.{name}.limit")
            if value is not None and str(value).lstrip("-").isdigit():
                out[name] = int(value)
        return out
    def create_internal_topic(self, name: str, partitions: int, config: dict[str, str] | None = None) -> None:
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

    # --- the pipeline as a graph (runtime/topology.py) ------------------------------------------

    def plan_only(self, text: str) -> list[str]:
        """Plan ``text``'s statements as a replay does — sources and queries enter the catalog,
        each query gets its physical steps — without the command log or starting anything
        (``streamsql topology FILE.sql``). The engine's Kafka must be a scratch cluster (the CLI
        starts an embedded broker): each declared or created source's topic is created there,
        since Spark's analysis of a query reads its inputs' metadata. Returns the statements it
        skipped (INSERT VALUES, SELECT, PRINT, SHOW...: they draw nothing)."""
        self.planning_only = True
        self._load_python_functions()
        session = (ast.SetProperty, ast.UnsetProperty, ast.DefineVariable, ast.UndefineVariable)
        skipped: list[str] = []
        seq = 0
        for stmt in self.parse(text):
            try:
                if isinstance(stmt, LOGGED_STATEMENTS):
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

        rates: dict[str, dict[str, float]] = {}
        for qid, q in list(self.queries.items()):
            progress = q.handle.lastProgress
            if progress and progress.get("processedRowsPerSecond") is not None:
                rates[qid] = {"in": float(progress["processedRowsPerSecond"])}
        internal = {source_changelog_topic(s): s.writer_query for s in self.catalog.sources.values()
                    if s.is_source and s.is_table and s.writer_query}
        graph = topology.build(self.catalog, dict(self.queries.plans), self.processing_log_topic, rates, internal)
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
        self.queries.wait_until_idle(max_rounds)

    def failed_queries(self) -> list[tuple[str, str]]:
        """The persistent queries that stopped with an error, and the error (a handle whose JVM
        side is gone counts as failed); the runner reports them, the supervisor restarts them."""
        return self.queries.failed()
