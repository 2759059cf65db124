"""The running queries of one engine: their Spark handles, physical steps and late-record
counters, and the one policy for stopping, draining and restarting them.

Persistent queries (CSAS/CTAS/INSERT INTO, source-table materializations) and sink connectors
are registered here when they start and removed when they are terminated. The runner drains
them (``wait_until_idle``), the server's supervisor restarts the failed ones
(``runtime/supervisor.py``), SHOW QUERIES and the metrics endpoint read them; all go through
this registry, never through an executor's own bookkeeping.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamsql.catalog import QueryInfo
from streamsql.errors import StreamsqlError, query_failure, spark_message

if TYPE_CHECKING:
    from pyspark import Accumulator
    from pyspark.sql.streaming import StreamingQuery

    from streamsql.physical.steps import PhysicalPlan

log = logging.getLogger("streamsql")

#: Spark gives each new Python worker 10 s to connect back; an overloaded machine can miss that.
#: The query itself is fine: it is restarted from its checkpoint (nothing lost or repeated).
TRANSIENT_FAILURES = ("Python worker failed to connect back",)
#: The Python process answering a query's offset calls for a Kafka source (Spark's streaming
#: source runner) died (session 37's CI: at a join's first offsets). It holds nothing the
#: checkpoint does not: a restarted query gets a new one and resumes at its last committed batch
#: (``streamsql-start.json`` before the first). The JVM sees an end-of-file reading the answer,
#: or a broken pipe or a reset writing the next call, in a frame of the runner's JVM class.
SOURCE_RUNNER = "PythonStreamingSourceRunner"
SOURCE_RUNNER_GONE = ("java.io.EOFException", "Broken pipe", "Connection reset")
MAX_RESTARTS = 3


def is_transient(exc: BaseException) -> bool:
    """A failure that restarting the query from its checkpoint cures (``wait_until_idle``
    restarts those; the server's and ``streamsql run``'s supervisor restarts every failure)."""
    if any(m in spark_message(exc) for m in TRANSIENT_FAILURES):
        return True
    text = failure_text(exc)
    return SOURCE_RUNNER in text and any(m in text for m in SOURCE_RUNNER_GONE)


def failure_text(exc: BaseException) -> str:
    """A Spark failure's message and JVM stack, with its causes' (a streaming query's exception
    names its cause's class and frames only there)."""
    parts: list[str] = []
    seen: BaseException | None = exc
    for _ in range(8):  # a cause chain is short; a cycle must not loop
        if seen is None:
            break
        parts += [str(getattr(seen, "desc", "") or seen), str(getattr(seen, "_stackTrace", "") or "")]
        seen = getattr(seen, "_cause", None) or seen.__cause__
    return "\n".join(parts)

@dataclass
class RunningQuery:
    info: QueryInfo
    handle: StreamingQuery
    checkpoint: Path
    #: starts the query again from its checkpoint (after a failure of the machine, not the query)
    restart: Callable[[], None] | None = None
    restarts: int = 0


def stop_handle(handle: StreamingQuery) -> None:
    """Stop a Spark query; a failed query may not stop cleanly, and it is gone either way."""
    try:
        handle.stop()
    except Exception as e:
        log.debug("stopping query: %s", e)


class QueryRegistry:
    """The engine's running queries by id (read like a mapping), with the steps each runs
    (EXPLAIN prints them; kept for planned-only queries too) and, per aggregation, a Spark
    accumulator of the records its windows dropped as late (kept across restarts)."""

    def __init__(self) -> None:
        self._running: dict[str, RunningQuery] = {}
        self.plans: dict[str, PhysicalPlan] = {}
        self.dropped: dict[str, Accumulator[int]] = {}
        #: PAUSEd queries: their Spark query is stopped, their checkpoint kept for RESUME
        self.paused: set[str] = set()
        #: paused queries a replay never started: how to start them on RESUME
        self._pending: dict[str, Callable[[], None]] = {}
        #: running push queries (SHOW QUERIES lists them, TERMINATE ends one): their description
        #: and how to end them; registered by the clients' threads, so behind a lock of their own
        self._push: dict[str, tuple[QueryInfo, Callable[[], None]]] = {}
        self._push_lock = threading.Lock()

    # --- reading ---------------------------------------------------------------------------

    def get(self, query_id: str) -> RunningQuery | None:
        return self._running.get(query_id)

    def __getitem__(self, query_id: str) -> RunningQuery:
        return self._running[query_id]

    def __contains__(self, query_id: object) -> bool:
        return query_id in self._running

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._running))

    def __len__(self) -> int:
        return len(self._running)

    def items(self) -> list[tuple[str, RunningQuery]]:
        return list(self._running.items())

    def values(self) -> list[RunningQuery]:
        return list(self._running.values())

    # --- starting and stopping --------------------------------------------------------------

    def started(self, info: QueryInfo, handle: StreamingQuery, checkpoint: Path,
                restart: Callable[[], None] | None = None) -> RunningQuery:
        """Register a query Spark has just started (again: its restart count is kept)."""
        previous = self._running.get(info.id)
        running = RunningQuery(info, handle, checkpoint, restart=restart,
                               restarts=previous.restarts if previous is not None else 0)
        self._running[info.id] = running
        return running

    def stop(self, query_id: str) -> None:
        """Stop a query for good (TERMINATE, DROP, DROP CONNECTOR) and forget its steps."""
        running = self._running.pop(query_id, None)
        if running is not None:
            stop_handle(running.handle)
        self.plans.pop(query_id, None)
        self.paused.discard(query_id)
        self._pending.pop(query_id, None)

    def pause(self, query_id: str) -> None:
        """PAUSE: stop the Spark query, keep its checkpoint (offsets and state) and its entry."""
        self.paused.add(query_id)
        running = self._running.get(query_id)
        if running is not None:
            stop_handle(running.handle)

    def paused_before_start(self, query_id: str, start: Callable[[], None]) -> None:
        """A query a replay found paused: not started, ``start`` runs on RESUME."""
        self.paused.add(query_id)
        self._pending[query_id] = start

    def resume(self, query_id: str) -> None:
        """RESUME: start the query again from its checkpoint, where the pause left it."""
        if query_id not in self.paused:
            return
        self.paused.discard(query_id)
        pending = self._pending.pop(query_id, None)
        running = self._running.get(query_id)
        if pending is not None:
            pending()
        elif running is not None and running.restart is not None:
            running.restart()

    def stop_all(self) -> None:
        for running in list(self._running.values()):
            stop_handle(running.handle)
        self._running.clear()

    # --- push queries --------------------------------------------------------------------------

    def push_started(self, info: QueryInfo, end: Callable[[], None]) -> None:
        """A push query began streaming to a client; ``end`` closes it (TERMINATE)."""
        with self._push_lock:
            self._push[info.id] = (info, end)

    def push_ended(self, query_id: str) -> None:
        with self._push_lock:
            self._push.pop(query_id, None)

    def push_queries(self) -> list[QueryInfo]:
        """The running push queries, oldest first (ksqlDB's SHOW QUERIES lists them as PUSH)."""
        with self._push_lock:
            return [info for info, _ in self._push.values()]

    def find_push(self, query_id: str) -> str | None:
        """The id of the running push query ``query_id`` names (ids compare case-insensitively:
        TERMINATE's id is read in upper case, a push query's starts ``transient_``)."""
        with self._push_lock:
            return next((qid for qid in self._push if qid.upper() == query_id.upper()), None)

    def end_push(self, query_id: str) -> bool:
        """TERMINATE of a push query: close its stream (its client sees the end of the rows)."""
        with self._push_lock:
            entry = self._push.pop(query_id, None)
        if entry is None:
            return False
        entry[1]()
        return True

    # --- draining and failures ----------------------------------------------------------------

    def wait_until_idle(self, max_rounds: int = 100) -> None:
        """Process everything available in the source topics, through chains of queries (a
        query's output may be another's input), then return. Raises if a query failed."""
        for _ in range(max_rounds):
            before = self._progress_marks()
            for qid in list(self._running):
                if qid not in self.paused:
                    self._drain(qid)
            if self._progress_marks() == before:
                return

    def _drain(self, query_id: str) -> None:
        """``processAllAvailable`` on one query; a query that fails for a transient reason is
        restarted from its checkpoint (at most MAX_RESTARTS times) and drained again."""
        while True:
            q = self._running.get(query_id)
            if q is None:
                return
            self._check_alive(q)  # raises for a real failure; replaces q after a restart
            q = self._running[query_id]
            try:
                q.handle.processAllAvailable()
                return
            except Exception:
                if q.handle.exception() is None:
                    raise

    def _progress_marks(self) -> dict[str, Any]:
        marks = {}
        for qid, q in self._running.items():
            if qid in self.paused:
                continue
            p = q.handle.lastProgress
            marks[qid] = json.dumps([s.get("endOffset") for s in p.get("sources", [])], sort_keys=True) if p else None
        return marks

    def _check_alive(self, q: RunningQuery) -> None:
        exc = q.handle.exception()
        if exc is not None and self._restart_if_transient(q, exc):
            return
        if exc is not None:
            raise StreamsqlError(f"Query {q.info.id} failed: {query_failure(exc)}", q.info.statement)

    def _restart_if_transient(self, q: RunningQuery, exc: BaseException) -> bool:
        message = spark_message(exc)
        if q.restart is None or q.restarts >= MAX_RESTARTS or not is_transient(exc):
            return False
        log.warning("query %s failed for a transient reason (%s); restarting it from its checkpoint",
                    q.info.id, message.splitlines()[0][:200])
        q.restarts += 1
        stop_handle(q.handle)
        q.restart()
        self._running[q.info.id].restarts = q.restarts
        return True

    def failed(self) -> list[tuple[str, str]]:
        """The queries that stopped with an error, and the error (a handle whose JVM side is
        gone counts as failed); the runner reports them, the supervisor restarts them."""
        out = []
        for qid, q in list(self._running.items()):
            if qid in self.paused:
                continue
            try:
                exc = q.handle.exception() if not q.handle.isActive else None
            except Exception as e:  # noqa: BLE001 - the handle itself is broken
                out.append((qid, spark_message(e)))
                continue
            if exc is not None:
                out.append((qid, query_failure(exc)))
        return out
