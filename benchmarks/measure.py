"""Process-tree sampling (peak RSS, CPU seconds) and output-topic watching."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any


class TreeSampler:
    """Samples a process and all its descendants every ``interval_s``: the peak of the summed RSS
    (driver Python + JVM + Python workers for streamsql) and the CPU seconds of every process
    seen. Summed RSS counts shared pages once per process, so it is an upper bound; every
    ``pss_every``-th sample also sums PSS (proportional set size: a page shared by N processes
    counts 1/N in each), the tree's real share of memory — forked Python workers share most of
    their pages with the daemon they were forked from."""

    def __init__(self, pid: int, interval_s: float = 0.2, extra_pids: dict[str, int] | None = None,
                 pss_every: int = 5) -> None:
        import psutil

        self._psutil = psutil
        self.root = psutil.Process(pid)
        self.interval_s = interval_s
        self.peak_rss = 0
        self.peak_pss = 0
        #: the peak PSS sample split by process (:func:`_role`): which process holds the memory
        self.peak_pss_by_process: dict[str, int] = {}
        self._pss_every = pss_every
        self._samples = 0
        self.cpu: dict[int, float] = {}
        self.names: dict[int, str] = {}
        self._extra = {name: psutil.Process(p) for name, p in (extra_pids or {}).items()}
        self._extra_start = {name: self._cpu_of(p) for name, p in self._extra.items()}
        self.extra_cpu: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tree-sampler", daemon=True)

    @staticmethod
    def _cpu_of(proc: Any) -> float:
        try:
            t = proc.cpu_times()
            return float(t.user + t.system)
        except Exception:  # noqa: BLE001 - gone
            return 0.0

    def start(self) -> "TreeSampler":
        self._thread.start()
        return self

    def _sample(self) -> None:
        psutil = self._psutil
        try:
            procs = [self.root, *self.root.children(recursive=True)]
        except psutil.Error:
            return
        total = 0
        pss: int | None = 0 if self._samples % self._pss_every == 0 else None
        by_role: dict[str, int] = {}
        self._samples += 1
        for p in procs:
            if pss is not None:
                mine = pss_bytes(p.pid)
                pss += mine
                role = _role(p)
                by_role[role] = by_role.get(role, 0) + mine
            try:
                with p.oneshot():
                    total += p.memory_info().rss
                    t = p.cpu_times()
                    self.cpu[p.pid] = float(t.user + t.system)
                    if self.names.get(p.pid) not in FINAL_LABELS:  # bash exec()s java: label again
                        self.names[p.pid] = _label(p)
            except psutil.Error:
                continue
        self.peak_rss = max(self.peak_rss, total)
        if pss is not None and pss > self.peak_pss:
            self.peak_pss, self.peak_pss_by_process = pss, by_role

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval_s)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for name, p in self._extra.items():
            self.extra_cpu[name] = self._cpu_of(p) - self._extra_start[name]

    def cpu_by_kind(self, since: dict[int, float] | None = None) -> dict[str, float]:
        """CPU seconds by process kind (as last sampled: a process's final second may be missed);
        with ``since`` (:func:`tree_cpu` of a moment), only what each process spent after it."""
        out: dict[str, float] = {}
        for pid, secs in self.cpu.items():
            kind = self.names.get(pid, "?")
            spent = secs - (since or {}).get(pid, 0.0)
            out[kind] = round(out.get(kind, 0.0) + spent, 2)
        for name, secs in self.extra_cpu.items():
            out[name] = round(secs, 2)
        return out


def tree_cpu(pid: int) -> dict[int, float]:
    """CPU seconds so far of a process and its descendants, by pid: a baseline for
    :meth:`TreeSampler.cpu_by_kind` (the child takes it when its query starts, so a query's CPU
    is told apart from its session's start-up and warm-up)."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return {}
    return {p.pid: TreeSampler._cpu_of(p) for p in procs}


def pss_bytes(pid: int) -> int:
    """A process's PSS from ``/proc/<pid>/smaps_rollup`` (one summed record: cheap even for a
    JVM's thousands of mappings, unlike ``smaps``); 0 where unreadable or gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


FINAL_LABELS = {"jvm", "python-worker", "driver-python"}


def _label(p: Any) -> str:
    try:
        name = p.name()
        cmd = p.cmdline()
    except Exception:  # noqa: BLE001
        return "?"
    exe = os.path.basename(cmd[0]) if cmd else name
    text = " ".join(cmd)
    if name == "java" or exe == "java":
        return "jvm"
    if exe.startswith("python") and "benchmarks.child" in text:
        return "driver-python"
    if exe.startswith("python") and "pyspark" in text:
        return "python-worker"  # Spark's Python daemon, workers and data source runners
    return name


def _role(p: Any) -> str:
    """A finer label than :func:`_label` for the memory split: a Python process by the module
    it runs (``-m x``; a forked worker's title names it too), counted as ``python:<module>``."""
    try:
        cmd = p.cmdline()
    except Exception:  # noqa: BLE001
        return "?"
    if "-m" in cmd[:-1] and os.path.basename(cmd[0]).startswith("python"):
        return "python:" + cmd[cmd.index("-m") + 1]
    return _label(p)


_MISSING = object()


class FinalState:
    """Completion by final state: ``expected`` maps each output key to its final value (the
    workload's reference over the input); ``normalise`` turns an output record (Kafka key and
    value bytes) into ``(output key, value)`` in the same form. Fed the latest record per Kafka key
    as records arrive, it is ``done`` when every expected key's latest record carries the
    expected value. A key's records all sit in one partition, in order, so its latest record is
    the one read last; a later record that differs (a tombstone, a wrong value) makes the key
    pending again."""

    def __init__(self, expected: dict[str, Any],
                 normalise: Callable[[bytes | None, bytes | None], tuple[str, Any]]) -> None:
        self.expected = expected
        self.normalise = normalise
        self.pending: set[str] = set(expected)
        #: output keys that no expected key matches (a system writing something else)
        self.unexpected: set[str] = set()
        #: the last (key, value written, value expected) that did not match, for diagnosis
        self.last_mismatch: tuple[str, Any, Any] | None = None

    def update(self, records: Iterable[tuple[bytes | None, bytes | None]]) -> None:
        expected, pending = self.expected, self.pending
        for raw_key, raw_value in records:
            key, value = self.normalise(raw_key, raw_value)
            want = expected.get(key, _MISSING)
            if want is _MISSING:
                self.unexpected.add(key)
            elif value == want:
                pending.discard(key)
            else:
                pending.add(key)
                self.last_mismatch = (key, value, want)

    @property
    def done(self) -> bool:
        return not self.pending

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"final_keys": len(self.expected),
                               "final_keys_at_final_value": len(self.expected) - len(self.pending),
                               "unexpected_keys": len(self.unexpected)}
        if self.pending and self.last_mismatch is not None:
            out["last_mismatch"] = repr(self.last_mismatch)[:500]
        if self.unexpected:
            out["unexpected_key_examples"] = sorted(self.unexpected)[:3]
        return out


class OutputWatcher:
    """Counts the records of ``topic`` (all partitions, from offset 0) in a thread; ``done`` is
    set, and ``done_at`` (``time.monotonic()``) recorded, once ``expected`` records are there
    and, with ``final``, every expected key holds its final value (see :class:`FinalState`; the
    latest record per Kafka key of each consumed batch is decoded, not every record). With
    ``sent`` (key → send time, ``time.time()``) it also records per-record latency."""

    def __init__(self, bootstrap: str, topic: str, expected: int | None,
                 sent: dict[bytes, float] | None = None, on_done: Callable[[], Any] | None = None,
                 final: FinalState | None = None) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.expected = expected
        self.sent = sent
        self.on_done = on_done
        self.final = final
        self.count = 0
        self.latencies_ms: list[tuple[float, float]] = []  # (send time, latency ms)
        self.done = threading.Event()
        self.done_at: float | None = None
        #: records read when done was set (what the system had written by then)
        self.done_count: int | None = None
        self.first_at: float | None = None
        self.error: BaseException | None = None
        #: after 10 s without a record: each partition's (position, low, high watermark) and the
        #: last error the consumer reported — where a watcher that stopped receiving stands
        self.stalled_at: dict[int, tuple[int, int, int]] | None = None
        self.last_error: str | None = None
        #: offsets the watching consumer jumped over without a record, (partition, from, to)
        self.skipped: list[tuple[int, int, int]] = []
        #: set when a stalled watcher's recount found records it never received (see _recount)
        self.missed: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"watch-{topic}", daemon=True)

    def start(self) -> "OutputWatcher":
        self._thread.start()
        return self

    def complete(self) -> bool:
        """Whether every completion condition given holds (never with none given)."""
        if self.expected is None and self.final is None:
            return False
        return (self.expected is None or self.count >= self.expected) and (self.final is None or self.final.done)

    def progress(self) -> str:
        """What the output holds, for a timeout message."""
        text = f"{self.count:,} records" + (f" of {self.expected:,} expected" if self.expected is not None else "")
        if self.stalled_at is not None:
            text += f"; the watcher's (position, low, high) by partition: {self.stalled_at}"
        if self.last_error is not None:
            text += f"; its last consumer error: {self.last_error}"
        if self.final is not None:
            s = self.final.summary()
            text += (f"; {s['final_keys_at_final_value']:,} of {s['final_keys']:,} keys at their final value"
                     f", {s['unexpected_keys']:,} unexpected keys")
            if "last_mismatch" in s:
                text += f"; last mismatch (key, written, expected): {s['last_mismatch']}"
        return text

    def _run(self) -> None:
        from confluent_kafka import Consumer, TopicPartition

        from streamsql.kafka.admin import topic_partitions
        from streamsql.kafka.clients import consumer_config

        try:
            consumer = Consumer(consumer_config(self.bootstrap, {"group.id": "bench-watch", "fetch.wait.max.ms": 10,
                                                                 "enable.partition.eof": False}))
            parts = topic_partitions(consumer, self.topic)
            consumer.assign([TopicPartition(self.topic, p, 0) for p in parts])
            latest: dict[bytes | None, bytes | None] | None = {} if self.final is not None else None
            received_at = time.monotonic()
            next_offset: dict[int, int] = {}
            while not self._stop.is_set():
                msgs = consumer.consume(5000, 0.05)
                now = time.time()
                if msgs:
                    received_at = time.monotonic()
                elif not self.done.is_set() and time.monotonic() - received_at > 10 and self.stalled_at is None:
                    self.stalled_at = {tp.partition: (tp.offset, *consumer.get_watermark_offsets(tp, 5))
                                       for tp in consumer.position(consumer.assignment())}
                    if self._recount(parts) and not self.done.is_set():
                        self._finish(received_at)
                for m in msgs:
                    if m.error() is not None:
                        self.last_error = str(m.error())
                        continue
                    offset, part = m.offset(), m.partition()
                    if offset is not None and part is not None:
                        expected_next = next_offset.get(part, 0)
                        if offset > expected_next:
                            self.skipped.append((part, expected_next, offset))
                        next_offset[part] = offset + 1
                    self.count += 1
                    if self.first_at is None:
                        self.first_at = time.monotonic()
                    if latest is not None:
                        latest[m.key()] = m.value()
                    if self.sent is not None:
                        sent = self.sent.get(m.key())
                        if sent is not None:
                            self.latencies_ms.append((sent, (now - sent) * 1000.0))
                if latest:
                    self.final.update(latest.items())  # type: ignore[union-attr]
                    latest.clear()
                if not self.done.is_set() and self.complete():
                    self._finish(time.monotonic())
            consumer.close()
        except BaseException as e:  # noqa: BLE001 - reported by the caller
            self.error = e
            self.done.set()

    def _finish(self, at: float) -> None:
        self.done_at = at
        self.done_count = self.count
        self.done.set()
        if self.on_done is not None:
            self.on_done()

    def _recount(self, parts: list[int]) -> bool:
        """Read the whole topic again with a new consumer and take its count (and final values)
        when that completes the expectation. The watching consumer of a run stalled now and then
        (3 of ~30 streamsql runs on 2026-11-28) with its position at the topic's end and
        10-110 records of it never received — tansu's answers to a consumer reading at the
        tail while the topic is written. The system under test had written everything, so
        the run ends at the watching consumer's last receipt; ``missed`` and ``skipped`` say
        what it lost. Returns whether the recount completed the expectation."""
        from confluent_kafka import Consumer, TopicPartition

        from streamsql.kafka.clients import consumer_config

        consumer = Consumer(consumer_config(self.bootstrap, {"group.id": "bench-recount"}))
        try:
            consumer.assign([TopicPartition(self.topic, p, 0) for p in parts])
            total, deadline = 0, time.monotonic() + 60
            ended: set[int | None] = set()
            while len(ended) < len(parts) and time.monotonic() < deadline:
                for m in consumer.consume(10000, 0.5):
                    err = m.error()
                    if err is not None:
                        if err.code() == -191:  # _PARTITION_EOF
                            ended.add(m.partition())
                        continue
                    total += 1
                    if self.final is not None:
                        self.final.update([(m.key(), m.value())])
        finally:
            consumer.close()
        if total <= self.count:
            return False
        self.missed, self.count = total - self.count, total
        return self.complete()

    def wait(self, timeout_s: float) -> bool:
        return self.done.wait(timeout_s)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    k = min(len(s) - 1, max(0, int(round(q / 100.0 * (len(s) - 1)))))
    return s[k]
