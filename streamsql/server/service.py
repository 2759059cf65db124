"""What the REST endpoints do, without HTTP: statements, queries, inserts, command statuses.

One :class:`KsqlService` wraps one :class:`~streamsql.runtime.engine.Engine`. Engine calls block
(Spark, Kafka), so the HTTP layer calls these methods on worker threads, side by side: each
request's ``streamsProperties`` and ``sessionVariables`` make a session bound to its own thread
for that request only (``Engine.session_scope``), so requests never see each other's overrides
(SET inside a request affects the rest of that request, as in ksqlDB), and only statements that
change the catalog wait for each other (``Engine.command_lock``).
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from streamsql import entities
from streamsql import types as t
from streamsql.catalog import QueryInfo
from streamsql.errors import AssertionFailed, ParseError, StreamsqlError
from streamsql.formats import schema_registry
from streamsql.runtime import internal_topics, paths
from streamsql.runtime import results as r
from streamsql.runtime.property_policy import PropertyPolicy, PropertyRefused
from streamsql.runtime.session import Session
from streamsql.server.errors import (
    ASSERTION_FAILED,
    BAD_REQUEST,
    COMMAND_QUEUE_CATCHUP_TIMEOUT,
    QUERY_ENDPOINT,
    UNEXPECTED_ERRORS,
    ServerError,
    bad_request,
    client_message,
    statement_error,
)
from streamsql.server.sharing import PushQueryHub
from streamsql.sql import ast, parse

if TYPE_CHECKING:
    from streamsql.catalog.kafka_commands import KafkaCommandLog
    from streamsql.runtime.engine import Engine
    from streamsql.runtime.supervisor import QuerySupervisor

log = logging.getLogger("streamsql.server")

QUERY_ENDPOINT_MESSAGE = ("The following statement types should be issued to the websocket endpoint '/query':\n"
                          "\t* PRINT\n\t* SELECT")


def normalize_overrides(props: Any, policy: PropertyPolicy | None = None) -> dict[str, str]:
    """Request properties as the engine names them: ``ksql.streams.auto.offset.reset`` and
    ``auto.offset.reset`` are the same setting; values become strings. A property that is the
    operator's (``runtime/property_policy.py``; ``policy`` adds the server's denylist) is refused
    with ksqlDB's message naming it."""
    if props is None:
        return {}
    if not isinstance(props, dict):
        raise bad_request("'streamsProperties' must be a JSON object")
    try:
        (policy or PropertyPolicy()).check(str(k) for k in props)
    except PropertyRefused as e:
        raise ServerError(BAD_REQUEST, e.message) from None
    out: dict[str, str] = {}
    for key, value in props.items():
        name = str(key)
        if name.startswith("ksql.streams."):
            name = name[len("ksql.streams."):]
        out[name] = str(value).lower() if isinstance(value, bool) else str(value)
    return out


def normalize_variables(variables: Any) -> dict[str, str]:
    if variables is None:
        return {}
    if not isinstance(variables, dict):
        raise bad_request("'sessionVariables' must be a JSON object")
    return {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in variables.items()}


@dataclass
class QueryHandle:
    """A running query as the server serves it: the engine's row stream plus the header facts."""

    stream: r.RowStream
    key_columns: set[str]
    #: a pull query over a materialized table (its response has no final message, as in ksqlDB)
    over_table: bool = False

    @property
    def query_id(self) -> str:
        return self.stream.query_id

    @property
    def is_pull(self) -> bool:
        return self.stream.kind == "pull"


class KsqlService:
    def __init__(self, engine: Engine, command_log: KafkaCommandLog, service_id: str = "default_") -> None:
        self.engine = engine
        self.command_log = command_log
        self.service_id = service_id
        self.ready = threading.Event()
        self.start_error: str | None = None
        self.cluster_id = ""
        self._statuses: dict[str, dict[str, Any]] = {}
        self._queries: dict[str, QueryHandle] = {}
        self._queries_lock = threading.Lock()
        self._applied = threading.Condition()
        self.supervisor: QuerySupervisor | None = None
        #: identical stateless push queries from the latest offset share one Spark query
        self.push_hub = PushQueryHub()
        #: what clients may not set: the built-in rules and the config file's denylist; SET in a
        #: request is held to it too (the engine's sessions are its clients')
        self.property_policy = PropertyPolicy.from_properties(engine.config.properties)
        engine.config.untrusted_clients = True

    # --- lifecycle -----------------------------------------------------------------------------

    def start(self) -> list[str]:
        """Connect, replay the command log (catalog + persistent queries), then accept requests."""
        try:
            notices = self.engine.start()
            self.cluster_id = self.engine.admin.cluster_id()
            for cmd in self.command_log.read_all():
                try:
                    for stmt in parse(cmd.statement, custom_types=self.engine.catalog.types, max_statement_bytes=None):
                        cid = entities.command_id(stmt)
                        if cid:
                            self._statuses[cid] = {"status": "SUCCESS", "message": "Executed during restore"}
                except StreamsqlError:
                    continue
            from streamsql.runtime.supervisor import QuerySupervisor

            self.supervisor = QuerySupervisor(self.engine)
            self.supervisor.start()
            self.ready.set()
            self.engine.warm_up_in_background()  # a fresh server's first query then starts warm
            return notices
        except Exception as e:
            self.start_error = str(e)
            raise

    def close(self) -> None:
        if self.supervisor is not None:
            self.supervisor.stop()
        with self._queries_lock:
            handles = list(self._queries.values())
            self._queries.clear()
        for h in handles:
            h.stream.close()
        self.push_hub.close()
        self.engine.close()

    # --- command sequence ----------------------------------------------------------------------

    def applied_seq(self) -> int:
        return self.command_log.next_seq() - 1

    def wait_for_seq(self, seq: Any, timeout_s: float = 5.0) -> None:
        """Block until command ``seq`` has been applied locally (ksqlDB's ``commandSequenceNumber``)."""
        if seq is None:
            return
        try:
            wanted = int(seq)
        except (TypeError, ValueError, OverflowError):  # OverflowError: 1e999 reads as infinity
            raise bad_request(f"'commandSequenceNumber' must be a number, got {seq!r}") from None
        deadline = time.monotonic() + timeout_s
        with self._applied:
            while self.applied_seq() < wanted:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ServerError(COMMAND_QUEUE_CATCHUP_TIMEOUT, "Timed out while waiting for a previous "
                                      f"command to execute. command sequence number: {wanted}")
                self._applied.wait(min(left, 0.1))

    # --- /ksql ---------------------------------------------------------------------------------

    def execute_statements(self, text: Any, overrides: dict[str, str], variables: dict[str, str],
                           parsed: list[ast.Statement] | None = None) -> list[dict[str, Any]]:
        """Run a /ksql request's statements; ``parsed``: the caller's parse of ``text`` (the
        role check's), so a request is parsed once."""
        if not isinstance(text, str) or not text.strip():
            raise bad_request("'ksql' must be a non-empty string of statements")
        engine = self.engine
        try:
            with engine.session_scope(Session(dict(overrides), dict(variables))) as session:
                return self._execute_all(text, session, parsed)
        finally:
            with self._applied:
                self._applied.notify_all()

    def _pin_session(self) -> None:
        """Make the engine's SparkSession the JVM thread's active session before Spark calls
        (requests run on a pool of worker threads: ``runtime.spark.activate``). The engine pins
        each thread once (``Engine.spark``): a pin per request cost a py4j round trip or more on
        every pull query, about a tenth of the server's time under many clients."""
        if self.engine.started_spark is not None:
            self.engine.spark  # noqa: B018  (the property pins this thread)

    def _execute_all(self, text: str, session: Session,
                     parsed: list[ast.Statement] | None = None) -> list[dict[str, Any]]:
        engine = self.engine
        self._pin_session()
        try:
            statements = parsed if parsed is not None else engine.parse(text, session)
        except ParseError as e:
            raise statement_error(e.message, e.statement or text.strip()) from None
        except StreamsqlError as e:
            raise statement_error(e.message, e.statement or text.strip()) from None
        for stmt in statements:
            if isinstance(stmt, (ast.SelectStatement, ast.Print)):
                raise ServerError(QUERY_ENDPOINT, QUERY_ENDPOINT_MESSAGE, _text(stmt), [])
        out: list[dict[str, Any]] = []
        for stmt in statements:
            before = self.command_log.next_seq()
            try:
                result = engine.execute_statement(stmt)
            except AssertionFailed as e:  # ksqlDB: HTTP 417, a generic error (no statement text)
                raise ServerError(ASSERTION_FAILED, e.message) from None
            except StreamsqlError as e:
                raise statement_error(e.message, _text(stmt), out) from None
            except Exception as e:
                if _is_analysis_error(e):
                    raise statement_error(_clean(e), _text(stmt), out) from None
                UNEXPECTED_ERRORS.record()
                log.exception("statement failed unexpectedly: %s", stmt.text)
                raise statement_error("The server could not execute the statement; see the server log for "
                                      "details.", _text(stmt), out) from None
            after = self.command_log.next_seq()
            seq = getattr(result, "command_seq", None)
            if seq is None and after > before:
                seq = after - 1
            entity = entities.to_entity(result, stmt, engine.catalog, seq)
            if entity is None:
                continue
            if entity["@type"] == "currentStatus" and entity["commandId"]:
                self._statuses[entity["commandId"]] = dict(entity["commandStatus"])
            out.append(entity)
        return out

    # --- /status -------------------------------------------------------------------------------

    def statuses(self) -> dict[str, str]:
        return {cid: s["status"] for cid, s in self._statuses.items()}

    def status(self, kind: str, entity: str, action: str) -> dict[str, Any] | None:
        for cid in (f"{kind}/{entity}/{action}", f"{kind}/`{entity.strip('`')}`/{action}",
                    f"{kind}/`{entity.strip('`').upper()}`/{action}"):
            if cid in self._statuses:
                return self._statuses[cid]
        return None

    # --- /query, /query-stream -----------------------------------------------------------------

    def start_query(self, text: Any, overrides: dict[str, str], variables: dict[str, str]) -> QueryHandle:
        """Start one SELECT (push or pull) or PRINT; rows are then read from the handle's stream."""
        if not isinstance(text, str) or not text.strip():
            raise bad_request("the request must hold one SELECT or PRINT statement")
        engine = self.engine
        with engine.session_scope(Session(dict(overrides), dict(variables))) as session:
            self._pin_session()
            try:
                statements = engine.parse(text, session)
            except StreamsqlError as e:
                raise statement_error(e.message, e.statement or text.strip()) from None
            if len(statements) != 1:
                raise statement_error(f"Expected exactly one statement, got {len(statements)}", text.strip())
            stmt = statements[0]
            if not isinstance(stmt, (ast.SelectStatement, ast.Print)):
                raise statement_error("The query endpoints only run SELECT and PRINT statements; send "
                                      f"{type(stmt).__name__} statements to /ksql.", _text(stmt))
            result: r.Result
            try:
                if self._shareable(stmt):
                    assert isinstance(stmt, ast.SelectStatement)
                    unlimited = dataclasses.replace(stmt, query=dataclasses.replace(stmt.query, limit=None))

                    def start_shared() -> r.RowStream:
                        stream = engine.execute_statement(unlimited)
                        assert isinstance(stream, r.RowStream)  # a push query always streams
                        # the shared source is the server's: SHOW QUERIES lists its subscribers
                        engine.queries.push_ended(stream.query_id)
                        return stream

                    result = self.push_hub.subscribe(PushQueryHub.key(stmt.text, dict(overrides), dict(variables)),
                                                     stmt.text, stmt.query.limit, start_shared)
                    engine.queries.push_started(QueryInfo(result.query_id, stmt.text, "", [stmt.query.source.name],
                                                          "PUSH"), result.close)
                else:
                    result = engine.execute_statement(stmt)
            except StreamsqlError as e:
                raise statement_error(e.message, _text(stmt)) from None
            except Exception as e:
                if _is_analysis_error(e):
                    log.warning("query rejected by Spark's analyser: %s", e)
                    raise statement_error(_clean(e), _text(stmt)) from None
                raise
        assert isinstance(result, r.RowStream)
        source = self.engine.catalog.find(stmt.query.source.name) if isinstance(stmt, ast.SelectStatement) else None
        handle = QueryHandle(result, self._key_columns(stmt, result),
                             over_table=result.kind == "pull" and source is not None and source.is_table)
        with self._queries_lock:
            self._queries[handle.query_id] = handle
        result.on_close(lambda: self._forget(handle.query_id))
        return handle

    def _shareable(self, stmt: ast.Statement) -> bool:
        """A push query that many clients can read from one Spark query (server/sharing.py):
        from the latest offset, and no state a late subscriber would see built before it came.
        Called with the request's properties in force."""
        if not isinstance(stmt, ast.SelectStatement) or stmt.query.emit != "CHANGES":
            return False
        q = stmt.query
        if q.joins or q.group_by or q.window is not None or q.partition_by or q.having is not None:
            return False
        if self.engine.prop("auto.offset.reset").lower() != "latest":
            return False
        from streamsql.planner.aggregation import AggregatePlan

        return not isinstance(self.engine.planner.plan_query(q, persistent=False), AggregatePlan)

    def _key_columns(self, stmt: ast.Statement, stream: r.RowStream) -> set[str]:
        """Pull queries mark the source's key columns (and window bounds) in their header."""
        if stream.kind != "pull" or not isinstance(stmt, ast.SelectStatement):
            return set()
        source = self.engine.catalog.find(stmt.query.source.name)
        if source is None or not source.is_table:  # a pull query over a stream marks no keys
            return set()
        keys = {c.name for c in source.key_columns}
        if source.window_type:
            keys |= {t.WINDOWSTART, t.WINDOWEND}
        return keys & {name for name, _ in stream.columns}

    def _forget(self, query_id: str) -> None:
        with self._queries_lock:
            self._queries.pop(query_id, None)

    def finished(self, handle: QueryHandle) -> None:
        self._forget(handle.query_id)
        self.engine.queries.push_ended(handle.query_id)  # no longer listed by SHOW QUERIES

    def close_query(self, query_id: Any) -> None:
        if not isinstance(query_id, str):
            raise bad_request("'queryId' must be a string")
        with self._queries_lock:
            handle = self._queries.pop(query_id, None)
        if handle is None:
            raise bad_request(f"No query with id {query_id}")
        handle.stream.close()

    def processing_log(self, limit: int) -> list[dict[str, Any]]:
        """The processing log's latest ``limit`` records (per partition), oldest first."""
        topic = self.engine.processing_log_topic
        records = self.engine.admin.iter_records(topic, from_beginning=True, last=limit, timeout_s=10)
        latest = sorted(records, key=lambda rec: (rec.timestamp, rec.partition, rec.offset))[-limit:]
        return [{"timestamp": rec.timestamp, "partition": rec.partition, "offset": rec.offset,
                 "message": rec.value.decode("utf-8", "replace") if rec.value is not None else None}
                for rec in latest]

    def active_queries(self) -> list[str]:
        with self._queries_lock:
            return list(self._queries)

    # --- /inserts-stream -----------------------------------------------------------------------

    def insert_target(self, target: Any) -> Any:
        if not isinstance(target, str) or not target:
            raise bad_request("Insert stream request must name a 'target' stream")
        source = self.engine.catalog.find(target.upper()) or self.engine.catalog.find(target)
        if source is None:
            raise bad_request(f"Cannot insert values into an unknown stream: {target}")
        if source.is_table:
            raise bad_request(f"Cannot insert values into a table using the inserts stream endpoint: {source.name}")
        if source.is_source:
            raise bad_request(f"Cannot insert values into read-only stream: {source.name}")
        try:
            internal_topics.check_insert_values(source.topic)
        except StreamsqlError as e:
            raise bad_request(e.message) from None
        return source

    def insert_row(self, source: Any, row: Any) -> None:
        """Encode one JSON row with the stream's formats and produce it (column names are
        case-insensitive; a ``ROWTIME`` field sets the record timestamp)."""
        from streamsql.server.inserts import encode_json_row

        if not isinstance(row, dict):
            raise bad_request("Each inserted row must be a JSON object")
        key, value, rowtime = encode_json_row(source, row)
        self.engine.admin.produce(source.topic, key, value, rowtime)

    # --- /ksql/terminate -----------------------------------------------------------------------

    def terminate_cluster(self, delete_topics: Any) -> list[dict[str, Any]]:
        """TERMINATE CLUSTER: stop every query, drop every source (deleting the topics whose
        source name matches a ``deleteTopicList`` pattern) and empty the command log."""
        patterns = [re.compile(str(p), re.IGNORECASE) for p in (delete_topics or [])]
        engine = self.engine
        with engine.command_lock:
            engine.execute("TERMINATE ALL;") if engine.catalog.queries else None
            for name in list(engine.catalog.sources):
                source = engine.catalog.find(name)
                if source is None:
                    continue
                delete = any(p.fullmatch(name) or p.fullmatch(source.topic) for p in patterns)
                delete = delete and not internal_topics.is_read_only(source.topic)  # the processing log stays
                try:
                    engine.admin.delete_topic(source.topic) if delete and not source.is_source else None
                except StreamsqlError as e:
                    log.warning("could not delete topic %s: %s", source.topic, e)
                engine.catalog.remove(name)
            truncate = getattr(self.command_log, "truncate", None) or self.command_log.reset
            truncate()
            for area in (paths.CHECKPOINTS, paths.TABLES):  # query ids restart with the log: no stale state
                paths.remove_tree(engine.data_dir, paths.under(engine.data_dir, area))
            for store in engine.stores.values():  # their Kafka clients too, before topics go
                store.close()
            engine.stores.clear()
            schema_registry.forget_clients()
            self._statuses.clear()
        return [{"@type": "currentStatus", "statementText": "TERMINATE CLUSTER;",
                 "commandId": "cluster/CLUSTER/terminate",
                 "commandStatus": {"status": "SUCCESS", "message": "Cluster terminated: every query stopped, every "
                                                                   "source dropped, the command log emptied."},
                 "commandSequenceNumber": -1, "warnings": []}]

    def rows(self, handle: QueryHandle, timeout: float) -> Iterator[Any]:  # pragma: no cover - helper
        return handle.stream.rows(timeout)


def _is_analysis_error(e: BaseException) -> bool:
    """Spark's analyser rejected the statement (a type or name problem the planner did not
    catch): the client's statement is at fault, so it is a 400 with Spark's message."""
    return type(e).__name__ in ("AnalysisException", "ParseException")


def _clean(e: BaseException) -> str:
    text = client_message(getattr(e, "desc", None) or str(e))
    return text.split("; line ")[0].split("\n")[0]


def _text(stmt: ast.Statement) -> str:
    text = stmt.text.strip()
    return text if text.endswith(";") else text + ";"
