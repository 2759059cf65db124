"""Restart persistent queries that failed, as ksqlDB's query retry does.

A persistent query can die from a transient cause (a Spark Python worker that could not start in
time on a loaded machine, a broker that was briefly away). ksqlDB retries such a query with an
exponential backoff (``ksql.query.retry.backoff.initial.ms`` / ``max.ms``); here a supervisor
thread does the same: it re-plans the query's statement under the properties it was created with
and starts it on the same checkpoint, so it resumes where its last committed batch ended. The
server and ``streamsql run`` (without ``--until-idle``) both run one.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from streamsql.runtime.queries import stop_handle
from streamsql.runtime.session import Session
from streamsql.sql import ast, parse

if TYPE_CHECKING:
    from pyspark.sql.streaming import StreamingQuery

    from streamsql.runtime.engine import Engine

log = logging.getLogger("streamsql")

INITIAL_BACKOFF_S = 2.0
MAX_BACKOFF_S = 60.0


class QuerySupervisor:
    def __init__(self, engine: Engine, interval_s: float = 1.0) -> None:
        self.engine = engine
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._backoff: dict[str, tuple[float, float]] = {}  # query id -> (next attempt at, backoff)
        self.restarts: dict[str, int] = {}
        self._thread = threading.Thread(target=self._loop, name="query-supervisor", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.check()
            except Exception:  # the supervisor itself must never die
                log.exception("query supervisor")

    def failed(self) -> list[str]:
        return [qid for qid, _ in self.engine.failed_queries()]

    def check(self) -> None:
        now = time.monotonic()
        for qid in self.failed():
            due, backoff = self._backoff.get(qid, (0.0, INITIAL_BACKOFF_S))
            if now < due:
                continue
            self._backoff[qid] = (now + backoff, min(backoff * 2, MAX_BACKOFF_S))
            self.restart(qid)

    def restart(self, query_id: str) -> bool:
        engine = self.engine
        with engine.command_lock:
            running = engine.queries.get(query_id)
            if running is not None and running.info.kind == "CONNECTOR":
                return self._restart_connector(query_id, running.info.sink)
            info = engine.catalog.queries.get(query_id)
            if running is None or info is None:
                return False
            reason = _reason(running.handle)
            stmt = parse(info.statement, custom_types=engine.catalog.types, max_statement_bytes=None)[0]
            sink = engine.catalog.find(info.sink)
            query = getattr(stmt, "query", None)
            if sink is None or query is None or not isinstance(stmt, (ast.CreateAsSelect, ast.InsertInto)):
                return False
            try:
                with engine.session_scope(Session(self._properties_of(query_id))):
                    self._activate_session()
                    plan = engine.planner.plan_query(query, persistent=True, sink_name=sink.name)
                    engine.persistent.restart(query_id, plan, stmt, sink)
            except Exception as e:
                log.warning("could not restart query %s: %s", query_id, e)
                return False
        self.restarts[query_id] = self.restarts.get(query_id, 0) + 1
        log.warning("restarted query %s from its checkpoint after it failed: %s", query_id, reason)
        return True

    def _restart_connector(self, query_id: str, name: str) -> bool:
        """A sink connector whose batch failed (its external system stayed away past
        ``max.retries``): started again on its checkpoint, so the failed batch is written again
        (its documents keep their ids: nothing twice)."""
        engine = self.engine
        running = engine.queries.get(query_id)
        info = engine.catalog.connectors.get(name)
        if running is None or info is None:
            return False
        reason = _reason(running.handle)
        try:
            self._activate_session()
            stop_handle(running.handle)
            engine.connectors.start(info)
        except Exception as e:
            log.warning("could not restart connector %s: %s", name, e)
            return False
        self.restarts[query_id] = self.restarts.get(query_id, 0) + 1
        log.warning("restarted connector %s from its checkpoint after it failed: %s", name, reason)
        return True

    def _activate_session(self) -> None:
        """Queries started from this thread belong to the engine's session."""
        from streamsql.runtime.spark import activate

        activate(self.engine.spark)

    def _properties_of(self, query_id: str) -> dict[str, str]:
        """The overrides of the command that created the query (its id ends with that command's
        sequence number: ``CSAS_X_7``, ``INSERTQUERY_7``)."""
        tail = query_id.rsplit("_", 1)[-1]
        if tail.isdigit():
            for cmd in self.engine.command_log.read_all():
                if cmd.seq == int(tail):
                    return dict(cmd.properties)
        return {}


def _reason(handle: StreamingQuery) -> str:
    try:
        exc = handle.exception()
        text = str(getattr(exc, "desc", None) or exc)
    except Exception as e:
        text = str(e)
    return text.strip().split("\n")[0][:300]
