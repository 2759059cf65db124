"""The materialized state of a table: the current row per key, for pull queries and for deciding
when a changelog needs a tombstone.

Two writers. An aggregation's store *follows its changelog topic* (:meth:`TableStore.follow`):
the executors write the changelog, and each pull query first applies what was written since the
last one, per partition in one SQLite transaction with the offsets read. A filtered/projected
table's query writes its micro-batch's changed rows here from ``foreachBatch`` in one
transaction with the batch id; a batch id at or below the stored one is a replay after a
restart and is skipped, so that store matches the query's checkpoint. Values are pickled
Python values (Decimal, date, bytes, nested dicts survive exactly); the file is the engine's
own, never read from elsewhere. Why SQLite: point lookups cost well under a millisecond
(research/spark.md §2h measured < 0.05 ms), it is in the standard library, and any thread of
the engine (runner, shell, REST server) can read while the query writes.

Pull queries by key (``=``, ``IN``), by a range on a single-column key, or by a WINDOWSTART
range read only the matching rows through indexes (``key_text``, ``k0``, ``wstart``); anything
else scans. The query's full WHERE is applied to the rows read either way.
"""

from __future__ import annotations

import json
import pickle
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamsql.physical.table_changes import key_text

if TYPE_CHECKING:
    from streamsql.catalog import Source
    from streamsql.kafka.admin import EndOffsets


def _just_key(key: list[Any]) -> str:
    return json.dumps(key, separators=(",", ":"), default=str)


def _sortable(value: Any) -> Any:
    """The ``k0`` column: a single-column key as SQLite can compare it (numbers, text)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    return value


_COLUMNS = ("k", "key_text", "k0", "key_blob", "wstart", "wend", "value_blob", "rowtime")


@dataclass
class Lookup:
    """Which rows a pull query needs: exact keys, a range on a single-column key and/or a
    WINDOWSTART range (bounds are (value, inclusive) or None)."""

    keys: list[list[Any]] | None = None
    key_low: tuple[Any, bool] | None = None
    key_high: tuple[Any, bool] | None = None
    wstart_low: tuple[int, bool] | None = None
    wstart_high: tuple[int, bool] | None = None


class TableStore:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._follow_lock = threading.Lock()
        self._ends: EndOffsets | None = None  # of a followed changelog topic
        #: the changelog's reader options as given, parsed, and the schema they decode to
        self._reader: tuple[dict[str, Any], Any, Any] | None = None
        #: coalesced catch-ups (:meth:`catch_up`): how many were started, the highest index of
        #: one that finished, whether one runs, and the last one that failed (index, error)
        self._catch_ups = threading.Condition()
        self._started = 0
        self._finished = -1
        self._running = False
        self._failed: tuple[int, BaseException] | None = None
        #: what :meth:`catch_up`'s ``writes`` counted when the last successful catch-up began
        #: (-1: none yet), and when (``time.monotonic``)
        self._seen_writes = -1
        self._seen_at = 0.0
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS rows (k TEXT PRIMARY KEY, key_text TEXT, k0, key_blob BLOB, "
                         "wstart INTEGER, wend INTEGER, value_blob BLOB, rowtime INTEGER)")
        self._db.execute("CREATE INDEX IF NOT EXISTS rows_key ON rows (key_text, wstart)")
        self._db.execute("CREATE INDEX IF NOT EXISTS rows_k0 ON rows (k0)")
        self._db.execute("CREATE INDEX IF NOT EXISTS rows_wstart ON rows (wstart)")
        self._db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER)")
        # the aggregation processor's state (physical/aggregator.py), committed with the rows
        self._db.execute("CREATE TABLE IF NOT EXISTS state (ns TEXT, k TEXT, blob BLOB, PRIMARY KEY (ns, k))")

    @property
    def last_batch(self) -> int:
        row = self._db.execute("SELECT value FROM meta WHERE name='batch'").fetchone()
        return int(row[0]) if row else -1

    def contains(self, key: list[Any], window: tuple[int | None, int | None] = (None, None)) -> bool:
        return self._db.execute("SELECT 1 FROM rows WHERE k=?", (key_text(key, window),)).fetchone() is not None

    def apply(self, batch_id: int,
              upserts: Iterable[tuple[list[Any], tuple[int | None, int | None], dict[str, Any], int]],
              deletes: Iterable[tuple[list[Any], tuple[int | None, int | None]]],
              state: Iterable[tuple[str, str, bytes | None]] = ()) -> None:
        """Apply one batch atomically (upserts: key, window, value columns, rowtime; state:
        namespace, key, blob or None to delete)."""
        with self._lock:
            cur = self._db.cursor()
            cur.execute("BEGIN")
            try:
                for key, window, value, rowtime in upserts:
                    _upsert(cur, key, window, value, rowtime)
                for key, window in deletes:
                    cur.execute("DELETE FROM rows WHERE k=?", (key_text(key, window),))
                for ns, k, blob in state:
                    if blob is None:
                        cur.execute("DELETE FROM state WHERE ns=? AND k=?", (ns, k))
                    else:
                        cur.execute("INSERT INTO state VALUES (?,?,?) "
                                    "ON CONFLICT(ns, k) DO UPDATE SET blob=excluded.blob",
                                    (ns, k, blob))
                cur.execute("INSERT INTO meta VALUES ('batch', ?) ON CONFLICT(name) DO UPDATE SET value=excluded.value",
                            (batch_id,))
                cur.execute("COMMIT")
            except BaseException:
                cur.execute("ROLLBACK")
                raise

    # --- following a changelog topic ---------------------------------------------------------

    def offsets(self) -> dict[int, int]:
        """Per partition of the followed changelog topic: the next offset to read."""
        return {int(name.split(":", 1)[1]): int(value) for name, value
                in self._db.execute("SELECT name, value FROM meta WHERE name LIKE 'offset:%'")}

    def follow(self, bootstrap_servers: str, table: Source, read_committed: bool = False) -> int:
        """Catch up with ``table``'s changelog topic: read every record written since the last
        call, up to the topic's end now, and apply it (a value upserts its key, a tombstone
        deletes it). Returns the records applied. A pull query calls this first, so it sees
        every batch its query committed (the records of a committed batch are acknowledged
        by Kafka before the commit); nothing is read while nobody queries the table. It may also
        see a batch whose records are written but not yet committed (measured: about 1 s before
        the commit, ``benchmarks/pull_visibility.py``): a replay of that batch after a crash
        writes the same values, so a reader sees a value early, never a wrong one.
        ``read_committed`` (``exactly_once_v2``): records of aborted transactions are skipped, and
        a batch is seen once its transaction commits."""
        from streamsql.kafka.admin import EndOffsets
        from streamsql.kafka.decoding import source_schema
        from streamsql.kafka.options import SourceOptions, librdkafka_settings
        from streamsql.kafka.reading import read_range
        from streamsql.physical import io

        with self._follow_lock:
            options = dict(io.kafka_options(bootstrap_servers, table), startingOffsets="earliest",
                           **(io.READ_COMMITTED if read_committed else {}))
            if self._reader is None or self._reader[0] != options:  # parsed once (~1-3 ms a time)
                opts = SourceOptions.parse(options)
                self._reader = (options, opts, source_schema(opts))
            _, opts, schema = self._reader
            if self._ends is None:
                self._ends = EndOffsets(bootstrap_servers, table.topic, librdkafka_settings(options))
            ends = self._ends.ends()
            done = self.offsets()
            keys = [c.name for c in table.key_columns]
            values = [c.name for c in table.value_columns]
            windowed = bool(table.window_type)
            applied = 0
            for partition, end in sorted(ends.items()):
                start = done.get(partition, 0)
                if end <= start:
                    continue
                upserts: dict[str, Any] = {}
                for batch in read_range(opts, schema, partition, start, end):
                    for row in batch.to_pylist():
                        key = [row[k] for k in keys]
                        window = (row.get("WINDOWSTART"), row.get("WINDOWEND")) if windowed else (None, None)
                        ident = key_text(key, window)
                        upserts[ident] = (key, window, None if row["__TOMBSTONE"] else
                                          {v: row[v] for v in values}, row["ROWTIME"])
                        applied += 1
                self._apply_followed(partition, end, list(upserts.values()))
            return applied

    def catch_up(self, bootstrap_servers: str, table: Source, read_committed: bool = False,
                 writes: Callable[[], int] | None = None, recheck_after_s: float = 0.25) -> None:
        """:meth:`follow`, shared by the pull queries that arrive together: a caller sees at least
        everything the changelog held when it called. A catch-up started after the caller
        arrived reads the topic's end after that moment, so the caller waits for it and uses it
        instead of starting its own; one started before may have read the end too early, so the
        caller starts the next one (one at a time). Fifty clients querying the same table then
        cost one Kafka round trip per catch-up, not one each behind a lock. A failed catch-up
        fails its waiters with its error (they asked in the same outage).

        ``writes``: a count that grows whenever something the server knows of wrote the
        changelog — a micro-batch of the table's query committed (its progress reached the
        server's listener), a row inserted through the server was acknowledged. When it has not
        grown since the last catch-up *began* (that one read the ends after every counted write
        was acknowledged) and that was less than ``recheck_after_s`` ago, the store already holds
        every write the caller can know of and Kafka is not asked: the ListOffsets round trip
        each pull query waited for was most of its latency under load (issue #52). A writer the
        count cannot see (another program producing to the topic) is seen within
        ``recheck_after_s``. Without ``writes`` every call catches up."""
        counted = writes() if writes is not None else None
        if counted is not None and counted <= self._seen_writes \
                and time.monotonic() - self._seen_at < recheck_after_s:
            return
        with self._catch_ups:
            mine = self._started  # the index of the next catch-up to start
            while True:
                if self._finished >= mine:
                    return
                if self._failed is not None and self._failed[0] >= mine:
                    raise self._failed[1]
                if not self._running:
                    break
                self._catch_ups.wait()
            index = self._started
            self._started += 1
            self._running = True
        began_at = time.monotonic()
        began_writes = writes() if writes is not None else -1  # read before the ends are
        try:
            self.follow(bootstrap_servers, table, read_committed=read_committed)
        except BaseException as e:
            with self._catch_ups:
                self._running = False
                self._failed = (index, e)
                self._catch_ups.notify_all()
            raise
        with self._catch_ups:
            self._running = False
            self._finished = index
            if began_writes >= self._seen_writes:
                self._seen_writes, self._seen_at = began_writes, began_at
            self._catch_ups.notify_all()

    def _apply_followed(self, partition: int, end: int, changes: list[tuple[Any, ...]]) -> None:
        with self._lock:
            cur = self._db.cursor()
            cur.execute("BEGIN")
            try:
                for key, window, value, rowtime in changes:
                    if value is None:
                        cur.execute("DELETE FROM rows WHERE k=?", (key_text(key, window),))
                    else:
                        _upsert(cur, key, window, value, rowtime)
                cur.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET value=excluded.value",
                            (f"offset:{partition}", end))
                cur.execute("COMMIT")
            except BaseException:
                cur.execute("ROLLBACK")
                raise

    def state_get(self, namespace: str, key: str) -> bytes | None:
        row = self._db.execute("SELECT blob FROM state WHERE ns=? AND k=?", (namespace, key)).fetchone()
        return row[0] if row else None

    def rows(self, lookup: Lookup | None = None) -> list[tuple[list[Any], int | None, int | None, dict[str, Any], int]]:
        """The current rows (all, or a superset of those ``lookup`` selects): (key values,
        window start, window end, value columns, rowtime), in key order."""
        where, params = _conditions(lookup or Lookup())
        sql = "SELECT key_blob, wstart, wend, value_blob, rowtime FROM rows"
        if where:
            sql += " WHERE " + " AND ".join(where)
        with self._lock:  # one connection: never read inside another thread's open transaction
            found = self._db.execute(sql + " ORDER BY k", params).fetchall()
        return [(pickle.loads(key_blob), ws, we, pickle.loads(value_blob), rowtime)
                for key_blob, ws, we, value_blob, rowtime in found]

    def explain(self, lookup: Lookup) -> str:
        """SQLite's plan for a lookup (tests check that key lookups use an index)."""
        where, params = _conditions(lookup)
        sql = "SELECT k FROM rows" + (" WHERE " + " AND ".join(where) if where else "")
        return " ".join(str(r[-1]) for r in self._db.execute("EXPLAIN QUERY PLAN " + sql, params))

    def stop_following(self) -> None:
        """Close the Kafka clients of :meth:`follow` (the next call opens new ones)."""
        with self._follow_lock:
            if self._ends is not None:
                self._ends.close()
                self._ends = None

    def close(self) -> None:
        self.stop_following()
        self._db.close()


def _upsert(cur: sqlite3.Cursor, key: list[Any], window: tuple[int | None, int | None], value: dict[str, Any],
            rowtime: int) -> None:
    cur.execute("INSERT INTO rows VALUES (?,?,?,?,?,?,?,?) ON CONFLICT(k) DO UPDATE SET "
                "value_blob=excluded.value_blob, rowtime=excluded.rowtime",
                (key_text(key, window), _just_key(key), _sortable(key[0]) if len(key) == 1 else None,
                 pickle.dumps(key), window[0], window[1], pickle.dumps(value), rowtime))


def _conditions(lookup: Lookup) -> tuple[list[str], list[Any]]:
    where: list[str] = []
    params: list[Any] = []
    if lookup.keys is not None:
        where.append(f"key_text IN ({','.join('?' * len(lookup.keys))})")
        params += [_just_key(k) for k in lookup.keys]
    for column, bound, low in (("k0", lookup.key_low, True), ("k0", lookup.key_high, False),
                               ("wstart", lookup.wstart_low, True), ("wstart", lookup.wstart_high, False)):
        if bound is not None:
            value, inclusive = bound
            op = (">" if low else "<") + ("=" if inclusive else "")
            where.append(f"{column} {op} ?")
            params.append(value)
    return where, params
