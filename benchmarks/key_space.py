"""The driver's memory across an aggregation over N distinct keys (issue 14: it must stay flat).

``python -m benchmarks.key_space [--keys 5000000] [--json PATH]``. One embedded broker, one engine
(local Spark, engine defaults: 100k records per micro-batch, the record cache on), and::

    CREATE STREAM ks_events (k VARCHAR KEY, v INT) WITH (KAFKA_TOPIC=..., PARTITIONS=2);
    CREATE TABLE ks_counts AS SELECT k, COUNT(*) AS n FROM ks_events GROUP BY k;

The N input records (each a distinct key) are produced first, by a separate process (so the
producer's buffers are not in the measured process), then the CTAS starts with
``auto.offset.reset=earliest``. Every ``--interval`` seconds a sampler thread records the RSS of

* the driver: this process, the one running the engine (``psutil.Process(os.getpid())``);
* the JVM (Spark's driver and, in local mode, its executors);
* Spark's Python workers (the daemon, its workers, the streaming source's runner), summed;
* the broker (tansu, in memory), for context;

and the changelog topic's record count (the sum of its partitions' end offsets, ``EndOffsets``)
and the input read so far (the query's last progress). The run ends when the changelog holds N
records (one per key: with distinct keys the record cache changes nothing). Nothing queries the
table while it runs (a pull query would make the driver's store follow the changelog).

The report gives the driver's RSS at the start (just before the CTAS), when the changelog held
10%, 50% and 100% of the keys, and its maximum; a flat driver line is the expected result.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.measure import loadavg

STREAM, TABLE = "KS_EVENTS", "KS_COUNTS"
MB = 2**20


def produce_keys(bootstrap: str, topic: str, count: int, start: int = 0) -> float:
    """Write ``count`` records with distinct keys ``k000000000``… (value ``{"V":1}``); returns
    the seconds taken. Batches of records per request (linger 50 ms, 1 MB batches)."""
    from confluent_kafka import Producer

    from streamsql.kafka.clients import client_config, produce_waiting

    producer = Producer(client_config(bootstrap, {"linger.ms": 50, "batch.size": 1_000_000,
                                                  "queue.buffering.max.messages": 1_000_000,
                                                  "queue.buffering.max.kbytes": 1_048_576,
                                                  "partitioner": "murmur2_random", "acks": "1"}))
    value = b'{"V":1}'
    errors: list[Any] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    t0 = time.monotonic()
    for i in range(start, start + count):
        key = b"k%09d" % i
        produce_waiting(producer, topic, {"key": key, "value": value, "on_delivery": on_delivery})
        if i % 10_000 == 0:
            producer.poll(0)
    left = producer.flush(120)
    if left or errors:
        raise RuntimeError(f"{left} records not acknowledged, {len(errors)} errors (first: {errors[:1]})")
    return time.monotonic() - t0


def _produce_child(bootstrap: str, topic: str, count: int, start: int, out: Any) -> None:
    out.put(produce_keys(bootstrap, topic, count, start))


def produce_in_processes(bootstrap: str, topic: str, count: int, processes: int) -> float:
    """``produce_keys`` split over ``processes`` spawned processes (none of it in this process)."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    share = -(-count // processes)
    procs = []
    t0 = time.monotonic()
    for n in range(processes):
        first = n * share
        todo = min(share, count - first)
        if todo <= 0:
            break
        proc = ctx.Process(target=_produce_child, args=(bootstrap, topic, todo, first, out))
        proc.start()
        procs.append(proc)
    for proc in procs:
        proc.join()
        if proc.exitcode != 0:
            raise RuntimeError(f"a producer process exited with {proc.exitcode}")
    return time.monotonic() - t0


# --- sampling --------------------------------------------------------------------------------------

def kind_of(proc: Any, root_pid: int, broker_pid: int | None) -> str:
    """driver | jvm | python-worker | broker | other, for one process of this tree."""
    if proc.pid == root_pid:
        return "driver"
    if broker_pid is not None and proc.pid == broker_pid:
        return "broker"
    try:
        name, cmd = proc.name(), proc.cmdline()
    except Exception:  # noqa: BLE001 - gone
        return "other"
    exe = os.path.basename(cmd[0]) if cmd else name
    if name == "java" or exe == "java":
        return "jvm"
    if exe.startswith("python"):
        return "python-worker"  # Spark's daemon, its workers, the streaming source runner
    return "other"


class MemorySampler:
    """Every ``interval_s``: RSS by process kind (MB), plus whatever ``extra()`` returns."""

    def __init__(self, interval_s: float, broker_pid: int | None, extra: Any) -> None:
        import psutil

        self._psutil = psutil
        self.root = psutil.Process(os.getpid())
        self.broker_pid = broker_pid
        self.interval_s = interval_s
        self.extra = extra
        self.samples: list[dict[str, Any]] = []
        self.t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memory-sampler", daemon=True)

    def sample(self) -> dict[str, Any]:
        psutil = self._psutil
        rss: dict[str, float] = {"driver": 0.0, "jvm": 0.0, "python-worker": 0.0, "broker": 0.0, "other": 0.0}
        workers = 0
        for p in [self.root, *self.root.children(recursive=True)]:
            try:
                kind = kind_of(p, self.root.pid, self.broker_pid)
                rss[kind] += p.memory_info().rss / MB
                workers += kind == "python-worker"
            except psutil.Error:
                continue
        row: dict[str, Any] = {"t": round(time.monotonic() - self.t0, 2), "load1": round(os.getloadavg()[0], 2),
                               **{f"{k}_mb": round(v, 1) for k, v in rss.items()}, "python_workers": workers}
        try:
            row.update(self.extra())
        except Exception as e:  # noqa: BLE001 - a sample without the counts rather than no sample
            row["extra_error"] = str(e)[:200]
        self.samples.append(row)
        return row

    def start(self) -> MemorySampler:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval_s)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


def at_fraction(samples: list[dict[str, Any]], keys: int, fraction: float,
                field: str = "driver_mb") -> dict[str, Any] | None:
    """The first sample whose changelog count reached ``fraction`` of ``keys``: (t, count, field)."""
    for s in samples:
        if (s.get("changelog_records") or 0) >= fraction * keys:
            return {"t": s["t"], "changelog_records": s["changelog_records"], field: s[field]}
    return None


def milestones(samples: list[dict[str, Any]], keys: int) -> dict[str, Any]:
    """RSS (MB) per process kind at the start, at 10/50/100% of the keys and the maximum."""
    out: dict[str, Any] = {}
    if not samples:
        return out
    for kind in ("driver_mb", "jvm_mb", "python-worker_mb", "broker_mb"):
        row: dict[str, Any] = {"start": samples[0][kind]}
        for label, f in (("10%", 0.1), ("50%", 0.5), ("100%", 1.0)):
            hit = at_fraction(samples, keys, f, kind)
            row[label] = hit[kind] if hit else None
        row["max"] = max(s[kind] for s in samples)
        out[kind[:-3]] = row
    for label, f in (("10%", 0.1), ("50%", 0.5), ("100%", 1.0)):
        hit = at_fraction(samples, keys, f)
        out.setdefault("t_s", {})[label] = hit["t"] if hit else None
    return out


# --- the run ---------------------------------------------------------------------------------------

def run(args: argparse.Namespace) -> dict[str, Any]:
    import psutil

    from benchmarks.child import _progress_dict
    from streamsql.kafka.admin import EndOffsets
    from streamsql.kafka.broker import EmbeddedBroker
    from streamsql.runtime.config import EngineConfig
    from streamsql.runtime.engine import Engine

    load_start = loadavg()
    me = psutil.Process()
    rss_at_launch = me.memory_info().rss / MB
    broker = EmbeddedBroker()
    broker.start()
    broker_pid = broker._proc.pid if broker._proc is not None else None  # noqa: SLF001 - its process, for RSS
    data_dir = tempfile.mkdtemp(prefix="keyspace-")
    engine = Engine(EngineConfig(broker.bootstrap_servers, data_dir, None, {}))
    topic = "ks_events"
    result: dict[str, Any] = {}
    sampler: MemorySampler | None = None
    try:
        engine.admin.create_topic(topic, args.partitions)
        t = time.monotonic()
        produce_s = produce_in_processes(broker.bootstrap_servers, topic, args.keys, args.producers)
        result["produce"] = {"seconds": round(time.monotonic() - t, 1), "inner_seconds": round(produce_s, 1),
                             "records_per_s": round(args.keys / (time.monotonic() - t))}
        print(f"produced {args.keys:,} distinct keys in {result['produce']['seconds']}s "
              f"({result['produce']['records_per_s']:,}/s); load {loadavg()}", file=sys.stderr)
        t = time.monotonic()
        engine.start()
        engine.execute("SET 'auto.offset.reset'='earliest';")
        engine.execute(f"CREATE STREAM {STREAM} (k VARCHAR KEY, v INT) "
                       f"WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON', PARTITIONS={args.partitions});")
        engine.spark  # noqa: B018 - Spark's session (the JVM) starts now, not inside the CTAS
        result["engine_start_s"] = round(time.monotonic() - t, 1)
        changelog = EndOffsets(broker.bootstrap_servers, TABLE)  # the CTAS's topic (default: its name)
        query: dict[str, Any] = {}

        def counts() -> dict[str, Any]:
            out: dict[str, Any] = {}
            if "topic_ready" in query:
                out["changelog_records"] = sum(changelog.ends().values())
            handle = query.get("handle")
            if handle is not None:
                p = handle.lastProgress
                if p:
                    d = _progress_dict(p)
                    out["batch_id"] = d.get("batchId")
                    src = (d.get("sources") or [{}])[0]
                    end = src.get("endOffset")
                    end = json.loads(end) if isinstance(end, str) else end
                    out["input_read"] = sum(int(v) for v in (end or {}).values())
                    for op in d.get("stateOperators") or []:
                        out["state_rows"] = out.get("state_rows", 0) + int(op.get("numRowsTotal") or 0)
            return out

        sampler = MemorySampler(args.interval, broker_pid, counts)
        first = sampler.sample()  # the start: engine and Spark up, before the aggregation
        print(f"start: {first}", file=sys.stderr)
        sampler.start()
        t0 = time.monotonic()
        status = engine.execute(f"CREATE TABLE {TABLE} AS SELECT k, COUNT(*) AS n FROM {STREAM} GROUP BY k;")[0]
        result["ctas_s"] = round(time.monotonic() - t0, 1)
        query["topic_ready"] = True
        running = engine.queries[status.query_id]
        query["handle"] = running.handle
        deadline = t0 + args.timeout
        last_print = 0.0
        while True:
            time.sleep(1.0)
            s = sampler.samples[-1]
            done = (s.get("changelog_records") or 0) >= args.keys
            if time.monotonic() - last_print >= 30 or done:
                last_print = time.monotonic()
                print(f"t={s['t']:7.1f}s changelog {s.get('changelog_records', 0):>10,} "
                      f"input {s.get('input_read', 0):>10,} driver {s['driver_mb']:7.1f} MB "
                      f"jvm {s['jvm_mb']:7.1f} MB workers {s['python-worker_mb']:7.1f} MB "
                      f"({s['python_workers']}) broker {s['broker_mb']:7.1f} MB load {s['load1']}", file=sys.stderr)
            if done:
                break
            failed = engine.failed_queries()
            if failed:
                raise RuntimeError(f"query failed: {failed}")
            if time.monotonic() > deadline:
                result["timed_out"] = True
                print(f"timeout after {args.timeout}s", file=sys.stderr)
                break
        result["seconds"] = round(time.monotonic() - t0, 1)
        sampler.sample()
        sampler.stop()
        progress = [_progress_dict(p) for p in running.handle.recentProgress]
        batches = [p for p in progress if (p.get("numInputRows") or 0) > 0]
        if batches:
            result["batches"] = [{"batchId": p["batchId"], "rows": p["numInputRows"],
                                  "trigger_ms": (p.get("durationMs") or {}).get("triggerExecution")}
                                 for p in batches]
        changelog.close()
    finally:
        if sampler is not None:
            sampler.stop()
        engine.close()
        broker.stop()
    samples = sampler.samples if sampler is not None else []
    done_records = samples[-1].get("changelog_records", 0) if samples else 0
    result.update({
        "command": " ".join(["python -m benchmarks.key_space", *sys.argv[1:]]),
        "date": datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "memory_gb": round(psutil.virtual_memory().total / 2**30, 1)},
        "loadavg_start": load_start, "loadavg_end": loadavg(),
        "settings": {"keys": args.keys, "partitions": args.partitions, "interval_s": args.interval,
                     "producers": args.producers,
                     "engine": "defaults (local[2], 100k records per batch, record cache on)"},
        "driver_rss_at_launch_mb": round(rss_at_launch, 1),
        "changelog_records": done_records,
        "keys_per_s": round(done_records / result["seconds"]) if result.get("seconds") else None,
        "rss_mb": milestones(samples, args.keys),
        "samples": samples,
    })
    return result


def print_table(result: dict[str, Any]) -> None:
    keys = result["settings"]["keys"]
    print(f"{keys:,} distinct keys: changelog held {result['changelog_records']:,} after {result.get('seconds')}s "
          f"({result.get('keys_per_s') or 0:,} keys/s); load average {result['loadavg_start']} → "
          f"{result['loadavg_end']} on {result['machine']['cpus']} cores")
    rss = result["rss_mb"]
    t = rss.get("t_s", {})
    print(f"{'RSS (MB)':16} {'start':>9} {'10%':>9} {'50%':>9} {'100%':>9} {'max':>9}")
    print(f"{'  at t (s)':16} {0.0:>9.1f} " + " ".join(f"{'-' if t.get(c) is None else format(t[c], '.1f'):>9}"
                                                   for c in ("10%", "50%", "100%")))
    for kind in ("driver", "jvm", "python-worker", "broker"):
        row = rss.get(kind, {})
        print(f"{kind:16} " + " ".join(f"{'-' if row.get(c) is None else format(row[c], ',.1f'):>9}"
                                       for c in ("start", "10%", "50%", "100%", "max")))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.key_space", description=__doc__.split("\n\n")[0])
    p.add_argument("--keys", type=int, default=5_000_000)
    p.add_argument("--partitions", type=int, default=2)
    p.add_argument("--producers", type=int, default=2, help="producer processes for the input")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between RSS samples")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds for the aggregation")
    p.add_argument("--json", type=Path, help="write the result (milestones and every sample) here")
    args = p.parse_args(argv)
    result = run(args)
    print_table(result)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
