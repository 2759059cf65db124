"""ksqlDB's server-wide limits on queries, with its names, defaults and messages.

* ``ksql.max.push.queries`` (ksqlDB's default 100): push queries open at once across the server,
  counted per client request, so clients sharing one Spark query (``sharing.py``) each count, as
  each is a push query to ksqlDB. One more is refused before it starts anything, and a slot is
  freed when its response ends (LIMIT reached, ``/close-query``, or the client gone).
* ``ksql.query.persistent.active.limit`` (default unlimited, as ksqlDB's ``Integer.MAX_VALUE``):
  persistent queries (CREATE ... AS SELECT, INSERT INTO ... SELECT) at once; a request that would
  exceed it is refused whole before any of its statements runs.
* ``ksql.query.pull.max.qps`` (default unlimited): pull queries per second across the server,
  answered 429 past it. A token bucket holding one second's worth (ksqlDB uses Guava's
  ``RateLimiter``, which likewise allows about a second's burst).

They are server settings (the config file), read once at start; a client cannot change them.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from streamsql.errors import ConfigError
from streamsql.runtime.config import EngineConfig
from streamsql.server.errors import BAD_STATEMENT, ServerError
from streamsql.sql import ast

MAX_PUSH_QUERIES = "ksql.max.push.queries"
PERSISTENT_ACTIVE_LIMIT = "ksql.query.persistent.active.limit"
PULL_MAX_QPS = "ksql.query.pull.max.qps"
#: ksqlDB's defaults (Integer.MAX_VALUE: no limit)
DEFAULTS = {MAX_PUSH_QUERIES: 100, PERSISTENT_ACTIVE_LIMIT: 2**31 - 1, PULL_MAX_QPS: 2**31 - 1}
TOO_MANY_REQUESTS = 42900


@dataclass(frozen=True)
class LimitSettings:
    max_push_queries: int = DEFAULTS[MAX_PUSH_QUERIES]
    persistent_active_limit: int = DEFAULTS[PERSISTENT_ACTIVE_LIMIT]
    pull_max_qps: int = DEFAULTS[PULL_MAX_QPS]

    @classmethod
    def from_config(cls, config: EngineConfig) -> LimitSettings:
        def read(name: str) -> int:
            text = config.property(name).strip()
            if not text:
                return DEFAULTS[name]
            try:
                value = int(text)
            except ValueError:
                raise ConfigError(f"{name}: expected a whole number, got '{text}'") from None
            if value < 0 or (name == PULL_MAX_QPS and value == 0):
                raise ConfigError(f"{name}: must be {'positive' if name == PULL_MAX_QPS else '0 or more'}, "
                                  f"got {value}")
            return value

        return cls(read(MAX_PUSH_QUERIES), read(PERSISTENT_ACTIVE_LIMIT), read(PULL_MAX_QPS))


class QueryLimits:
    """The server's counters against :class:`LimitSettings` (one per server, thread-safe)."""

    def __init__(self, settings: LimitSettings | None = None) -> None:
        self.settings = settings or LimitSettings()
        self._lock = threading.Lock()
        self._push = 0
        rate = self.settings.pull_max_qps
        self._tokens = float(rate)
        self._refilled = time.monotonic()

    @property
    def push_queries(self) -> int:
        with self._lock:
            return self._push

    def try_acquire_push(self) -> bool:
        """Take a push query slot if one is free."""
        with self._lock:
            if self._push < self.settings.max_push_queries:
                self._push += 1
                return True
            return False

    def push_refused(self, statement: str) -> ServerError:
        """ksqlDB's refusal of one push query too many (a statement error, 40001)."""
        limit = self.settings.max_push_queries
        return ServerError(BAD_STATEMENT, "Not executing statement(s) as it would cause the number of active, push "
                                          "queries to exceed the configured limit. Terminate existing PUSH queries, "
                                          f"or increase the '{MAX_PUSH_QUERIES}' setting via the "
                                          "'ksql-server.properties' file. Current push query count: "
                                          f"{self.push_queries}. Configured limit: {limit}.", statement, [])

    def release_push(self) -> None:
        with self._lock:
            self._push = max(0, self._push - 1)

    def check_pull_rate(self) -> None:
        """Take a pull query's token, or refuse as ksqlDB does (429, 42900)."""
        rate = self.settings.pull_max_qps
        if rate >= DEFAULTS[PULL_MAX_QPS]:
            return
        with self._lock:
            now = time.monotonic()
            self._tokens = min(float(rate), self._tokens + (now - self._refilled) * rate)
            self._refilled = now
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return
        raise ServerError(TOO_MANY_REQUESTS, f"Host is at rate limit for pull queries. Currently set to {float(rate)} "
                                             "qps.")

    def check_persistent(self, statements: list[ast.Statement], running: set[str], text: str) -> None:
        """Refuse a request whose statements would leave more persistent queries than the limit
        (the running ones, less those it terminates, plus those it starts), before any runs."""
        limit = self.settings.persistent_active_limit
        if limit >= DEFAULTS[PERSISTENT_ACTIVE_LIMIT]:
            return
        remaining = set(running)
        started = 0
        for stmt in statements:
            if isinstance(stmt, ast.Terminate):
                remaining = set() if stmt.query_id is None else {q for q in remaining
                                                                  if q.upper() != stmt.query_id.upper()}
            elif isinstance(stmt, (ast.CreateAsSelect, ast.InsertInto)):
                started += 1
        if started and len(remaining) + started > limit:
            raise ServerError(BAD_STATEMENT, "Not executing statement(s) as it would cause the number of active, "
                                             "persistent queries to exceed the configured limit. Use the TERMINATE "
                                             "command to terminate existing queries, or increase the "
                                             f"'{PERSISTENT_ACTIVE_LIMIT}' setting via the 'ksql-server.properties' "
                                             f"file. Current persistent query count: {len(running)}. Configured "
                                             f"limit: {limit}.", text.strip(), [])
