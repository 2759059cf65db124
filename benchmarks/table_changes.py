"""``python -m benchmarks.table_changes [--records N] [--keys K] [--json PATH]``: a filter over a
TABLE (the table-changes step) against the same filter over a STREAM of the same topic (its
ceiling: stateless, no present bit), in one SparkSession, one after the other.

* **table-filter** — ``CREATE TABLE … AS SELECT * FROM t WHERE v % 3 <> 0``: change rows → the
  ``TableChanges`` step (a present bit per key in the RocksDB state store, tombstones only for
  keys the table holds; ``physical/table_changes.py``) → the executors' Kafka sink.
* **stream-filter** — ``CREATE STREAM … AS SELECT * FROM s WHERE v % 3 <> 0`` over the same
  records: Scan → Select → Kafka sink, nothing kept between batches.

The input: ``--records`` JSON records over ``--keys`` keys on 2 partitions, every tenth a
tombstone (``workloads.filter_changes``: the changes the harness's FT and FS workloads read; the
harness, ``python -m benchmarks --workloads FT,FS``, runs the two as separate systems' workloads
and prints their same-run ratio). Each query is timed from its CREATE until its output topic holds the exact number of
records the reference computes (the table's: upserts of passing rows, and a tombstone for each
removal of a key the table held; the stream's: the passing non-null values). CPU seconds are
the process tree's by kind over each phase; ``driver-python`` is this process (the engine).
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
from benchmarks.workloads import FILTER_MODULUS, FT, filter_changes, stream_filter_reference, table_filter_reference

PARTITIONS = 2


def expected(count: int, keys: int) -> tuple[int, int]:
    """(the table's changelog records, the stream's output records): the harness's FT and FS
    references (benchmarks/workloads.py) over the same changes."""
    table, stream = table_filter_reference(), stream_filter_reference()
    changes = list(filter_changes(count, FT.seed, keys))
    return sum(table(k, v) for k, v, _ in changes), sum(stream(k, v) for k, v, _ in changes)


def _produce(bootstrap: str, topic: str, outputs: list[str], count: int, keys: int) -> None:
    from confluent_kafka import Producer

    from streamsql.kafka.admin import KafkaAdmin
    from streamsql.kafka.clients import client_config, produce_waiting

    admin = KafkaAdmin(bootstrap)
    for name in [topic, *outputs]:
        admin.create_topic(name, PARTITIONS)
    admin.close()
    producer = Producer(client_config(bootstrap, {"linger.ms": 5}))
    for key, value, ts in filter_changes(count, FT.seed, keys):
        produce_waiting(producer, topic, {"value": value, "key": key, "timestamp": ts})
        producer.poll(0)
    producer.flush(120)


def _run(engine: Any, sql: str, bootstrap: str, output_topic: str, want: int, timeout: float) -> float:
    watcher = OutputWatcher(bootstrap, output_topic, want).start()
    t0 = time.monotonic()
    engine.execute(sql)
    try:
        while not watcher.wait(0.5):
            if engine.failed_queries():
                raise RuntimeError(f"query failed: {engine.failed_queries()}")
            if time.monotonic() - t0 > timeout:
                raise TimeoutError(f"{output_topic}: {watcher.count} of {want} records after {timeout}s")
        if watcher.error is not None:
            raise watcher.error
        assert watcher.done_at is not None
        return watcher.done_at - t0
    finally:
        watcher.stop()


def _cpu(sampler: TreeSampler) -> dict[str, float]:
    sampler._sample()
    mine = sampler.names.get(os.getpid())
    out: dict[str, float] = {}
    for kind, secs in sampler.cpu_by_kind().items():
        name = "driver-python" if kind == mine else kind
        out[name] = out.get(name, 0.0) + secs
    return out


def _delta(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {k: round(v - before.get(k, 0.0), 1) for k, v in after.items() if v - before.get(k, 0.0) > 0.05}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.table_changes", description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=500_000)
    p.add_argument("--keys", type=int, default=50_000)
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
        topic, out_table, out_stream = "tc_in", "tc_out_table", "tc_out_stream"
        start_load = loadavg()
        _produce(broker.bootstrap_servers, topic, [out_table, out_stream], args.records, args.keys)
        want_table, want_stream = expected(args.records, args.keys)
        engine = Engine(EngineConfig(broker.bootstrap_servers, tempfile.mkdtemp(prefix="bench-tc-"), None, {}),
                        spark=get_spark())
        engine.start()
        sampler = TreeSampler(os.getpid())
        try:
            engine.execute(f"SET 'auto.offset.reset'='earliest';"
                           f"CREATE TABLE t (k STRING PRIMARY KEY, v BIGINT) "
                           f"WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON');"
                           f"CREATE STREAM s (k STRING KEY, v BIGINT) WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON');")
            runs = []
            for path, sql, out, want in (
                    ("table-filter", f"CREATE TABLE t_out WITH (KAFKA_TOPIC='{out_table}') AS "
                                     f"SELECT * FROM t WHERE v % {FILTER_MODULUS} <> 0;", out_table, want_table),
                    ("stream-filter", f"CREATE STREAM s_out WITH (KAFKA_TOPIC='{out_stream}') AS "
                                      f"SELECT * FROM s WHERE v % {FILTER_MODULUS} <> 0;", out_stream, want_stream)):
                before = _cpu(sampler)
                seconds = _run(engine, sql, broker.bootstrap_servers, out, want, args.timeout)
                runs.append((path, seconds, want, _delta(_cpu(sampler), before)))
        finally:
            engine.close()
            stop_spark()
        for path, seconds, want, cpu in runs:
            total = sum(cpu.values())
            rows.append({"path": path, "records": args.records, "keys": args.keys, "outputs": want,
                         "seconds": round(seconds, 2), "records_per_s": round(args.records / seconds),
                         "cpu_seconds": cpu, "cpu_seconds_total": round(total, 1),
                         "driver_cpu_share": round(cpu.get("driver-python", 0.0) / total, 3) if total else None})
    finally:
        broker.stop()
    print(f"A filter over a table vs over a stream: {args.records:,} records, {args.keys:,} keys, "
          f"{os.cpu_count()} cores, load {start_load} -> {loadavg()}")
    print(f"{'path':<14} {'seconds':>8} {'records/s':>10} {'outputs':>9} {'CPU-s':>7} {'driver':>7}  CPU-s by process")
    for r in rows:
        print(f"{r['path']:<14} {r['seconds']:>8.1f} {r['records_per_s']:>10,} {r['outputs']:>9,} "
              f"{r['cpu_seconds_total']:>7} {r['driver_cpu_share']:>7.1%}  {r['cpu_seconds']}")
    ratio = rows[0]["records_per_s"] / rows[1]["records_per_s"]
    print(f"table-filter / stream-filter = {ratio:.2f}x records/s")
    if args.json is not None:
        args.json.write_text(json.dumps({"rows": rows, "ratio_table_over_stream": round(ratio, 2),
                                         "load_start": start_load, "load_end": loadavg()}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
