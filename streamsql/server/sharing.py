"""Shared push queries: clients asking the server for the same stateless push query from the
latest offset get their rows from one Spark query.

Every push query is otherwise its own Spark streaming query (seconds to start, a Kafka reader and
Python workers each). When the statement, its properties and variables are the same, the query
reads from the latest offset and keeps no state (no aggregation, window or join), what a client
that joins later sees is exactly what its own query would have shown from that moment: the rows
arriving after it subscribed. Such clients subscribe to one running query (the "source") instead;
each subscriber has its own row stream, query id and LIMIT. When its last subscriber leaves, the
source lingers a few seconds (:data:`LINGER_S`) before it stops: under load clients come and go
all the time, and a source stopped between two of them would cost the next one a new Spark query
(seconds). A source starts outside the hub's lock (only clients of the same statement wait for
it). Anything else (``earliest``, aggregations, joins, windows, pull queries,
PRINT) keeps a query per client, since a late subscriber would see state built before it came.
"""

from __future__ import annotations

import itertools
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from streamsql.runtime import results as r

#: how long a shared source with no subscriber keeps running for the next client
LINGER_S = 5.0

_LIMIT = re.compile(r"\s+LIMIT\s+\d+\s*$")
ShareKey = tuple[str, tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]


@dataclass
class _Shared:
    source: r.RowStream
    subscribers: list[r.RowStream] = field(default_factory=list)
    #: when the last subscriber left (None while it has subscribers)
    idle_since: float | None = None


class PushQueryHub:
    """The running shared push queries, by statement text, properties and variables."""

    def __init__(self, linger_s: float = LINGER_S) -> None:
        self._lock = threading.Lock()
        self._running: dict[ShareKey, _Shared] = {}
        #: held while a key's source starts: its other clients wait, others' do not
        self._starting: dict[ShareKey, threading.Lock] = {}
        self._ids = itertools.count(1)
        self.linger_s = linger_s

    @staticmethod
    def key(text: str, properties: dict[str, str], variables: dict[str, str]) -> ShareKey:
        """What makes two push queries the same: the statement (spacing, case and the LIMIT aside:
        each subscriber keeps its own LIMIT), its properties and variables."""
        statement = _LIMIT.sub("", " ".join(text.split()).rstrip(";").upper())
        return (statement, tuple(sorted(properties.items())), tuple(sorted(variables.items())))

    @property
    def running(self) -> int:
        """How many shared source queries run now (tests and metrics)."""
        with self._lock:
            return len(self._running)

    def subscribe(self, key: ShareKey, statement: str, limit: int | None,
                  start: Callable[[], r.RowStream]) -> r.RowStream:
        """A row stream for one client: a new subscriber of the running source for ``key``, or of
        a new one made by ``start()`` (the statement without its LIMIT)."""
        with self._lock:
            starting = self._starting.setdefault(key, threading.Lock())
        with starting:
            with self._lock:
                shared = self._running.get(key)
            if shared is None or shared.source.closed:
                shared = _Shared(start())  # a Spark query: seconds, outside the hub's lock
                with self._lock:
                    self._running[key] = shared
                threading.Thread(target=self._pump, args=(key, shared), name="push-share", daemon=True).start()
            with self._lock:
                source = shared.source
                sub = r.RowStream(statement, f"{source.query_id}_{next(self._ids)}", source.columns, limit=limit,
                                  kind="push")
                shared.subscribers.append(sub)
                shared.idle_since = None
        sub.on_close(lambda: self._leave(key, shared, sub))
        return sub

    def _leave(self, key: ShareKey, shared: _Shared, sub: r.RowStream) -> None:
        with self._lock:
            # by identity: row streams are dataclasses, equal when their statements are
            shared.subscribers = [s for s in shared.subscribers if s is not sub]
            if shared.subscribers:
                return
            shared.idle_since = idle_since = time.monotonic()
        if self.linger_s <= 0:
            self._stop_if_idle(key, shared, idle_since)
        else:
            timer = threading.Timer(self.linger_s, self._stop_if_idle, (key, shared, idle_since))
            timer.daemon = True
            timer.start()

    def _stop_if_idle(self, key: ShareKey, shared: _Shared, idle_since: float) -> None:
        """Stop ``shared``'s source if nobody subscribed since it became idle at ``idle_since``."""
        with self._lock:
            if shared.subscribers or shared.idle_since != idle_since:
                return
            if self._running.get(key) is shared:
                del self._running[key]
        shared.source.close()  # stops the Spark query

    def close(self) -> None:
        """Stop every shared source now (the server is stopping)."""
        with self._lock:
            running = list(self._running.values())
            self._running.clear()
        for shared in running:
            shared.source.close()

    def _pump(self, key: ShareKey, shared: _Shared) -> None:
        """Copy each row of the source to every subscriber; a subscriber whose LIMIT is reached
        is finished (and leaves); the source's end or error ends every subscriber."""
        error: BaseException | None = None
        try:
            while True:
                row = shared.source.poll(0.5)
                if row is r.RowStream.TIMEOUT:
                    if not shared.subscribers and shared.source.closed:
                        return
                    continue
                if row is None:
                    break
                with self._lock:
                    subscribers = list(shared.subscribers)
                for sub in subscribers:
                    if not sub.put(row):
                        self._leave(key, shared, sub)
        except BaseException as e:  # noqa: BLE001 - the query failed: every subscriber hears it
            error = e
        with self._lock:
            subscribers = list(shared.subscribers)
            if self._running.get(key) is shared:
                del self._running[key]
        for sub in subscribers:
            sub.finish(error)
