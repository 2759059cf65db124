"""``python -m benchmarks.stateful_paths [--records N] [--json PATH]``: W3's SQL on streamsql's
two aggregation operators, over the same input, in the same SparkSession.

* **spark-operator** — what W3's SQL runs by default (``streamsql.aggregation.operator=auto``):
  the :class:`~streamsql.physical.steps.SparkAggregate` step, Spark's own ``groupBy(window,
  sensor).agg(sum, count)`` with a watermark of the grace period in append mode (EMIT FINAL),
  its state in the RocksDB state store (``physical/spark_aggregate.py``).
* **python-operator** — the same SQL with ``streamsql.aggregation.operator=python``: the
  aggregate step of ``physical/aggregate.py`` (pack → ``transformWithStateInPandas`` with the
  aggregation processor → unpack → projection).

Both write W3's table to their own output topic through the executors' Kafka sink, and each is
timed from the CREATE TABLE until every (sensor, window) of the readings is on its topic (the
sentinels close them, see ``benchmarks/workloads.py``). The Spark operator runs first (cold
JVM, cold workers), so warm-up favours the Python operator: the ratio understates the lead.
CPU seconds are the process tree's (driver, JVM, Python workers) over each phase.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.measure import OutputWatcher, TreeSampler, loadavg
from benchmarks.workloads import W3, W3_WINDOW_MS, w3_keys


def _produce(bootstrap: str, topic: str, output_topics: list[str], count: int) -> None:
    from confluent_kafka import Producer

    from streamsql.kafka.admin import KafkaAdmin
    from streamsql.kafka.clients import client_config, produce_waiting

    admin = KafkaAdmin(bootstrap)
    admin.create_topic(topic, W3.partitions)
    for output_topic in output_topics:  # the watchers read them from the start
        admin.create_topic(output_topic, W3.partitions)
    admin.close()
    producer = Producer(client_config(bootstrap, {"partitioner": "murmur2_random", "linger.ms": 5}))
    for key, value, ts in W3.generate(count, W3.seed):
        produce_waiting(producer, topic, {"value": value, "key": key, "timestamp": ts})
        producer.poll(0)
    producer.flush(120)


def _expected(count: int) -> int:
    return sum(1 for _ in _windows(count))


def _windows(count: int) -> set[tuple[bytes | None, int]]:
    reference = W3.reference()
    seen: set[tuple[bytes | None, int]] = set()
    for key, value, _ in W3.generate(count, W3.seed):
        if reference(key, value):
            seen.add((key, json.loads(value)["ts"] // W3_WINDOW_MS))
    return seen


def _cpu(sampler: TreeSampler) -> dict[str, float]:
    sampler._sample()
    return sampler.cpu_by_kind()


def _delta(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {k: round(v - before.get(k, 0.0), 1) for k, v in after.items() if v - before.get(k, 0.0) > 0.05}


def run_operator(engine: Any, operator: str, sql: str, bootstrap: str, output_topic: str, expected: int,
                 timeout: float) -> dict[str, Any]:
    """Run W3's CREATE TABLE with ``streamsql.aggregation.operator`` set to ``operator``; time it
    until every window of the readings is on ``output_topic``."""
    engine.execute(f"SET 'streamsql.aggregation.operator'='{operator}';")
    watcher = OutputWatcher(bootstrap, output_topic, expected).start()
    t0 = time.monotonic()
    engine.execute(sql)
    try:
        while not watcher.wait(0.5):
            if engine.failed_queries():
                raise RuntimeError(f"query failed: {engine.failed_queries()}")
            if time.monotonic() - t0 > timeout:
                raise TimeoutError(f"{operator} operator wrote {watcher.count} of {expected} windows after {timeout}s")
        if watcher.error is not None:
            raise watcher.error
        assert watcher.done_at is not None
        seconds = watcher.done_at - t0
    finally:
        watcher.stop()
    return {"seconds": seconds, "outputs": watcher.count}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.stateful_paths", description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--timeout", type=float, default=1200.0)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)

    from streamsql.kafka.broker import EmbeddedBroker
    from streamsql.runtime.config import EngineConfig
    from streamsql.runtime.engine import Engine
    from streamsql.runtime.spark import get_spark, stop_spark

    broker = EmbeddedBroker().start()
    rows: list[dict[str, Any]] = []
    try:
        topic, out_spark, out_python = "paths_w3_in", "paths_w3_out_spark", "paths_w3_out_python"
        start_load = loadavg()
        _produce(broker.bootstrap_servers, topic, [out_spark, out_python], args.records)
        expected = _expected(args.records)
        spark = get_spark()
        engine = Engine(EngineConfig(broker.bootstrap_servers, tempfile.mkdtemp(prefix="bench-paths-"), None, {}),
                        spark=spark)
        engine.start()
        sampler = TreeSampler(os.getpid())
        try:
            declare, ctas_spark = W3.sql(topic, out_spark).split("CREATE TABLE", 1)
            ctas_python = W3.sql(topic, out_python).split("CREATE TABLE", 1)[1].replace(
                "reading_sums", "reading_sums_python")
            engine.execute(declare)
            before = _cpu(sampler)
            spark_run = run_operator(engine, "auto", "CREATE TABLE" + ctas_spark, broker.bootstrap_servers,
                                     out_spark, expected, args.timeout)
            middle = _cpu(sampler)
            python_run = run_operator(engine, "python", "CREATE TABLE" + ctas_python, broker.bootstrap_servers,
                                      out_python, expected, args.timeout)
            after = _cpu(sampler)
        finally:
            engine.close()
            stop_spark()
        for name, res, cpu in (("spark-operator", spark_run, _delta(middle, before)),
                               ("python-operator", python_run, _delta(after, middle))):
            rows.append({"path": name, "records": args.records, "keys": w3_keys(args.records),
                         "seconds": round(res["seconds"], 2), "records_per_s": round(args.records / res["seconds"]),
                         "outputs": res["outputs"], "cpu_seconds": cpu,
                         "cpu_seconds_total": round(sum(cpu.values()), 1)})
    finally:
        broker.stop()
    print(f"W3 on Spark's two stateful paths: {args.records:,} records, {expected:,} windows, "
          f"{os.cpu_count()} cores, load {start_load} -> {loadavg()}")
    print(f"{'path':<16} {'seconds':>8} {'records/s':>10} {'CPU-s':>7}  CPU-s by process")
    for r in rows:
        print(f"{r['path']:<16} {r['seconds']:>8.1f} {r['records_per_s']:>10,} {r['cpu_seconds_total']:>7}  "
              f"{r['cpu_seconds']}")
    ratio = rows[0]["records_per_s"] / rows[1]["records_per_s"]
    print(f"spark-operator / python-operator = {ratio:.2f}x records/s")
    if args.json is not None:
        args.json.write_text(json.dumps({"rows": rows, "ratio_spark_over_python": round(ratio, 2),
                                         "load_start": start_load, "load_end": loadavg()}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
