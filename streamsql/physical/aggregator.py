"""The aggregation processor: ksqlDB's per-record aggregation semantics over a micro-batch.

A GROUP BY query runs as a stateless Spark stage (keys and arguments, see
``planner/aggregation.py``) whose rows reach :meth:`AggregationProcessor.process` per bucket and
micro-batch inside a Spark stateful operator (``physical/aggregate.py``). The processor replays
Kafka Streams' aggregate processors record by record:

* **One update per input record** (ksqlDB with its record cache off), whatever the batch size.
* **Record order**: offset order within a partition; across partitions the record with the
  smallest timestamp at the head goes first (Kafka Streams' partition-group choice).
* **Tables**: a changed source row retracts its previous value from its previous group (and the
  group's update is emitted) before its new value is added; same group: one update.
* **Windows** (TUMBLING/HOPPING): a record is dropped when its window's end + grace is at or
  before stream time (max record time seen); **SESSION** windows merge overlapping sessions and
  emit a tombstone for each merged-away session, as Kafka Streams does.
* **EMIT FINAL**: each window's last value is held until stream time passes its end + grace.
* **The record cache** (``latest_only``: ksqlDB's ``ksql.streams.cache.max.bytes.buffering`` > 0):
  one update per key and window per micro-batch, the latest (:func:`collapse`). Its results are
  computed once, after the batch, from the accumulators as the batch left them: a UDAF's ``map``
  (HEAVY_HITTERS sorts its candidates) runs once per changed key per batch, not once per record.

State (accumulators per group, the previous value of each table row, stream time) is read and
written through a :class:`StateBackend`: Spark's state store of the bucket in a query, memory in
unit tests; it is committed with the micro-batch's offsets, so a restart resumes exactly where
the last committed batch left off.
"""

from __future__ import annotations

import heapq
import io
import json
import logging
import operator
import pickle
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from streamsql import types as t
from streamsql.planner.aggregation import MATCH_COL, AggregatePlan

processing_log = logging.getLogger("streamsql.processing_log")


class StateBackend(Protocol):
    def state_get(self, namespace: str, key: str) -> bytes | None: ...


class MemoryState:
    """State for transient (push) queries: kept in memory, nothing survives them."""

    def __init__(self) -> None:
        self._blobs: dict[tuple[str, str], bytes] = {}

    def state_get(self, namespace: str, key: str) -> bytes | None:
        return self._blobs.get((namespace, key))

    def apply(self, changes: list[tuple[str, str, bytes | None]]) -> None:
        for ns, k, blob in changes:
            if blob is None:
                self._blobs.pop((ns, k), None)
            else:
                self._blobs[(ns, k)] = blob


@dataclass
class Group:
    """One group's state: unwindowed ``accs``, or its windows (start -> [end, accs, rowtime])."""

    accs: list[Any] | None = None
    rowtime: int | None = None
    windows: dict[int, list[Any]] = field(default_factory=dict)
    sessions: list[list[Any]] = field(default_factory=list)  # [start, end, accs, rowtime]


class Deferred:
    """An update's results not computed yet: the accumulators they will be read from. Under the
    record cache only a key's last update of a batch is written, and every change to those
    accumulators is followed by an update of the same key and window, so the accumulators as
    the batch leaves them give exactly the results that last update would have computed."""

    __slots__ = ("accs",)

    def __init__(self, accs: list[Any]) -> None:
        self.accs = accs


@dataclass
class Update:
    """One output change: key values, window, aggregate results, rowtime; ``removed``: a tombstone."""

    key: tuple[Any, ...]
    window: tuple[int | None, int | None]
    #: ``Deferred`` inside a batch under the record cache; :meth:`AggregationProcessor.process`
    #: returns updates whose results are values
    results: list[Any] | Deferred | None
    rowtime: int
    removed: bool = False
    #: the key (and window) had a value before this change, and that value's results (only
    #: kept when the plan has a HAVING: the output stage decides whether a change that fails it
    #: must retract a row that passed it, as Kafka Streams' table filter does with old values)
    had: bool = False
    previous: list[Any] | None = None


def _dumps(value: Any) -> bytes:
    """State bytes: pickle, or cloudpickle when a value holds an object of a class defined in a
    Python function file (a UDAF's accumulator), which a Spark worker has by value, not by module."""
    try:
        return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, AttributeError, TypeError):
        from pyspark import cloudpickle

        return cloudpickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


#: where the modules whose classes the state pickles lived before: the state of queries written
#: then names them there (this module's ``Group`` and ``Update`` until session 41, the built-in
#: and Python accumulators until session 42), and :func:`_loads` finds them where they are now
FORMER_MODULES = {
    "streamsql.runtime.aggregator": __name__,
    "streamsql.planner.aggregates": "streamsql.functions.aggregates",
    "streamsql.udf.aggregate": "streamsql.functions.python.aggregate",
}


class _StateUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        return super().find_class(FORMER_MODULES.get(module, module), name)


def _loads(blob: bytes) -> Any:
    """State bytes back (pickle's or cloudpickle's), this module's classes found under its
    former name too, so a query's state written before the move resumes."""
    return _StateUnpickler(io.BytesIO(blob)).load()


def _getter(names: list[str]) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
    """The values of ``names`` in a row, as a tuple."""
    if not names:
        return lambda _row: ()
    if len(names) == 1:
        name = names[0]
        return lambda row: (row[name],)
    return operator.itemgetter(*names)


def _key_text(key: Any) -> str:
    return json.dumps(key, default=repr, separators=(",", ":"))


class AggregationProcessor:
    def __init__(self, plan: AggregatePlan, state: StateBackend, limits: dict[str, int] | None = None,
                 on_error: Callable[[dict[str, Any], BaseException], None] | None = None,
                 latest_only: bool = False) -> None:
        self.plan = plan
        #: the record cache: one update per key and window per batch, results computed after it
        #: (EMIT FINAL holds its windows' values in the state, so they are computed per record)
        self.latest_only = latest_only
        self._defer = latest_only and plan.emit != "FINAL"
        #: per-function collection limits (ksql.functions.collect_list.limit, ...collect_set.limit)
        self.limits = {k.upper(): v for k, v in (limits or {}).items()}
        #: told about every record an error dropped (the engine writes it to the processing log)
        self.on_error = on_error
        self.state = state
        self.key_names = [name for name, _, _ in plan.keys]
        #: a row's grouping key and each call's arguments, read by C getters (per record)
        self._key_of = _getter(self.key_names)
        self._args_of = [_getter(call.arg_columns) for call in plan.calls]
        self.window = plan.window
        self.grace = plan.grace_ms
        self.final = plan.emit == "FINAL"
        self.need_previous = plan.having is not None
        self._groups: dict[str, Group] = {}
        self._texts: dict[tuple[Any, ...], str] = {}  # key values -> state key text (saves json per record)
        self._idents: dict[tuple[Any, Any], str] = {}  # (key, window) -> pending_final name
        self._rows: dict[str, Any] = {}  # table source: source key -> (group key, args) or None
        self._dirty_groups: set[str] = set()
        self._dirty_rows: set[str] = set()
        blob = state.state_get("meta", "")
        meta = _loads(blob) if blob else {}
        self.stream_time: int = meta.get("stream_time", -1)
        self.final_time: int = meta.get("final_time", -1)
        self.pending_final: dict[str, Update] = meta.get("pending_final", {})
        #: lower bounds of the held windows' ends and starts: ``_emit_closed`` scans the held
        #: windows only when stream time may have closed or expired one (a scan per record made
        #: EMIT FINAL quadratic in the number of open windows)
        self._min_end, self._min_start = self._bounds()
        self.dropped: int = meta.get("dropped", 0)
        self.errors: int = meta.get("errors", 0)
        self.last_error: str | None = None

    # --- state -----------------------------------------------------------------------------

    def _group(self, key: tuple[Any, ...]) -> tuple[str, Group]:
        try:
            text = self._texts.get(key) or self._texts.setdefault(key, _key_text(key))
        except TypeError:  # unhashable key values (ARRAY, MAP, STRUCT)
            text = _key_text(key)
        group = self._groups.get(text)
        if group is None:
            blob = self.state.state_get("group", text)
            group = _loads(blob) if blob is not None else Group()
            self._groups[text] = group
        self._dirty_groups.add(text)
        return text, group

    def _previous_row(self, source_key: tuple[Any, ...]) -> tuple[str, Any]:
        text = _key_text(source_key)
        if text not in self._rows:
            blob = self.state.state_get("row", text)
            self._rows[text] = _loads(blob) if blob is not None else None
        return text, self._rows[text]

    def state_changes(self) -> list[tuple[str, str, bytes | None]]:
        """The state written since the last call: (namespace, key, blob or None to delete)."""
        out: list[tuple[str, str, bytes | None]] = []
        for text in self._dirty_groups:
            g = self._groups[text]
            empty = g.accs is None and not g.windows and not g.sessions
            out.append(("group", text, None if empty else _dumps(g)))
        for text in self._dirty_rows:
            row = self._rows[text]
            out.append(("row", text, None if row is None else _dumps(row)))
        meta = {"stream_time": self.stream_time, "final_time": self.final_time,
                "pending_final": self.pending_final, "dropped": self.dropped, "errors": self.errors}
        out.append(("meta", "", _dumps(meta)))
        self._dirty_groups.clear()
        self._dirty_rows.clear()
        if len(self._groups) > 100_000:  # bound the cache; the store has everything
            self._groups.clear()
            self._rows.clear()
            self._texts.clear()
        if len(self._idents) > 100_000:
            self._idents.clear()
        return out

    # --- processing ------------------------------------------------------------------------

    def process(self, rows: list[dict[str, Any]]) -> list[Update]:
        out: list[Update] = []
        for row in ordered(rows):
            try:
                self._process_one(row, out)
            except Exception as e:  # a bad value (e.g. DECIMAL overflow) drops the record, not the query
                self._dropped_by(row, f"record partition={row.get(t.ROWPARTITION)} offset={row.get(t.ROWOFFSET)}", e)
        if not self.latest_only:
            return out
        return [u for u in collapse(out) if self._resolve(u)]

    def _dropped_by(self, row: dict[str, Any], what: str, e: BaseException) -> None:
        self.errors += 1
        self.last_error = f"{what}: {type(e).__name__}: {e}"
        processing_log.error("aggregation dropped a record: %s", self.last_error)
        if self.on_error is not None:
            self.on_error(row, e)

    def _resolve(self, update: Update) -> bool:
        """Compute a deferred update's results; False (the update is not written, the error is
        logged with its key) when a function's result fails, as a record whose results fail is
        dropped without the cache."""
        if not isinstance(update.results, Deferred):
            return True
        try:
            update.results = self._results(update.results.accs)
        except Exception as e:  # a UDAF's map() raised: log it, the query goes on
            self._dropped_by(dict(zip(self.key_names, update.key)), f"result of key {list(update.key)!r}", e)
            return False
        return True

    def _args(self, row: dict[str, Any]) -> list[list[Any]]:
        return [list(get(row)) for get in self._args_of]

    def _process_one(self, row: dict[str, Any], out: list[Update]) -> None:
        key = self._key_of(row)
        rowtime = row[t.ROWTIME] if row[t.ROWTIME] is not None else 0
        if self.plan.over_table:
            self._process_table_row(row, key, rowtime, out)
            return
        if any(k is None for k in key):
            return  # ksqlDB drops records whose grouping key is null
        args = self._args(row)
        if self.window is None:
            self._add(key, args, rowtime, out)
        elif self.window.type == "SESSION":
            self._add_session(key, args, rowtime, out)
        else:
            self._add_windowed(key, args, rowtime, out)

    def _new_accs(self) -> list[Any]:
        accs = [call.function.create() for call in self.plan.calls]
        for acc, call in zip(accs, self.plan.calls):
            limit = self.limits.get(call.function.name)
            if limit is not None and hasattr(acc, "limit"):
                acc.limit = limit
        return accs

    def _results(self, accs: list[Any]) -> list[Any]:
        return [a.result() for a in accs]

    def _update_results(self, accs: list[Any]) -> list[Any] | Deferred:
        """An update's results: now, or after the batch under the record cache."""
        return Deferred(accs) if self._defer else self._results(accs)

    def _previous(self, accs: list[Any]) -> list[Any] | None:
        """The results before a change, when the output stage needs them (HAVING)."""
        return self._results(accs) if self.need_previous else None

    def _add(self, key: tuple[Any, ...], args: list[list[Any]], rowtime: int, out: list[Update]) -> None:
        _, group = self._group(key)
        had = group.accs is not None
        if group.accs is None:
            group.accs = self._new_accs()
        previous = self._previous(group.accs) if had else None
        for acc, a in zip(group.accs, args):
            acc.add(a)
        group.rowtime = max(rowtime, group.rowtime if group.rowtime is not None else rowtime)
        out.append(Update(key, (None, None), self._update_results(group.accs), group.rowtime, had=had,
                          previous=previous))

    def _process_table_row(self, row: dict[str, Any], key: tuple[Any, ...], rowtime: int, out: list[Update]) -> None:
        source_key = tuple(row[c] for c in self.plan.source_key_columns)
        text, previous = self._previous_row(source_key)
        new = None
        if row[MATCH_COL] and not any(k is None for k in key):
            new = (key, self._args(row))
        if previous is None and new is None:
            return
        self._rows[text] = new
        self._dirty_rows.add(text)
        if previous is not None:
            old_key, old_args = previous
            _, group = self._group(old_key)
            if group.accs is not None:
                previous = self._previous(group.accs)
                for acc, a in zip(group.accs, old_args):
                    acc.remove(a)
                group.rowtime = max(rowtime, group.rowtime or rowtime)
                if new is None or new[0] != old_key:
                    out.append(Update(old_key, (None, None), self._update_results(group.accs), group.rowtime,
                                      had=True, previous=previous))
                else:  # same group: the retraction and the addition make one update
                    for acc, a in zip(group.accs, new[1]):
                        acc.add(a)
                    out.append(Update(old_key, (None, None), self._update_results(group.accs), group.rowtime,
                                      had=True, previous=previous))
                    return
        if new is not None:
            self._add(new[0], new[1], rowtime, out)

    def _advance(self, rowtime: int) -> int:
        self.stream_time = max(self.stream_time, rowtime)
        return self.stream_time - self.grace

    def _add_windowed(self, key: tuple[Any, ...], args: list[list[Any]], rowtime: int, out: list[Update]) -> None:
        assert self.window is not None
        close = self._advance(rowtime)
        size = self.window.size_ms
        advance = self.window.advance_ms or size
        _, group = self._group(key)
        start = max(0, rowtime - size + advance) // advance * advance
        accepted = False
        while start <= rowtime:
            end = start + size
            if end <= close:
                start += advance
                continue
            accepted = True
            entry = group.windows.get(start)
            had = entry is not None
            if entry is None:
                entry = group.windows[start] = [end, self._new_accs(), rowtime]
            previous = self._previous(entry[1]) if had else None
            for acc, a in zip(entry[1], args):
                acc.add(a)
            entry[2] = max(entry[2], rowtime)
            self._emit(Update(key, (start, end), self._update_results(entry[1]), entry[2], had=had, previous=previous),
                       out)
            start += advance
        if not accepted:
            self.dropped += 1
            if self.final:
                self._emit_closed(out)
        for ws in [ws for ws, e in group.windows.items() if e[0] <= close]:
            del group.windows[ws]  # closed: no record can change it any more

    def _add_session(self, key: tuple[Any, ...], args: list[list[Any]], rowtime: int, out: list[Update]) -> None:
        assert self.window is not None
        close = self._advance(rowtime)
        gap = self.window.size_ms
        _, group = self._group(key)
        merged = [s for s in group.sessions if s[1] >= rowtime - gap and s[0] <= rowtime + gap]
        start = min([rowtime] + [s[0] for s in merged])
        end = max([rowtime] + [s[1] for s in merged])
        if end < close:
            self.dropped += 1
            return
        accs = self._new_accs()
        for s in sorted(merged, key=lambda s: s[0]):
            for acc, other in zip(accs, s[2]):
                acc.merge(other)
        for s in merged:
            group.sessions.remove(s)
            if (start, end) != (rowtime, rowtime):  # Kafka Streams forwards a tombstone per merged session
                self._emit(Update(key, (s[0], s[1]), None, s[1], removed=True, had=True,
                                  previous=self._previous(s[2])), out)
        for acc, a in zip(accs, args):
            acc.add(a)
        group.sessions.append([start, end, accs, end])
        self._emit(Update(key, (start, end), self._update_results(accs), end), out)
        group.sessions = [s for s in group.sessions if s[1] + gap >= close]

    def _emit(self, update: Update, out: list[Update]) -> None:
        if not self.final:
            out.append(update)
            return
        # EMIT FINAL: hold the window's latest value until stream time passes its end + grace
        ident = self._final_ident(update)
        if update.removed:
            self.pending_final.pop(ident, None)
        else:
            update.had, update.previous = False, None  # a final window is emitted once
            self.pending_final[ident] = update
            start, end = update.window
            if start is not None and end is not None:
                self._min_end, self._min_start = min(self._min_end, end), min(self._min_start, start)
        self.final_time = max(self.final_time, update.rowtime)
        self._emit_closed(out)

    def _final_ident(self, update: Update) -> str:
        """The held window's name in ``pending_final`` (state text: it is checkpointed), cached
        per key and window, since EMIT FINAL names one per input record."""
        try:
            ident = self._idents.get((update.key, update.window))
            if ident is None:
                ident = self._idents[(update.key, update.window)] = _key_text([update.key, list(update.window)])
            return ident
        except TypeError:  # unhashable key values (ARRAY, MAP, STRUCT)
            return _key_text([update.key, list(update.window)])

    def _bounds(self) -> tuple[float, float]:
        starts: list[float] = []
        ends: list[float] = []
        for u in self.pending_final.values():
            start, end = u.window
            if start is not None and end is not None:
                starts.append(start)
                ends.append(end)
        return min(ends, default=float("inf")), min(starts, default=float("inf"))

    def _expired(self, window_start: int, now: int) -> bool:
        """Kafka Streams' segmented window store: segments of retention/2; a segment older than
        the one holding ``now - retention`` is dropped with its windows."""
        retention = self.plan.retention_ms
        segment = max(retention // 2, 1)
        return window_start // segment < max(now - retention, 0) // segment

    def _emit_closed(self, out: list[Update]) -> None:
        """EMIT FINAL: emit the held windows whose end + grace is at or before stream time.
        Time windows follow Kafka Streams' emit-on-window-close: stream time is the records'
        (late ones included), and a window whose store segment expired (``_expired``) has
        left the store unemitted. Session windows follow its
        suppression buffer: stream time is that of the aggregation's output records."""
        assert self.window is not None
        session = self.window.type == "SESSION"
        now = self.final_time if session else self.stream_time
        expiry = now - self.grace
        if self._min_end > expiry and (session or not self._expired(int(min(self._min_start, now)), now)):
            return  # nothing held can be ready or expired yet
        ready = []
        for i, (k, u) in enumerate(list(self.pending_final.items())):
            start, end = u.window
            if start is None or end is None:
                continue
            if not session and self._expired(start, now):
                del self.pending_final[k]  # expired from the window store before it could be emitted
            elif end <= expiry:
                ready.append((end if session else start, i, k))
        for _, _, k in sorted(ready):
            out.append(self.pending_final.pop(k))
        self._min_end, self._min_start = self._bounds()


def collapse(updates: list[Update]) -> list[Update]:
    """ksqlDB's record cache: one update per key and window per commit (here per micro-batch),
    the latest, in the order of each key's last change; its previous value is the one before
    the batch, so HAVING retractions stay right."""
    first: dict[Any, Update] = {}
    last: dict[Any, Update] = {}
    for u in updates:
        ident = _identity(u)
        first.setdefault(ident, u)
        last.pop(ident, None)
        last[ident] = u
    out = []
    for ident, u in last.items():
        f = first[ident]
        u.had, u.previous = f.had, f.previous
        out.append(u)
    return out


def _identity(u: Update) -> Any:
    """A hashable identity of an update's key and window (pickled when a key value is a list or
    a dict, which cannot be hashed)."""
    ident = (u.key, u.window)
    try:
        hash(ident)
    except TypeError:
        return pickle.dumps(ident)
    return ident


def ordered(rows: list[dict[str, Any]]) -> Iterable[dict[str, Any]]:
    """Offset order within each partition; across partitions, smallest head timestamp first."""
    by_partition: dict[Any, list[dict[str, Any]]] = {}
    for row in rows:
        by_partition.setdefault(row.get(t.ROWPARTITION), []).append(row)
    if len(by_partition) <= 1:
        return sorted(rows, key=lambda r: r.get(t.ROWOFFSET) or 0)
    queues = [sorted(part, key=lambda r: r.get(t.ROWOFFSET) or 0) for _, part in sorted(by_partition.items(),
                                                                                       key=lambda kv: kv[0] or 0)]
    return heapq.merge(*queues, key=lambda r: r.get(t.ROWTIME) or 0)
