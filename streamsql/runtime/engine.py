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
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC
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
    UnsupportedSchemaError,
)
from streamsql.formats import FormatSpec, compression, schema_registry, serde_for
from streamsql.formats import registry as format_registry
from streamsql.physical.builder import (
    CHECKPOINT_META,
    BuildContext,
    SparkBuilder,
    buckets_for,
    has_committed_batch,
    operator_for,
)
from streamsql.physical.steps import (
    Aggregate,
    Collect,
    KafkaSink,
    PhysicalPlan,
    SparkAggregate,
    physical_plan,
)
from streamsql.planner import aggregation
from streamsql.planner.aggregation import AggregatePlan
from streamsql.planner.casts import cast_value
from streamsql.planner.expressions import quote
from streamsql.planner.functions import REGISTRY, unknown_function
from streamsql.planner.joins import JoinedSource
from streamsql.planner.planner import TOMBSTONE_COL, Planner, QueryPlan, compile_constant, source_columns
from streamsql.runtime import io, starts
from streamsql.runtime import results as r
from streamsql.runtime.config import DEFAULT_PROPERTIES, VALID_OFFSET_RESETS, EngineConfig
from streamsql.runtime.data_dir import DataDirLock, check_cluster, record_cluster
from streamsql.runtime.materialized import TableStore
from streamsql.runtime.pull import check_access_path, lookup_for
from streamsql.runtime.topology import Topology
from streamsql.sql import ast, parse
from streamsql.sql.dialect import to_ksql

if TYPE_CHECKING:
    from pyspark import Accumulator
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from streamsql.kafka.admin import EndOffsets, KafkaAdmin, Record
    from streamsql.runtime.progress import PartitionLag

log = logging.getLogger("streamsql")

KNOWN_FORMATS = {"JSON", "DELIMITED", "KAFKA", "NONE", "AVRO", "JSON_SR", "PROTOBUF", "PROTOBUF_NOSR"}
#: formats whose records carry a Schema Registry id
REGISTRY_FORMATS = set(format_registry.REGISTRY_SCHEMA_TYPES)
KEYED_FORMATS = KNOWN_FORMATS - {"NONE"}


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
        self.data_dir = Path(config.data_dir)
        self.catalog = Catalog()
        self.planner = Planner(self.catalog)
        self.session_properties: dict[str, str] = {}
        self.variables: dict[str, str] = {}
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
        self._lock = threading.RLock()
        self._transient_seq = 0
        from streamsql.runtime.connectors import ConnectorStatements

        self.connectors = ConnectorStatements(self)
        #: plan persistent queries and connectors without starting them (``plan_only``)
        self.planning_only = False
        #: end offsets of the topics queries read, for their lag (one client per topic)
        self._end_offsets: dict[str, EndOffsets] = {}

    # --- lifecycle ---------------------------------------------------------------------------

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            from streamsql.runtime.spark import get_spark

            self._spark = get_spark(self.config.spark_master, self.config.spark_conf or None)
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
            saved = dict(self.session_properties)
            self.session_properties = dict(cmd.properties)
            started = len(deferred)
            try:
                for stmt in parse(cmd.statement, custom_types=self.catalog.types):
                    self._execute(stmt, replay_seq=cmd.seq, deferred=deferred)
            except StreamsqlError as e:
                log.warning("could not replay command %s (%s): %s", cmd.seq, cmd.statement, e)
            finally:
                self.session_properties = saved
                for entry in deferred[started:]:
                    properties_of[entry[0]] = dict(cmd.properties)
        for query_id, plan, stmt, sink in deferred:
            if query_id in self.catalog.queries:
                saved = self.session_properties
                self.session_properties = properties_of.get(query_id, {})
                try:
                    self._start_persistent(query_id, plan, stmt, self.catalog.get(sink))
                finally:
                    self.session_properties = saved
        return len(commands)

    def close(self) -> None:
        with self._lock:
            for q in list(self.queries.values()):
                self._stop_handle(q.handle)
            self.queries.clear()
            for store in self.stores.values():
                store.stop_following()
            for tracker in self._end_offsets.values():
                tracker.close()
            self._end_offsets.clear()
        if self._admin is not None:
            self._admin.close()
        self._claim.release()

    # --- properties ----------------------------------------------------------------------------

    def prop(self, name: str) -> str:
        """A property's value: session override, else engine config, else ksqlDB's default."""
        return self.session_properties.get(name) or self.config.property(name)

    @property
    def processing_log_topic(self) -> str:
        return f"{self.config.property('ksql.service.id')}ksql_processing_log"

    # --- execute -------------------------------------------------------------------------------

    def execute(self, text: str) -> list[r.Result]:
        """Parse ``text`` (one or more statements) and execute each in order. A failing statement
        raises; statements before it have taken effect."""
        out: list[r.Result] = []
        for stmt in parse(text, variables=self.variables, custom_types=self.catalog.types):
            out.append(self.execute_statement(stmt))
        return out

    def execute_statement(self, stmt: ast.Statement) -> r.Result:
        with self._lock:
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

    def _log_command(self, stmt: ast.Statement, replay_seq: int | None) -> int:
        if replay_seq is not None:
            return replay_seq
        return self.command_log.append(stmt.text, dict(self.session_properties)).seq

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
                _check_header_type(column)
        source = self._source_from_ddl(stmt)
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
        seq = self._log_command(stmt, replay_seq)
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

    def _source_from_ddl(self, stmt: ast.CreateSource) -> Source:
        props = stmt.properties
        topic = props.get("KAFKA_TOPIC")
        if not topic:
            raise AnalysisError("Missing required property \"KAFKA_TOPIC\" which has no default value.")
        # ksqlDB's server defaults for formats a CREATE STREAM/TABLE leaves out
        key_format, value_format = self._formats(
            props, default_key=self.prop("ksql.persistence.default.format.key") or "KAFKA",
            default_value=self.prop("ksql.persistence.default.format.value") or None)
        columns = list(stmt.columns)
        for c in columns:
            if c.name in t.PSEUDO_COLUMNS or c.name in (t.WINDOWSTART, t.WINDOWEND):
                raise AnalysisError(f"'{c.name}' is a reserved column name. You cannot use it as a name for a column.")
        for side, is_key in (("KEY", True), ("VALUE", False)):
            if props.get(f"{side}_SCHEMA_ID") is None:
                continue
            fmt = key_format if is_key else value_format
            if str(fmt).upper() not in REGISTRY_FORMATS:
                raise AnalysisError(f"{side}_FORMAT should support schema inference when {side}_SCHEMA_ID is "
                                    f"provided. Current format is {str(fmt).upper()}.")
            if any(c.is_key == is_key and c.role in ("key", "value") for c in columns):
                raise AnalysisError(f"Table elements and {side}_SCHEMA_ID cannot both exist for create statement.")
        _check_delimiters(props, key_format, value_format)
        inferred: dict[bool, Any] = {}
        columns = self._infer_columns(props, columns, str(topic), key_format, value_format, inferred)
        source = Source(
            name=stmt.name, kind=stmt.kind, columns=columns, topic=str(topic),
            key_format=key_format if any(c.is_key for c in columns) else "NONE", value_format=value_format,
            key_delimiter=props.get("KEY_DELIMITER", ","), value_delimiter=props.get("VALUE_DELIMITER", ","),
            wrap_single_value=self._wrap_single_value(props, columns, value_format),
            timestamp_column=self._timestamp_column(props, columns), timestamp_format=props.get("TIMESTAMP_FORMAT"),
            is_source=stmt.is_source, statement=stmt.text,
        )
        source.key_format_options = _format_options(props, "KEY", source.key_format)
        source.value_format_options = _format_options(props, "VALUE", source.value_format)
        if source.is_table and "compression" in source.value_format_options:
            raise AnalysisError("VALUE_COMPRESSION is only valid for streams: a compressed batch holds many "
                                "records, a table's message holds one row")
        self._check_key_types(source)
        self._bind_schemas(source, props, inferred)
        self._validate_formats(source)
        source.window_type, source.window_size_ms = _window_properties(props)
        if source.window_type and not source.key_columns:
            raise AnalysisError("Windowed sources require a key column.")
        if props.get("FORMAT") is not None or props.get("KEY_FORMAT") is not None:
            source.declared_key_format = key_format
        return source

    def _formats(self, props: dict[str, Any], default_key: str | None, default_value: str | None) -> tuple[str, str]:
        fmt = props.get("FORMAT")
        key = props.get("KEY_FORMAT")
        value = props.get("VALUE_FORMAT")
        if fmt is not None and key is not None:
            raise AnalysisError("Cannot supply both 'KEY_FORMAT' and 'FORMAT' properties, as 'FORMAT' sets both key "
                                "and value formats. Either use just 'FORMAT', or use 'KEY_FORMAT' and 'VALUE_FORMAT'.")
        if fmt is not None and value is not None:
            raise AnalysisError("Cannot supply both 'VALUE_FORMAT' and 'FORMAT' properties, as 'FORMAT' sets both key "
                                "and value formats. Either use just 'FORMAT', or use 'KEY_FORMAT' and 'VALUE_FORMAT'.")
        key = str(fmt or key or default_key or "KAFKA").upper()
        value_str = fmt or value or default_value
        if value_str is None:
            raise AnalysisError("Missing required property \"VALUE_FORMAT\" which has no default value.")
        value = str(value_str).upper()
        for f in (key, value):
            if f not in KNOWN_FORMATS:
                raise AnalysisError(f"Unknown format: {f}")
        return key, value

    @staticmethod
    def _wrap_single_value(props: dict[str, Any], columns: list[t.Column], value_format: str) -> bool:
        wrap = props.get("WRAP_SINGLE_VALUE")
        if wrap is None:
            return True
        value_cols = [c for c in columns if c.role == "value"]
        if len(value_cols) != 1:
            raise AnalysisError("'WRAP_SINGLE_VALUE' is only valid for single-field value schemas")
        if isinstance(wrap, str):
            wrap = wrap.strip().lower() == "true"
        if wrap and str(value_format).upper() not in _WRAPPING_FORMATS:  # KAFKA, DELIMITED: always bare
            raise ConfigError(f"Format '{str(value_format).upper()}' does not support 'WRAP_SINGLE_VALUE' set to "
                              f"'true'.")
        return bool(wrap)

    @staticmethod
    def _timestamp_column(props: dict[str, Any], columns: list[t.Column]) -> str | None:
        name = props.get("TIMESTAMP")
        if name is None:
            return None
        name = str(name)
        match = next((c for c in columns if c.name == name), None) or next(
            (c for c in columns if c.name.upper() == name.upper()), None)
        if match is None:
            raise AnalysisError(f"The TIMESTAMP column set in the WITH clause does not exist in the schema: "
                                f"'{name.upper()}'")
        if match.type.kind not in (t.Kind.BIGINT, t.Kind.TIMESTAMP, t.Kind.STRING):
            raise AnalysisError(f"Timestamp column, {match.name}, should be LONG(INT64), TIMESTAMP, or a String "
                                f"with a timestamp_format specified.")
        return match.name

    # --- Schema Registry formats -------------------------------------------------------------

    def _registry_url(self, fmt: str) -> str:
        url = self.prop(schema_registry.URL_PROPERTY)
        if not url:
            raise ConfigError(f"The '{fmt}' format needs a Schema Registry: set '{schema_registry.URL_PROPERTY}' "
                              f"(server config, or SET '{schema_registry.URL_PROPERTY}'='http://host:8081').")
        return url

    def _infer_columns(self, props: dict[str, Any], columns: list[t.Column], topic: str, key_format: str,
                       value_format: str, inferred_from: dict[bool, Any]) -> list[t.Column]:
        """ksqlDB's schema inference: a side declared without columns in a registry format takes
        them from the subject's latest schema (or the one ``KEY_/VALUE_SCHEMA_ID`` names).
        ``inferred_from`` receives the schema each inferred side came from (True: the key)."""
        out = list(columns)
        if value_format in REGISTRY_FORMATS and not any(c.role == "value" for c in columns):
            url = self._registry_url(value_format)
            found = self._schema_to_infer(url, topic, False, props.get("VALUE_SCHEMA_ID"))
            if found is not None:
                unwrapped = str(props.get("WRAP_SINGLE_VALUE", "true")).lower() == "false"
                out += format_registry.columns_from_registry(value_format, found.text, role="value",
                                                             unwrapped=unwrapped,
                                                             full_name=_schema_full_name(props, "VALUE"))
                inferred_from[False] = found
        if key_format in REGISTRY_FORMATS and not any(c.is_key for c in columns):
            url = self._registry_url(key_format)
            found = self._schema_to_infer(url, topic, True, props.get("KEY_SCHEMA_ID"))
            if found is not None:
                out = format_registry.columns_from_registry(key_format, found.text, role="key", unwrapped=True,
                                                            full_name=_schema_full_name(props, "KEY")) + out
                inferred_from[True] = found
        return out

    @staticmethod
    def _schema_to_infer(url: str, topic: str, is_key: bool, schema_id: Any) -> Any:
        if schema_id is not None:
            return schema_registry.by_id(url, int(schema_id))
        return schema_registry.latest(url, schema_registry.subject_for(topic, is_key))

    def _bind_schemas(self, source: Source, props: dict[str, Any], inferred: dict[bool, Any] | None = None) -> None:
        """Attach the registry subjects of a registry-format source: the schemas it may read (a
        snapshot, for workers that cannot reach a ``mock://`` registry) and the id it writes
        with (the schema its columns generate, registered if new, as ksqlDB does)."""
        sides = ((True, source.key_format, source.key_columns, "KEY"),
                 (False, source.value_format, source.value_columns, "VALUE"))
        for is_key, fmt, cols, side in sides:
            if fmt not in REGISTRY_FORMATS or not cols:
                continue
            url = self._registry_url(fmt)
            subject = schema_registry.subject_for(source.topic, is_key)
            known = schema_registry.versions(url, subject)
            options = source.key_format_options if is_key else source.value_format_options
            unwrapped = is_key and len(cols) == 1 or (not is_key and len(cols) == 1 and not source.wrap_single_value)
            text = format_registry.registry_schema(fmt, cols, unwrapped=unwrapped, full_name=options.get("fullName"),
                                                   nullable=options.get("nullable"))
            schema_id = props.get(f"{side}_SCHEMA_ID")
            if inferred and is_key in inferred:  # columns read from this schema: write with it too
                writer_id, known[inferred[is_key].id] = inferred[is_key].id, inferred[is_key].text
            elif schema_id is not None:
                found = schema_registry.by_id(url, int(schema_id))
                if not is_key:
                    _check_registry_columns(fmt, found.text, cols, unwrapped, options.get("fullName"))
                writer_id, known[found.id] = found.id, found.text
            else:
                try:
                    writer_id = schema_registry.register(url, subject, text,
                                                         format_registry.REGISTRY_SCHEMA_TYPES[fmt])
                    known[writer_id] = text
                except ConfigError:
                    if not known:
                        raise
                    writer_id = max(known)  # the registry refused ours (compatibility): write with its latest
            binding = schema_registry.SchemaBinding(url, subject, writer_id, known)
            if is_key:
                source.key_schema = binding
            else:
                source.value_schema = binding

    @staticmethod
    def _validate_formats(source: Source) -> None:
        """Fail at statement time when a format cannot hold the columns (ksqlDB does too)."""
        Engine._check_key_types(source)
        for part, spec in (("Key", io.key_spec(source)), ("Value", io.value_spec(source))):
            try:
                serde_for(spec)
            except UnsupportedSchemaError as e:  # ksqlDB's message: the format, the columns, why
                columns = ", ".join(c.sql() for c in spec.columns)
                raise UnsupportedSchemaError(f"{part} format does not support schema.\nformat: {spec.name}\n"
                                             f"schema: Persistence{{columns=[{columns}], features=[]}}\n"
                                             f"reason: {e.message}") from None

    @staticmethod
    def _check_key_types(source: Source) -> None:
        for c in source.key_columns:
            if _contains_map(c.type):
                raise AnalysisError(
                    "Map keys, including types that contain maps, are not supported as they may lead to unexpected "
                    f"behavior due to inconsistent serialization. Key column name: `{c.name}`. Column type: {c.type}. "
                    "See https://github.com/confluentinc/ksql/issues/6621 for more.")

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
        self._log_command(stmt, replay_seq)
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
        self._log_command(stmt, replay_seq)
        return r.CommandStatus(stmt.text, f"Registered custom type with name '{stmt.name}' and SQL type {stmt.type}")

    def _do_DropType(self, stmt: ast.DropType, replay_seq: int | None = None,
                     deferred: Deferred | None = None) -> r.Result:
        if stmt.name not in self.catalog.types:
            if stmt.if_exists:
                return r.CommandStatus(stmt.text, f"Type '{stmt.name}' does not exist")
            raise CatalogError(f"Type {stmt.name} does not exist.")
        del self.catalog.types[stmt.name]
        self._log_command(stmt, replay_seq)
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
        _check_timestamp_projected(stmt)
        _check_table_is_grouped(stmt)
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
        sink = self._sink_source(stmt, plan)
        df = self._plan_dataframe(plan, "planning")
        sink.columns = Planner.output_types(plan, df)
        # WITH (TIMESTAMP=...): the records it writes carry that column's time (the builder's sink)
        sink.timestamp_column = self._timestamp_column(stmt.properties, sink.columns)
        sink.timestamp_format = stmt.properties.get("TIMESTAMP_FORMAT")
        if isinstance(plan, AggregatePlan) and sink.value_format == "DELIMITED" and any(
                c.function.result_type is not None
                and c.function.result_type.kind in (t.Kind.ARRAY, t.Kind.MAP, t.Kind.STRUCT)
                for c in plan.calls):
            raise AnalysisError("One of the functions used in the statement has an intermediate type that the value "
                                "format can not handle. Please remove the function or change the format.")
        sink.key_format_options = _format_options(stmt.properties, "KEY", sink.key_format)
        sink.value_format_options = _format_options(stmt.properties, "VALUE", sink.value_format)
        self._validate_formats(sink)
        self._bind_schemas(sink, stmt.properties)
        if replay_seq is None:
            config = {"cleanup.policy": "compact"} if sink.is_table and not sink.window_type else None
            self.admin.create_topic(sink.topic, sink.partitions, int(stmt.properties.get("REPLICAS", 1)), config)
        seq = self._log_command(stmt, replay_seq)
        query_id = f"{'CTAS' if sink.is_table else 'CSAS'}_{stmt.name}_{seq}"
        sink.writer_query = query_id
        self.catalog.add(sink)
        self.catalog.queries[query_id] = QueryInfo(query_id, stmt.text, sink.name, _input_names(plan.source))
        if deferred is not None:
            deferred.append((query_id, plan, stmt, sink.name))
        else:
            self._start_persistent(query_id, plan, stmt, sink)
        return r.CommandStatus(stmt.text, f"Created query with ID {query_id}", command_seq=seq, query_id=query_id)

    def _sink_source(self, stmt: ast.CreateAsSelect, plan: QueryPlan | AggregatePlan) -> Source:
        props = stmt.properties
        src = plan.source
        default_key = src.key_format if src.key_format != "NONE" else (src.declared_key_format or "KAFKA")
        if default_key == "NONE":  # a keyless source's new key takes the server's default key format
            default_key = self.prop("ksql.persistence.default.format.key") or "KAFKA"
        key_format, value_format = self._formats(props, default_key=default_key,
                                                 default_value=src.value_format)
        _check_delimiters(props, key_format, value_format)
        topic = str(props.get("KAFKA_TOPIC") or (self.prop("ksql.output.topic.name.prefix") + stmt.name))
        has_key = bool(plan.key_columns)
        if not has_key and str(props.get("KEY_FORMAT") or "NONE").upper() != "NONE" and stmt.kind == "STREAM":
            raise AnalysisError("Key format specified for stream without key columns.")
        window_type, window_size_ms = None, None
        if isinstance(plan, AggregatePlan):
            if plan.window:
                window_type, window_size_ms = plan.window.type, plan.window.size_ms
        elif src.window_type and not plan.repartitioned:  # a windowed stream keeps its windows
            window_type, window_size_ms = src.window_type, src.window_size_ms
        return Source(
            name=stmt.name, kind=stmt.kind, columns=[], topic=topic,
            key_format=key_format if has_key else "NONE", value_format=value_format,
            partitions=int(props.get("PARTITIONS", src.partitions)),
            # a DELIMITED sink keeps its source's delimiters unless the WITH clause sets them (ksqlDB)
            key_delimiter=props.get("KEY_DELIMITER", src.key_delimiter if key_format == src.key_format else ","),
            value_delimiter=props.get("VALUE_DELIMITER",
                                      src.value_delimiter if value_format == src.value_format else ","),
            wrap_single_value=self._wrap_single_value(props, [t.Column(c.name, t.STRING) for c in plan.value_columns],
                                                      value_format)
            if "WRAP_SINGLE_VALUE" in props else True,
            statement=stmt.text,
            window_type=window_type, window_size_ms=window_size_ms,
        )

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
        df = self._plan_dataframe(plan, "planning")
        produced = Planner.output_types(plan, df)
        expected = [c for c in target.columns if c.role in ("key", "value")]
        if isinstance(plan, QueryPlan) and _widened(plan, produced, expected):
            # ksqlDB casts numbers up to the sink's types (INT → BIGINT → DECIMAL → DOUBLE)
            df = self._plan_dataframe(plan, "planning")
            produced = Planner.output_types(plan, df)
        if [(c.name, str(c.type), c.role) for c in produced] != [(c.name, str(c.type), c.role) for c in expected]:
            raise AnalysisError(
                f"Incompatible schema between results and sink.\nResult schema is "
                f"{', '.join(c.sql() for c in produced)}\nSink schema is {', '.join(c.sql() for c in expected)}")
        seq = self._log_command(stmt, replay_seq)
        query_id = str(stmt.properties.get("QUERY_ID") or f"INSERTQUERY_{seq}").upper()
        self.catalog.queries[query_id] = QueryInfo(query_id, stmt.text, target.name, _input_names(plan.source))
        if deferred is not None:
            deferred.append((query_id, plan, stmt, target.name))
        else:
            self._start_persistent(query_id, plan, stmt, target)
        return r.CommandStatus(stmt.text, f"Created query with ID {query_id}", command_seq=seq, query_id=query_id)

    def _plan_dataframe(self, plan: QueryPlan | AggregatePlan, query_id: str) -> DataFrame:
        """The query's output DataFrame, for its column types (Spark's analyser checks it)."""
        builder = SparkBuilder(self._build_context(query_id))
        try:
            if isinstance(plan, AggregatePlan):
                scan = builder.dataframe(physical_plan(plan, Collect(_ignore), self._offset_reset()), upto=1)
                aggregation.build_dataframe(plan, scan)  # Spark analyses the keys and arguments
                return aggregation.post_dataframe(plan, self.spark, [])  # the output columns and their types
            return builder.dataframe(physical_plan(plan, Collect(_ignore), self._offset_reset()))
        except Exception as e:  # Spark's analyser: type errors the compiler could not see
            raise AnalysisError(spark_message(e)) from None

    def _offset_reset(self) -> str:
        value = self.prop("auto.offset.reset").lower()
        if value not in VALID_OFFSET_RESETS:
            raise ConfigError(f"Invalid value {value} for configuration auto.offset.reset: "
                              f"String must be one of: earliest, latest")
        return value

    def _start_persistent(self, query_id: str, plan: QueryPlan | AggregatePlan, stmt: ast.Statement,
                          sink: Source) -> None:
        checkpoint = self.data_dir / "checkpoints" / query_id
        resumed = has_committed_batch(checkpoint)
        if checkpoint.exists() and not resumed:  # stopped before its first batch committed
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
        physical = self._physical_plan(plan, changelog, checkpoint, self._offset_reset())
        self.physical_plans[query_id] = physical
        if self.planning_only:
            return
        if not resumed:  # where it begins is decided now, not when Spark plans its first batch
            starts.pin_starts(physical, self.admin.end_offsets, checkpoint)
        if sink.is_table:  # its store follows the changelog topic the query writes
            self._store(sink)
            self.followed[sink.name] = changelog
        context = self._build_context(query_id, count_late=any(isinstance(s, Aggregate) for s in physical.steps))
        handle = SparkBuilder(context).start(physical, checkpoint, query_id)
        info = self.catalog.queries[query_id]
        previous = self.queries.get(query_id)
        self.queries[query_id] = RunningQuery(info, handle, checkpoint,
                                              restart=lambda: self._start_persistent(query_id, plan, stmt, sink),
                                              restarts=previous.restarts if previous is not None else 0)

    def _physical_plan(self, plan: QueryPlan | AggregatePlan, sink: Source, checkpoint: Path | None,
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

    def _collect_plan(self, plan: QueryPlan | AggregatePlan, terminal: Collect, starting_offsets: str,
                      changelog: bool) -> PhysicalPlan:
        """A transient query's steps (push and pull queries, EXPLAIN of a SELECT): an aggregation
        with the session's buckets, record cache and operator choice; ``changelog``: the rows of
        a table read as its changes."""
        if isinstance(plan, AggregatePlan):
            return physical_plan(plan, terminal, starting_offsets, buckets=self._buckets(plan),
                                 cache=self._record_cache(), operator=self._operator())
        return physical_plan(plan, terminal, starting_offsets, changelog=changelog)

    def _build_context(self, query_id: str, count_late: bool = False) -> BuildContext:
        """``count_late``: a persistent aggregation counts its late records (one accumulator
        per query id, kept across restarts of the query)."""
        dropped = self.dropped_records.get(query_id)
        if dropped is None and count_late:
            dropped = self.dropped_records[query_id] = self.spark.sparkContext.accumulator(0)
        return BuildContext(
            dropped_counter=dropped,
            spark=self.spark, bootstrap_servers=self.bootstrap_servers, planner=self.planner,
            processing_log_topic=self.processing_log_topic,
            processing_log_rows=self.prop("ksql.logging.processing.rows.include").strip().lower() == "true",
            max_records=int(self.prop("ksql.streams.max.records.per.batch") or 0) or None,
            throw_on_invalid_timestamp=self.prop("ksql.timestamp.throw.on.invalid").strip().lower() == "true",
            query_id=query_id, limits=self._collection_limits())

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

    def _operator(self) -> str | None:
        """``streamsql.aggregation.operator`` as ``physical_plan``'s ``operator`` (None: choose)."""
        return _operator_choice(self.prop(OPERATOR_PROPERTY))

    def _collection_limits(self) -> dict[str, int]:
        """``ksql.functions.collect_list.limit`` / ``collect_set.limit`` when set."""
        out = {}
        for name in ("collect_list", "collect_set"):
            value = self.session_properties.get(f"ksql.functions.{name}.limit")
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
        self._log_command(stmt, replay_seq)
        return r.CommandStatus(stmt.text, "Query terminated." if stmt.query_id else "All queries terminated.")

    def _terminate(self, query_id: str) -> None:
        """Stop a persistent query for good (TERMINATE, or DROP of its sink) and remove what it
        kept: its checkpoint (offsets and state store) — ksqlDB deletes a terminated query's
        internal topics and state the same way; nothing can resume it, so nothing is left."""
        running = self.queries.pop(query_id, None)
        if running is not None:
            self._stop_handle(running.handle)
        self.physical_plans.pop(query_id, None)
        shutil.rmtree(self.data_dir / "checkpoints" / query_id, ignore_errors=True)
        info = self.catalog.queries.pop(query_id, None)
        if info is not None:
            sink = self.catalog.find(info.sink)
            if sink is not None and sink.writer_query == query_id:
                sink.writer_query = None

    @staticmethod
    def _stop_handle(handle: StreamingQuery) -> None:
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
        target = self.catalog.find(stmt.target)
        if target is None:
            raise CatalogError(_unknown_insert_target(stmt.target, list(self.catalog.sources)))
        if target.is_source:
            raise AnalysisError(f"Cannot insert values into read-only {target.kind.lower()}: {target.name}")
        # without a column list, values go to the key columns first, then the value columns
        # (ksqlDB's logical schema order, whatever order the DDL declared them in)
        writable = [c for c in target.columns if c.role == "key"] + [c for c in target.columns if c.role == "value"]
        headers = [c.name for c in target.columns if c.role in ("headers", "header")]
        if not stmt.columns and headers:  # the implicit column list names them too
            raise AnalysisError(f"Cannot insert into HEADER columns: {', '.join(headers)}")
        names = stmt.columns or [c.name for c in writable]
        if len(names) != len(stmt.values):
            if stmt.columns:
                raise AnalysisError(f"Failed to prepare statement: Expected number columns and values to match: "
                                    f"{len(names)}, {len(stmt.values)}")
            raise AnalysisError(f"Expected a value for each column. Expected Columns: {names}. "
                                f"Got {[v.sql() for v in stmt.values]}")
        by_name = {c.name: c for c in target.columns}
        rowtime: int | None = None
        given: dict[str, str] = {}
        for name, node in zip(names, stmt.values):
            if name == t.ROWTIME:
                rowtime = int(self._evaluate_constants([(compile_constant(node).sql, t.BIGINT)])[0] or 0)
                continue
            if name in (t.ROWPARTITION, t.ROWOFFSET):
                raise AnalysisError(f"Inserting into column `{name}` is not allowed.")
            col = by_name.get(name)
            if col is None:
                raise AnalysisError(f"Column name {name} does not exist.")
            if col.role in ("headers", "header"):
                raise AnalysisError(f"Cannot insert into HEADER columns: {name}")
            value = compile_constant(node)
            # a STRUCT literal fills the column's struct by field name (absent fields null), as ksqlDB
            given[name] = cast_value(value.sql, value.type, col.type) if isinstance(value.type, t.Struct) else value.sql
        values = self._evaluate_constants([(given.get(c.name, "NULL"), c.type) for c in writable])
        row = dict(zip([c.name for c in writable], values))
        key_bytes, value_bytes = self._encode_row(target, row)
        self.admin.produce(target.topic, key_bytes, value_bytes,
                           rowtime if rowtime is not None else int(time.time() * 1000))
        return r.CommandStatus(stmt.text, "Inserted 1 row")

    def _evaluate_constants(self, items: list[tuple[str, t.SqlType]]) -> list[Any]:
        """Evaluate constant expressions in Spark, cast to the column types (so INSERT VALUES
        accepts the same expressions and coercions as queries do)."""
        exprs = [f"CAST({sql} AS {t.to_spark(ty).simpleString()}) AS c{i}" for i, (sql, ty) in enumerate(items)]
        try:
            table = self.spark.sql("SELECT " + ", ".join(exprs)).toArrow()
        except Exception as e:
            raise AnalysisError(f"Failed to evaluate values: {spark_message(e)}") from None
        return [table.column(i)[0] for i in range(len(items))]

    @staticmethod
    def _encode_row(target: Source, row: dict[str, Any]) -> tuple[bytes | None, bytes | None]:
        import pyarrow as pa

        def encode(spec: FormatSpec) -> bytes | None:
            if not spec.columns:
                return None
            arrays = [pa.array([row[c.name].as_py()], type=t.to_arrow(c.type)) for c in spec.columns]
            batch = pa.RecordBatch.from_arrays(arrays, names=[c.name for c in spec.columns])
            return serde_for(spec).encode(batch)[0]

        return encode(io.key_spec(target)), encode(io.value_spec(target))

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
        starting = self._offset_reset() if push else "earliest"
        builder = SparkBuilder(self._build_context(query_id))
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

        physical = self._collect_plan(plan, Collect(on_batch, available_now=not push), starting,
                                      changelog=push and plan.source.is_table)
        starts.pin_starts(physical, self.admin.end_offsets)  # a push query sees what follows its acceptance
        df = builder.dataframe(physical)  # built once: its columns name the result, then it runs
        typed = aggregation.post_dataframe(plan, self.spark, []) if isinstance(plan, AggregatePlan) else df
        columns = Planner.output_types(plan, typed)
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
                self._stop_handle(handle)
                shutil.rmtree(checkpoint, ignore_errors=True)

        stream.on_close(lambda: self._stop_handle(handle))
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
            store.follow(self.bootstrap_servers, self.followed[table.name])
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
        df = self.spark.createDataFrame(data, schema)
        out = self.planner.to_dataframe(plan, df)
        result = Planner.output_types(plan, out)
        names = [c.name for c in plan.columns]
        stream = r.RowStream(stmt.text, f"query_{int(time.time() * 1000)}", [(c.name, str(c.type)) for c in result],
                             limit=plan.limit, kind="pull")
        for row in out.select(*[f"`{n}`" for n in names]).collect():
            if not stream.put([_to_python(v) for v in row]):
                break
        stream.finish()
        return stream

    def _do_Print(self, stmt: ast.Print) -> r.Result:
        topics = self.admin.topics()
        topic = (stmt.topic if stmt.topic in topics
                 else next((n for n in topics if n.upper() == stmt.topic.upper()), None))
        if topic is None:
            raise KafkaError(f"Could not find topic '{stmt.topic}', or the KSQL user does not have permissions to "
                             f"list the topic. Topic names are case-sensitive.")
        stream = r.RowStream(stmt.text, f"print_{topic}", [("record", "STRING")], limit=stmt.limit, kind="print")
        interval = max(1, stmt.interval or 1)

        def pump() -> None:
            try:
                records = self.admin.iter_records(topic, from_beginning=stmt.from_beginning, follow=True)
                for i, rec in enumerate(records):
                    if stream.closed:
                        return
                    if i % interval == 0 and not stream.put([format_record(rec)]):
                        return
            except Exception as e:
                stream.finish(e)

        threading.Thread(target=pump, name=f"print-{topic}", daemon=True).start()
        return stream

    # --- meta ----------------------------------------------------------------------------------

    def _do_Show(self, stmt: ast.Show) -> r.Result:
        what = stmt.what.upper()
        if what in ("STREAMS", "TABLES"):
            sources = self.catalog.streams() if what == "STREAMS" else self.catalog.tables()
            return r.SourceList(stmt.text, what, [_source_info(s) for s in sorted(sources, key=lambda s: s.name)])
        if what == "TOPICS":
            topics = self.admin.topics()
            shown = {n: p for n, p in topics.items() if stmt.all_topics or not n.startswith("_")}
            return r.TopicList(stmt.text, [r.TopicInfo(n, p) for n, p in sorted(shown.items())])
        if what == "QUERIES":
            return r.QueryList(stmt.text, self.describe_queries(stmt.extended))
        if what == "PROPERTIES":
            props = dict(DEFAULT_PROPERTIES)
            props.update(self.config.properties)
            props.update(self.session_properties)
            return r.Properties(stmt.text, props, dict(self.session_properties))
        if what == "FUNCTIONS":
            return r.FunctionList(stmt.text, [r.FunctionInfo(f.name, f.kind, f.category, f.description)
                                              for f in REGISTRY.all()])
        if what == "VARIABLES":
            return r.Properties(stmt.text, dict(self.variables), {})
        if what == "TYPES":
            return r.Properties(stmt.text, {k: str(v) for k, v in self.catalog.types.items()}, {})
        if what == "CONNECTORS":
            return self.connectors.show(stmt)
        raise AnalysisError(f"SHOW {what} is not supported")

    def describe_queries(self, extended: bool = True) -> list[r.QueryDescription]:
        """Every persistent query's state and statistics (SHOW QUERIES [EXTENDED])."""
        with self._lock:
            return [self._describe_query(q, extended) for q in list(self.catalog.queries.values())]

    def _describe_query(self, info: QueryInfo, extended: bool = False) -> r.QueryDescription:
        """A query's state and statistics; ``extended`` (SHOW QUERIES EXTENDED) adds its consumer
        lag, which asks Kafka for the input topics' offsets."""
        running = self.queries.get(info.id)
        state = "NOT_RUNNING"
        stats: dict[str, Any] = {}
        if running is not None:
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
            dropped = self.dropped_records.get(info.id)
            if dropped is not None:  # ksqlDB's late-record count (records dropped past grace)
                stats["numRowsDroppedByWatermark"] = dropped.value
            elif any(isinstance(s, SparkAggregate) for s in getattr(self.physical_plans.get(info.id), "steps", ())):
                # Spark's operator drops late rows itself and reports them per micro-batch: the
                # count over the batches Spark keeps progress for (the last 100)
                stats["numRowsDroppedByWatermark"] = sum(
                    int(op.get("numRowsDroppedByWatermark") or 0)
                    for p in handle.recentProgress for op in (p.get("stateOperators") or []))
            for op in (progress.get("stateOperators") if progress else None) or []:  # an aggregation's state
                stats["stateRows"] = stats.get("stateRows", 0) + int(op.get("numRowsTotal") or 0)
                stats["stateMemoryBytes"] = stats.get("stateMemoryBytes", 0) + int(op.get("memoryUsedBytes") or 0)
            plan = self.physical_plans.get(info.id)
            if extended and progress and plan is not None:
                stats.update(self._lag_stats(plan, progress))
            ui = self._spark.sparkContext.uiWebUrl if extended and self._spark is not None else None
            if ui:  # --spark-ui: the query's page in Spark's web UI
                stats["sparkUi"] = f"{ui}/StreamingQuery/statistics/?id={handle.id}"
        return r.QueryDescription(info.id, info.statement, info.sink, info.sources, state, info.kind, stats)

    def _lag_stats(self, plan: PhysicalPlan, progress: dict[str, Any]) -> dict[str, Any]:
        """Consumer lag of a query's inputs for its description's stats."""
        from streamsql.runtime.progress import lag_stats

        rows = self._query_lag(plan, progress)
        return lag_stats(rows) if rows is not None else {}

    def _query_lag(self, plan: PhysicalPlan, progress: dict[str, Any]) -> list[PartitionLag] | None:
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

        with self._lock:
            tracker = self._end_offsets.get(topic)
            if tracker is None:
                tracker = self._end_offsets[topic] = EndOffsets(self.bootstrap_servers, topic)
            ends = tracker.ends()
            starts = tracker.earliest(list(ends))
        return {p: (starts.get(p, 0), e) for p, e in ends.items()}

    def _offset_summaries(self, source: Source) -> list[r.OffsetSummary]:
        """DESCRIBE … EXTENDED's consumer groups: each running query that reads ``source``, its
        committed offsets in the source's topic against the topic's ends (ksqlDB's
        ``queryOffsetSummaries``; the group id is the one ksqlDB would give the query)."""
        out = []
        for info in self.catalog.queries_reading(source.name):
            running, plan = self.queries.get(info.id), self.physical_plans.get(info.id)
            progress = running.handle.lastProgress if running is not None else None
            if not progress or plan is None:
                continue
            rows = [row for row in self._query_lag(plan, progress) or [] if row.topic == source.topic]
            if rows:
                out.append(r.OffsetSummary(f"_confluent-ksql-{self.prop('ksql.service.id')}query_{info.id}",
                                           source.topic, [r.PartitionOffsets(x.partition, x.start, x.end, x.committed)
                                                          for x in rows]))
        return out

    def _do_Describe(self, stmt: ast.Describe) -> r.Result:
        if stmt.connector:
            return self.connectors.describe(stmt)
        if stmt.function:
            fn = REGISTRY.get(stmt.name or "")
            if fn is None:
                raise unknown_function(stmt.name or "")
            from streamsql.planner.signatures import variants

            return r.FunctionDescription(stmt.text, r.FunctionInfo(fn.name, fn.kind, fn.category, fn.description),
                                         [r.FunctionVariant(list(v.params), v.returns, v.variadic)
                                          for v in variants(fn)])
        if stmt.listing:
            sources = self.catalog.streams() if stmt.listing == "STREAMS" else self.catalog.tables()
            return r.SourceList(stmt.text, stmt.listing, [_source_info(s) for s in sources])
        source = self.catalog.get(stmt.name or "")
        fields = [r.FieldInfo(t.ROWTIME, "BIGINT", False)] if stmt.extended else []
        fields += [r.FieldInfo(c.name, str(c.type) + (" (header)" if c.role in ("headers", "header") else ""), c.is_key)
                   for c in source.columns]
        return r.SourceDescription(
            stmt.text, _source_info(source), fields, source.partitions, source.timestamp_column, source.statement,
            [q.id for q in self.catalog.queries_reading(source.name)],
            [q.id for q in self.catalog.queries_writing(source.name)], stmt.extended,
            self._offset_summaries(source) if stmt.extended else [])

    def _do_Explain(self, stmt: ast.Explain) -> r.Result:
        if stmt.query_id:
            info = self.catalog.queries.get(stmt.query_id.upper())
            if info is None:
                raise CatalogError(f"Query with id:{stmt.query_id} does not exist, use SHOW QUERIES to view the full "
                                   f"set of queries.")
            text = f"Query {info.id}\n{info.statement}"
            physical = self.physical_plans.get(info.id)
            if physical is not None:
                text += "\n\nPhysical steps:\n" + physical.explain()
            running = self.queries.get(info.id)
            if running is not None:
                text += "\n\nSpark plan:\n" + _spark_plan(running.handle)
            return r.Explanation(stmt.text, text)
        inner = stmt.statement
        query = getattr(inner, "query", None)
        if query is None:
            raise AnalysisError("EXPLAIN needs a query or a CREATE ... AS SELECT / INSERT INTO statement")
        sink = getattr(inner, "name", None) or getattr(inner, "target", None)
        plan = self.planner.plan_query(query, persistent=sink is not None, sink_name=sink)
        if isinstance(inner, (ast.CreateAsSelect, ast.InsertInto)):
            target = (self._sink_source(inner, plan) if isinstance(inner, ast.CreateAsSelect)
                      else self.catalog.get(inner.target))
            physical = self._physical_plan(plan, target, None, self._offset_reset())
        else:
            terminal = Collect(_ignore, available_now=query.emit is None)
            physical = self._collect_plan(plan, terminal, self._offset_reset(),
                                          changelog=plan.source.is_table and query.emit is not None)
        return r.Explanation(stmt.text, plan.explain() + "\n\nPhysical steps:\n" + physical.explain())

    def _do_SetProperty(self, stmt: ast.SetProperty) -> r.Result:
        if stmt.name == "auto.offset.reset" and stmt.value.lower() not in VALID_OFFSET_RESETS:
            raise ConfigError(f"Invalid value {stmt.value} for configuration auto.offset.reset: "
                              f"String must be one of: earliest, latest")
        if stmt.name == CACHE_PROPERTY:
            _cache_bytes(stmt.value)
        if stmt.name == BUCKETS_PROPERTY:
            _bucket_count(stmt.value)
        if stmt.name == OPERATOR_PROPERTY:
            _operator_choice(stmt.value)
        self.session_properties[stmt.name] = stmt.value
        return r.CommandStatus(stmt.text, f"Successfully changed local property '{stmt.name}' to '{stmt.value}'.")

    def _do_UnsetProperty(self, stmt: ast.UnsetProperty) -> r.Result:
        self.session_properties.pop(stmt.name, None)
        return r.CommandStatus(stmt.text, f"Successfully unset local property '{stmt.name}'.")

    def _do_DefineVariable(self, stmt: ast.DefineVariable) -> r.Result:
        self.variables[stmt.name] = stmt.value
        return r.CommandStatus(stmt.text, f"Defined variable {stmt.name}")

    def _do_UndefineVariable(self, stmt: ast.UndefineVariable) -> r.Result:
        if self.variables.pop(stmt.name, None) is None:
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
        for stmt in parse(text, variables=self.variables, custom_types=self.catalog.types):
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

        with self._lock:
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
        self._stop_handle(q.handle)
        q.restart()
        self.queries[q.info.id].restarts = q.restarts
        return True

    def failed_queries(self) -> list[tuple[str, str]]:
        out = []
        for qid, q in self.queries.items():
            exc = q.handle.exception() if not q.handle.isActive else None
            if exc is not None:
                out.append((qid, spark_message(exc)))
        return out


#: ksqlDB's default ``ksql.streams.cache.max.bytes.buffering`` (10 MB)
RECORD_CACHE_DEFAULT = "10485760"
CACHE_PROPERTY = "ksql.streams.cache.max.bytes.buffering"
#: formats whose single value column may be wrapped in a record or left bare
_WRAPPING_FORMATS = {"JSON", "JSON_SR", "AVRO", "PROTOBUF", "PROTOBUF_NOSR"}


def _check_delimiters(props: dict[str, Any], key_format: str, value_format: str) -> None:
    """KEY_/VALUE_DELIMITER: one character, or TAB or SPACE, and only for a DELIMITED part
    (ksqlDB's property validation, then its format's supported configs)."""
    for side, fmt in (("KEY", key_format), ("VALUE", value_format)):
        value = props.get(f"{side}_DELIMITER")
        if value is None:
            continue
        text = str(value)
        reason = None
        if not text.strip():
            reason = ("Delimiter cannot be empty, if you meant to have a tab or space for delimiter, please use "
                      "the special values 'TAB' or 'SPACE'")
        elif len(text) != 1 and text.upper() not in ("TAB", "SPACE"):
            reason = f"Invalid delimiter value: '{text}'. Delimiter must be a single character or TAB,SPACE"
        if reason is not None:
            raise ConfigError(f"Failed to prepare statement: Configuration {side}_DELIMITER is invalid: {reason}\n"
                              f"Example valid value: ';'")
        if str(fmt).upper() != "DELIMITED":
            raise ConfigError(f"{str(fmt).upper()} does not support the following configs: [delimiter]")


def _check_header_type(column: t.Column) -> None:
    """A HEADER('k') column is BYTES and a HEADERS column ARRAY<STRUCT<KEY STRING, VALUE BYTES>>:
    the types Kafka's headers have (ksqlDB's messages)."""
    from streamsql.kafka.source import header_type

    if column.role not in ("headers", "header"):
        return
    expected = header_type(column.role)
    if str(column.type) != str(expected):  # field names as written: `key` is not KEY
        what = f"HEADER('{column.header_key}')" if column.role == "header" else "HEADERS"
        raise AnalysisError(f"Invalid type for {what} column: expected {expected}, got {column.type}")


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


def _unknown_insert_target(name: str, known: list[str]) -> str:
    """ksqlDB's message for INSERT VALUES into a missing source, with a hint when only the case
    differs (a quoted name keeps its case, an unquoted one is upper-cased)."""
    message = f"Cannot insert values into an unknown stream/table: `{name}`"
    other = next((k for k in known if k.upper() == name.upper()), None)
    if other is None:
        return message
    if other == other.upper():
        return f"{message}\nDid you mean {other}? Hint: try removing double quotes from the source name."
    return f'{message}\nDid you mean "{other}"? Hint: wrap the source name in double quotes to make it case-sensitive.'


def _check_table_is_grouped(stmt: ast.CreateAsSelect) -> None:
    """CREATE TABLE AS SELECT with aggregates needs a GROUP BY (ksqlDB's message lists the calls,
    COUNT(*) as it rewrites it: COUNT(ROWTIME))."""
    if stmt.kind != "TABLE" or stmt.query.group_by:
        return
    per_item = [[call for call in item.expression.find_all(exp.Anonymous) if REGISTRY.is_aggregate(str(call.this))]
                for item in stmt.query.select if item.expression is not None]
    calls = [call for item_calls in per_item for call in item_calls]
    if calls and all(per_item):  # a bare column is reported first (the planner's non-aggregate message)
        shown = [to_ksql(call).upper().replace("(*)", "(ROWTIME)") for call in calls]
        raise AnalysisError(f"CREATE TABLE AS SELECT statement does not support aggregate function "
                            f"[{', '.join(shown)}] without a GROUP BY clause.")


def _check_timestamp_projected(stmt: ast.CreateAsSelect) -> None:
    """A sink's TIMESTAMP column must be one of the query's columns; ksqlDB checks it when it
    analyses the statement, before the projection's key rules, so its message comes first. Only
    a projection of named columns is checked here (``*``, unnamed expressions and a join's
    qualified columns get their names from the planner; ``Engine._timestamp_column`` checks them
    after planning)."""
    name = stmt.properties.get("TIMESTAMP")
    if name is None:
        return
    names = set()
    for item in stmt.query.select:
        if item.alias is not None:
            names.add(item.alias.upper())
        elif (not item.star and isinstance(item.expression, exp.Column)
              and not isinstance(item.expression.this, exp.Star)
              and not (stmt.query.joins and item.expression.table)):  # a join names A.X as A_X when both have X
            names.add(item.expression.name.upper())
        else:
            return
    if str(name).upper() not in names:  # ksqlDB names the column as it resolves it: upper case
        raise AnalysisError(f"The TIMESTAMP column set in the WITH clause does not exist in the schema: "
                            f"'{str(name).upper()}'")


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


def _window_properties(props: dict[str, Any]) -> tuple[str | None, int | None]:
    """``WINDOW_TYPE`` / ``WINDOW_SIZE`` of a source over a windowed topic, checked as ksqlDB does."""
    from streamsql.sql.parser import _UNIT_MS

    kind = props.get("WINDOW_TYPE")
    size = props.get("WINDOW_SIZE")
    if kind is None:
        if size is not None:
            raise AnalysisError("'WINDOW_SIZE' should only be set for windowed sources (WINDOW_TYPE).")
        return None, None
    kind = str(kind).upper()
    if kind not in ("TUMBLING", "HOPPING", "SESSION"):
        raise AnalysisError(f"Invalid value {kind} for property WINDOW_TYPE: String must be one of: "
                            f"SESSION, HOPPING, TUMBLING")
    if kind == "SESSION":
        if size is not None:
            raise AnalysisError("'WINDOW_SIZE' should not be set for SESSION windows.")
        return kind, None
    if size is None:
        raise AnalysisError(f"{kind} windows require 'WINDOW_SIZE' to be provided in the WITH clause. "
                            f"For example: 'WINDOW_SIZE'='10 SECONDS'")
    parts = str(size).split()
    unit = parts[1].upper() if len(parts) == 2 else ""
    if len(parts) != 2 or not parts[0].isdigit() or unit not in _UNIT_MS:
        raise AnalysisError(f"Configuration WINDOW_SIZE is invalid: Invalid duration: '{size}'. "
                            f"Unknown time unit: '{unit}'")
    return kind, int(parts[0]) * _UNIT_MS[unit]


def _source_info(s: Source) -> r.SourceInfo:
    return r.SourceInfo(s.name, s.kind, s.topic, s.key_format, s.value_format, s.window_type is not None)


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


def spark_message(exc: BaseException) -> str:
    """The useful first line of a Spark/Py4J error, not the JVM stack."""
    text = getattr(exc, "desc", None) or getattr(exc, "message", None) or str(exc)
    text = str(text).strip()
    for marker in ("\n\tat ", "\nJVM stacktrace:", "\n== "):
        if marker in text:
            text = text.split(marker)[0]
    return text.strip()


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


def _contains_map(sql: t.SqlType) -> bool:
    if isinstance(sql, t.Map):
        return True
    if isinstance(sql, t.Array):
        return _contains_map(sql.element)
    if isinstance(sql, t.Struct):
        return any(_contains_map(f.type) for f in sql.fields)
    return False


def _input_names(source: Source) -> list[str]:
    """The catalog sources a query reads (both sides of a join)."""
    if isinstance(source, JoinedSource) and source.join is not None:
        return [side.source.name for side in source.join.leaves()]
    return [source.name]


def _check_registry_columns(fmt: str, text: str, columns: list[t.Column], unwrapped: bool,
                            full_name: str | None) -> None:
    """A query writing its values with a given ``VALUE_SCHEMA_ID``: its columns must be the
    schema's first columns, in order and of the same types (the schema may have more: optional
    ones or ones with defaults are filled in), as ksqlDB checks. Names compare in any case
    (Protobuf inference upper-cases them)."""
    registered = format_registry.columns_from_registry(fmt, text, role="value", unwrapped=unwrapped,
                                                       full_name=full_name)
    def same(a: t.Column, b: t.Column) -> bool:
        return (a.name.upper(), str(a.type).upper()) == (b.name.upper(), str(b.type).upper())

    changed = [c for i, c in enumerate(columns) if i >= len(registered) or not same(registered[i], c)]
    if changed:
        raise AnalysisError(f"The following value columns are changed, missing or reordered: "
                            f"[{', '.join(_plain_sql(c) for c in changed)}]. Schema from schema registry is "
                            f"[{', '.join(_plain_sql(c) for c in registered)}]")


def _plain_sql(column: t.Column) -> str:
    return f"`{column.name}` {column.type}"


def _schema_full_name(props: dict[str, Any], side: str) -> str | None:
    """``{side}_SCHEMA_FULL_NAME`` (or the older ``{side}_AVRO_SCHEMA_FULL_NAME``)."""
    name = props.get(f"{side}_SCHEMA_FULL_NAME", props.get(f"{side}_AVRO_SCHEMA_FULL_NAME"))
    return None if name is None else str(name)


def _format_options(props: dict[str, Any], side: str, fmt: str) -> dict[str, str]:
    """The WITH-clause options a side's serde needs: the schema's full name
    (``{side}_SCHEMA_FULL_NAME``, or ``{side}_AVRO_SCHEMA_FULL_NAME``) and Protobuf's null
    representation (``{side}_PROTOBUF_NULLABLE_REPRESENTATION``), and our ``VALUE_COMPRESSION``
    (gzipped batches of lines, ``formats/compression.py``)."""
    out: dict[str, str] = {}
    name = _schema_full_name(props, side)
    if name is not None:
        out["fullName"] = name
    nullable = props.get(f"{side}_PROTOBUF_NULLABLE_REPRESENTATION")
    if nullable is not None:
        if not fmt.startswith("PROTOBUF"):
            raise AnalysisError(f"{side}_PROTOBUF_NULLABLE_REPRESENTATION is only valid for the PROTOBUF formats")
        if str(nullable).upper() not in ("OPTIONAL", "WRAPPER"):
            raise AnalysisError(f"Invalid value {nullable} for property {side}_PROTOBUF_NULLABLE_REPRESENTATION: "
                                f"String must be one of: OPTIONAL, WRAPPER")
        out["nullable"] = str(nullable).upper()
    codec = props.get(f"{side}_COMPRESSION")
    if codec is not None:
        out["compression"] = compression.check_compression(str(codec), fmt, side)
    return out
