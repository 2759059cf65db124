"""Pull-query visibility: how long after a micro-batch's commit its changes show in a pull query.

``python -m benchmarks.pull_visibility [--probes 50] [--json PATH]``. One embedded broker, one
engine (local Spark, engine defaults: the record cache on), one stream and one aggregation::

    CREATE STREAM vis_events (k VARCHAR KEY, amount BIGINT) WITH (KAFKA_TOPIC=..., PARTITIONS=2);
    CREATE TABLE vis_totals AS SELECT k, COUNT(*) AS n, SUM(amount) AS total FROM vis_events GROUP BY k;

Each probe produces one record for a key (T0, taken just before ``produce``; the broker's
acknowledgement gives its partition and offset), then runs ``SELECT * FROM vis_totals WHERE k =
'...'`` back to back until the row shows the new count and sum (T2: the end of that pull
query, what a client sees; the start of that query is kept too, since the store catches up with
the changelog topic at the start of each pull query, ``TableStore.follow``).

The commit (T1) is read from the query's checkpoint, which is what Spark's commit is: the
micro-batch that holds the record is the first ``offsets/<batchId>`` whose end offset for the
record's partition is past the record's offset, and its commit time is the modification time of
``commits/<batchId>`` (written once the batch's sink finished, the last step of a batch; Spark
writes it to a temporary file and renames it). As a cross-check, Spark's own progress for that
batch (``StreamingQuery.recentProgress``: ``timestamp``, the trigger's start, plus
``durationMs.triggerExecution``) gives the batch's end on Spark's clock.

The changelog records of a batch are written to Kafka by the executors during the batch, before
the commit, and a pull query reads whatever the changelog topic holds: commit→visible can be
negative (the change is visible before the batch committed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.measure import loadavg, percentile

STREAM, TABLE = "VIS_EVENTS", "VIS_TOTALS"


# --- reading the checkpoint and the progress -------------------------------------------------------

def batch_offsets(checkpoint: Path, batch_id: int) -> dict[int, int] | None:
    """The end offsets (partition → next offset) of micro-batch ``batch_id``'s single source, from
    ``offsets/<batchId>`` (line 1 the version, line 2 the batch metadata, then one line per
    source). None while the file is not there."""
    path = checkpoint / "offsets" / str(batch_id)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return None
    if len(lines) < 3 or not lines[2].strip().startswith("{"):
        return None
    return {int(p): int(o) for p, o in json.loads(lines[2]).items()}


def batch_holding(checkpoint: Path, partition: int, offset: int, from_batch: int = 0) -> int | None:
    """The first micro-batch (at or after ``from_batch``) whose end offset for ``partition`` is
    past ``offset``, i.e. the batch that read the record; None if no planned batch has it yet."""
    ids = sorted(int(p.name) for p in (checkpoint / "offsets").iterdir() if p.name.isdigit())
    for batch_id in ids:
        if batch_id < from_batch:
            continue
        ends = batch_offsets(checkpoint, batch_id)
        if ends is not None and ends.get(partition, 0) > offset:
            return batch_id
    return None


def commit_time(checkpoint: Path, batch_id: int) -> float | None:
    """When Spark committed ``batch_id`` (``commits/<batchId>``'s mtime, epoch seconds)."""
    try:
        return (checkpoint / "commits" / str(batch_id)).stat().st_mtime
    except FileNotFoundError:
        return None


def progress_end(progress: list[dict[str, Any]], batch_id: int) -> float | None:
    """Spark's own end of ``batch_id``: its progress ``timestamp`` plus ``triggerExecution``. The
    last progress with that id: an idle query reports progress every 10 s under the id of the
    batch it will run next (no rows), so earlier ones are idle reports from before the batch."""
    for p in reversed(progress):
        if p.get("batchId") == batch_id:
            start = datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp()
            return start + (p.get("durationMs") or {}).get("triggerExecution", 0) / 1000.0
    return None


def summary(values: list[float]) -> dict[str, float | None]:
    """p50 / p95 / max / min / mean of ``values`` (milliseconds), rounded."""
    if not values:
        return {"n": 0, "p50": None, "p95": None, "max": None, "min": None, "mean": None}
    return {"n": len(values), "p50": round(percentile(values, 50), 1), "p95": round(percentile(values, 95), 1),
            "max": round(max(values), 1), "min": round(min(values), 1), "mean": round(statistics.fmean(values), 1)}


def _progress_dicts(handle: Any) -> list[dict[str, Any]]:
    from benchmarks.child import _progress_dict

    return [_progress_dict(p) for p in handle.recentProgress]


# --- the run ---------------------------------------------------------------------------------------

def _pull(engine: Any, key: str) -> tuple[float, float, list[Any] | None]:
    """One pull query for ``key``: (start, end, the row or None), times from ``time.time()``."""
    start = time.time()
    rows: list[Any] = []
    for result in engine.execute(f"SELECT * FROM {TABLE} WHERE k = '{key}';"):
        if hasattr(result, "rows"):
            rows = list(result)
    end = time.time()
    return start, end, (list(rows[0]) if rows else None)


def _store_read(engine: Any, key: str) -> tuple[float, float, list[Any] | None]:
    """What a pull query reads first, without Spark: the store catches up with the changelog
    topic (``TableStore.follow``) and looks the key up (``--store-level``)."""
    from streamsql.runtime.materialized import Lookup

    start = time.time()
    store = engine.stores[TABLE]
    store.follow(engine.bootstrap_servers, engine.followed[TABLE])
    found = store.rows(Lookup(keys=[[key]]))
    end = time.time()
    if not found:
        return start, end, None
    value = found[0][3]
    return start, end, [key, value.get("N"), value.get("TOTAL")]


def run(args: argparse.Namespace) -> dict[str, Any]:
    from confluent_kafka import Producer

    from streamsql.kafka.clients import client_config
    from streamsql.kafka.broker import EmbeddedBroker
    from streamsql.runtime.config import EngineConfig
    from streamsql.runtime.engine import Engine

    load_start = loadavg()
    broker = EmbeddedBroker()
    broker.start()
    data_dir = tempfile.mkdtemp(prefix="pullvis-")
    engine = Engine(EngineConfig(broker.bootstrap_servers, data_dir, None, {}))
    engine.start()
    topic = "vis_events"
    probes: list[dict[str, Any]] = []
    try:
        engine.execute("SET 'auto.offset.reset'='earliest';")
        if args.cache is not None:
            engine.execute(f"SET 'ksql.streams.cache.max.bytes.buffering'='{args.cache}';")
        engine.execute(f"CREATE STREAM {STREAM} (k VARCHAR KEY, amount BIGINT) "
                       f"WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON', PARTITIONS={args.partitions});")
        status = engine.execute(f"CREATE TABLE {TABLE} AS SELECT k, COUNT(*) AS n, SUM(amount) AS total "
                                f"FROM {STREAM} GROUP BY k;")[0]
        query_id = status.query_id
        handle = engine.queries[query_id].handle
        checkpoint = engine.queries[query_id].checkpoint
        producer = Producer(client_config(broker.bootstrap_servers, {"linger.ms": 0, "acks": "all"}))
        keys = [f"key{i}" for i in range(args.keys)]
        counts = {k: 0 for k in keys}
        sums = {k: 0 for k in keys}

        def send(key: str, amount: int) -> tuple[float, float, int, int]:
            """Produce one record and wait for its acknowledgement: (T0, ack time, partition, offset)."""
            done: dict[str, Any] = {}

            def on_delivery(err: Any, msg: Any) -> None:
                done.update(err=err, partition=msg.partition(), offset=msg.offset(), at=time.time())

            t0 = time.time()
            producer.produce(topic, key=key.encode(), value=json.dumps({"AMOUNT": amount}).encode(),
                             on_delivery=on_delivery)
            producer.flush(30)
            if done.get("err") is not None or "offset" not in done:
                raise RuntimeError(f"produce failed: {done.get('err')}")
            counts[key] += 1
            sums[key] += amount
            return t0, done["at"], done["partition"], done["offset"]

        # warm-up: every key exists, the first batches (Python workers, planning) are out of the way
        for i in range(args.warmup):
            send(keys[i % len(keys)], i)
        engine.wait_until_idle()
        for k in keys:
            _pull(engine, k)
        print(f"warm-up done ({args.warmup} records); {args.probes} probes, load {loadavg()}", file=sys.stderr)

        rng = random.Random(1)
        last_batch = 0
        for i in range(args.probes):
            time.sleep(args.gap * (0.5 + rng.random()))  # idle between probes, decorrelated from triggers
            key = keys[i % len(keys)]
            amount = 1000 + i
            t0, acked, partition, offset = send(key, amount)
            want = (counts[key], sums[key])
            polls = 0
            deadline = t0 + args.timeout
            prev_start = t0
            while True:
                p_start, p_end, row = (_store_read if args.store_level else _pull)(engine, key)
                polls += 1
                if row is not None and (row[1], row[2]) == want:
                    break
                if time.time() > deadline:
                    raise TimeoutError(f"probe {i}: {key} not visible with {want} after {args.timeout}s (last {row})")
                prev_start = p_start
                if args.poll_interval:
                    time.sleep(args.poll_interval)
            batch_id = None
            t1 = None
            while time.time() < deadline:  # the commit may come after the change is visible
                if batch_id is None:
                    batch_id = batch_holding(checkpoint, partition, offset, last_batch)
                t1 = commit_time(checkpoint, batch_id) if batch_id is not None else None
                if t1 is not None:
                    break
                time.sleep(0.005)
            if batch_id is None or t1 is None:
                raise TimeoutError(f"probe {i}: no committed batch holds {partition}:{offset}")
            last_batch = batch_id
            probes.append({"probe": i, "key": key, "partition": partition, "offset": offset, "batch_id": batch_id,
                           "t0": t0, "acked": acked, "committed": t1, "visible": p_end, "visible_query_start": p_start,
                           "previous_query_start": prev_start, "polls": polls})
        time.sleep(1.0)  # the last batch's progress is posted after its commit
        progress = _progress_dicts(handle)
        by_batch = {d.get("batchId"): d for d in progress}
        for p in probes:
            p["progress_end"] = progress_end(progress, p["batch_id"])
            p["duration_ms"] = (by_batch.get(p["batch_id"]) or {}).get("durationMs")  # Spark's breakdown
    finally:
        engine.close()
        broker.stop()
    ms = lambda a, b: [(p[b] - p[a]) * 1000.0 for p in probes]  # noqa: E731
    with_progress = [p for p in probes if p.get("progress_end") is not None]
    rows = {
        "produce→ack": summary(ms("t0", "acked")),
        "produce→commit": summary(ms("t0", "committed")),
        "commit→visible": summary(ms("committed", "visible")),
        "produce→visible": summary(ms("t0", "visible")),
        "commit→start of the pull query that saw it": summary(ms("committed", "visible_query_start")),
        "pull query duration (the one that saw it)": summary(ms("visible_query_start", "visible")),
        "commit file vs progress end (commit − progress)": summary(
            [(p["committed"] - p["progress_end"]) * 1000.0 for p in with_progress]),
    }
    phases: dict[str, list[float]] = {}
    for p in probes:
        for name, value in (p.get("duration_ms") or {}).items():
            phases.setdefault(name, []).append(float(value))
    return {
        "command": " ".join(["python -m benchmarks.pull_visibility", *sys.argv[1:]]),
        "date": datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "loadavg_start": load_start, "loadavg_end": loadavg(),
        "settings": {"probes": args.probes, "keys": args.keys, "partitions": args.partitions, "warmup": args.warmup,
                     "gap_s": args.gap, "poll_interval_s": args.poll_interval,
                     "visible_via": "store (follow + key lookup)" if args.store_level else "SQL pull query",
                     "record_cache": "engine default (10 MB)" if args.cache is None else args.cache},
        "probes_visible_before_commit": sum(1 for p in probes if p["visible"] < p["committed"]),
        "polls_per_probe": summary([float(p["polls"]) for p in probes]),
        "distributions_ms": rows,
        "batch_duration_ms": {name: summary(values) for name, values in sorted(phases.items())},
        "probes": probes,
    }


def _cells(s: dict[str, Any]) -> str:
    return " ".join(f"{'-' if s[c] is None else format(s[c], ',.1f'):>8}" for c in ("p50", "p95", "max", "min", "mean"))


def print_table(result: dict[str, Any]) -> None:
    print(f"{result['settings']['probes']} probes, load average {result['loadavg_start']} → {result['loadavg_end']} "
          f"on {result['machine']['cpus']} cores")
    print(f"{'interval (ms)':48} {'p50':>8} {'p95':>8} {'max':>8} {'min':>8} {'mean':>8}")
    for name, s in result["distributions_ms"].items():
        print(f"{name:48} {_cells(s)}")
    phases = result.get("batch_duration_ms") or {}
    if phases:
        print("the probes' micro-batches, Spark's durationMs (ms):")
        for name, s in phases.items():
            print(f"  {name:46} {_cells(s)}")
    print(f"visible before the batch's commit: {result['probes_visible_before_commit']} of "
          f"{len(result['probes'])}; pull queries per probe: p50 {result['polls_per_probe']['p50']}, "
          f"max {result['polls_per_probe']['max']}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.pull_visibility", description=__doc__.split("\n\n")[0])
    p.add_argument("--probes", type=int, default=50)
    p.add_argument("--keys", type=int, default=5, help="keys the probes cycle over (each exists after the warm-up)")
    p.add_argument("--partitions", type=int, default=2)
    p.add_argument("--warmup", type=int, default=20, help="records produced (and drained) before the probes")
    p.add_argument("--gap", type=float, default=1.0, help="mean idle seconds between probes (uniform 0.5-1.5x)")
    p.add_argument("--poll-interval", type=float, default=0.0, help="sleep between pull queries of one probe")
    p.add_argument("--cache", help="ksql.streams.cache.max.bytes.buffering (default: the engine's, 10 MB)")
    p.add_argument("--timeout", type=float, default=120.0, help="per probe, seconds")
    p.add_argument("--store-level", action="store_true",
                   help="poll the table's store directly (follow the changelog + key lookup) instead of a SQL "
                        "pull query: when the change is readable, without the pull query's Spark job")
    p.add_argument("--json", type=Path, help="write the result (settings, distributions, every probe) here")
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
