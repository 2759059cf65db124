"""``python -m benchmarks.stateful_paths [--records N] [--json PATH]``: W3's aggregation on Spark's
two stateful paths, over the same input, in the same SparkSession.

* **jvm-groupby** — Spark's own stateful operator: ``groupBy(window(ts, 60 s), sensor)
  .agg(sum, count)`` with a watermark of the grace period (10 s) in append mode (EMIT FINAL),
  its state in the RocksDB state store, over the same Kafka scan and JSON decoding as streamsql's
  query (:class:`~streamsql.physical.builder.SparkBuilder` builds it), into Spark's ``noop``
  sink (W3 writes 17 rows per 1,000 inputs, so the Kafka sink's share is small).
* **python-operator** — what streamsql runs for W3's SQL: the aggregate step
  (``physical/aggregate.py``: pack → ``transformWithStateInPandas`` with the aggregation
  processor → unpack → projection) and the executors' Kafka sink.

Both are timed from the start of the query until every (sensor, window) of the readings has
been emitted (the sentinels close them, see ``benchmarks/workloads.py``): the JVM path by its
sink's ``numOutputRows``, streamsql's by the output topic. The JVM path runs first (cold JVM,
cold workers), so warm-up favours streamsql's path: the ratio understates the JVM's lead.
CPU seconds are the process tree's (driver, JVM, Python workers) over each phase.

Why the JVM path is not what W3's SQL runs (docs/performance.md): Spark judges lateness on a
global watermark fixed at the start of each micro-batch, where ksqlDB drops a record against
the stream time of its own partition, updated record by record; the QTT corpus's window and
grace cases observe the difference.
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
from benchmarks.workloads import W3, W3_GRACE_MS, W3_WINDOW_MS, w3_keys


def _produce(bootstrap: str, topic: str, output_topic: str, count: int) -> None:
    from confluent_kafka import Producer

    from streamsql.kafka.admin import KafkaAdmin, client_config, produce_waiting

    admin = KafkaAdmin(bootstrap)
    admin.create_topic(topic, W3.partitions)
    admin.create_topic(output_topic, W3.partitions)  # the watcher reads it from the start
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


def run_jvm_groupby(engine: Any, expected: int, timeout: float) -> dict[str, Any]:
    from pyspark.sql import functions as F

    from streamsql.physical.builder import SparkBuilder
    from streamsql.physical.steps import Collect, physical_plan
    from streamsql.sql import parse

    [stmt] = parse("SELECT sensor, reading, ROWTIME AS event_ms FROM readings EMIT CHANGES;")
    plan = engine.planner.plan_query(stmt.query, persistent=False)
    builder = SparkBuilder(engine._build_context("bench-jvm-groupby"))
    scan = builder.dataframe(physical_plan(plan, Collect(lambda _df, _id: None), "earliest"))
    aggregated = (scan.withColumn("event_time", F.timestamp_millis(F.col("EVENT_MS")))
                  .withWatermark("event_time", f"{W3_GRACE_MS // 1000} seconds")
                  .groupBy(F.window("event_time", f"{W3_WINDOW_MS // 1000} seconds"), F.col("SENSOR"))
                  .agg(F.sum("READING").alias("TOTAL"), F.count(F.lit(1)).alias("READINGS")))
    checkpoint = tempfile.mkdtemp(prefix="bench-jvm-ckpt-")
    t0 = time.monotonic()
    handle = aggregated.writeStream.format("noop").outputMode("append").option("checkpointLocation", checkpoint).start()
    written = 0
    try:
        while written < expected:
            if time.monotonic() - t0 > timeout:
                raise TimeoutError(f"jvm-groupby emitted {written} of {expected} windows after {timeout}s")
            if handle.exception() is not None:
                raise RuntimeError(str(handle.exception()))
            time.sleep(0.2)
            written = sum(int(json.loads(p.json)["sink"].get("numOutputRows", 0) or 0) for p in handle.recentProgress)
        seconds = time.monotonic() - t0
    finally:
        handle.stop()
    return {"seconds": seconds, "outputs": written}


def run_python_operator(engine: Any, sql: str, bootstrap: str, output_topic: str, expected: int,
                        timeout: float) -> dict[str, Any]:
    watcher = OutputWatcher(bootstrap, output_topic, expected).start()
    t0 = time.monotonic()
    engine.execute(sql)
    try:
        while not watcher.wait(0.5):
            if engine.failed_queries():
                raise RuntimeError(f"query failed: {engine.failed_queries()}")
            if time.monotonic() - t0 > timeout:
                raise TimeoutError(f"python-operator wrote {watcher.count} of {expected} windows after {timeout}s")
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
        topic, out = "paths_w3_in", "paths_w3_out"
        start_load = loadavg()
        _produce(broker.bootstrap_servers, topic, out, args.records)
        expected = _expected(args.records)
        spark = get_spark()
        engine = Engine(EngineConfig(broker.bootstrap_servers, tempfile.mkdtemp(prefix="bench-paths-"), None, {}),
                        spark=spark)
        engine.start()
        sampler = TreeSampler(os.getpid())
        try:
            sql = W3.sql(topic, out)
            declare, ctas = sql.split("CREATE TABLE", 1)
            engine.execute(declare)
            before = _cpu(sampler)
            jvm = run_jvm_groupby(engine, expected, args.timeout)
            middle = _cpu(sampler)
            ours = run_python_operator(engine, "CREATE TABLE" + ctas, broker.bootstrap_servers, out, expected,
                                       args.timeout)
            after = _cpu(sampler)
        finally:
            engine.close()
            stop_spark()
        for name, res, cpu in (("jvm-groupby", jvm, _delta(middle, before)),
                               ("python-operator", ours, _delta(after, middle))):
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
    print(f"jvm-groupby / python-operator = {ratio:.2f}x records/s")
    if args.json is not None:
        args.json.write_text(json.dumps({"rows": rows, "ratio_jvm_over_python": round(ratio, 2),
                                         "load_start": start_load, "load_end": loadavg()}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
