"""One system measured in its own process: ``python -m benchmarks.child SYSTEM --workload W1 ...``.

The parent (``python -m benchmarks``) samples this process tree's memory and CPU, and reads the
result from the last stdout line, ``BENCH_RESULT {json}``. Each system's clock starts when it
starts consuming (ceilings) or when its query/app starts (streamsql, quixstreams) and stops when
the output topic holds every expected record (or, for the ceilings, when every input record was
read). For a workload with a final state (an aggregation that emits changes), "every expected
record" is "every expected key's latest record carries its final value" (``--final``): the count
is still reported (``outputs``). Interpreter start-up and imports are outside the clock; Spark's
session start is measured separately (``spark_start_s``).

``streamsql-nocache`` is streamsql with ksqlDB's record cache off
(``ksql.streams.cache.max.bytes.buffering=0`` in the engine's properties, as in a server's
properties file): an aggregation then writes one update per input record, as quixstreams does.
It also sets ``streamsql.aggregation.operator=python``, what docs/differences.md tells a user
who wants every update at speed: Spark's own operator would read one record per micro-batch.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from typing import Any

from benchmarks.measure import FinalState, OutputWatcher, percentile, tree_cpu
from benchmarks.workloads import WORKLOADS, Workload

#: the engine properties of each streamsql system (on top of the defaults)
STREAMSQL_PROPERTIES: dict[str, dict[str, str]] = {
    "streamsql": {},
    "streamsql-nocache": {"ksql.streams.cache.max.bytes.buffering": "0", "streamsql.aggregation.operator": "python"},
    "streamsql-cold": {},
}
#: the environment of each streamsql system: ``streamsql`` runs its query on a session warmed as a
#: server's or an interactive shell's is (``streamsql.runtime.warm_up``); ``streamsql-cold`` on
#: one that is not, as ``streamsql run`` does, so its query pays the session's one-off costs
STREAMSQL_ENV: dict[str, dict[str, str]] = {"streamsql-cold": {"STREAMSQL_WARM_UP": "0"}}


def _watcher(args: argparse.Namespace, w: Workload, on_done: Any = None) -> OutputWatcher:
    """The output watcher: done by final state when the workload has one (``--final``), else by
    the expected record count."""
    if args.final:
        with open(args.final) as f:
            expected = json.load(f)
        if w.output_state is None:
            raise RuntimeError(f"{w.name} has no output_state to compare its final state with")
        return OutputWatcher(args.bootstrap, args.output_topic, None, on_done=on_done,
                             final=FinalState(expected, w.output_state))
    return OutputWatcher(args.bootstrap, args.output_topic, args.expected, on_done=on_done)


def _done(watcher: OutputWatcher, t0: float) -> dict[str, Any]:
    out: dict[str, Any] = {"records": None, "seconds": watcher.done_at - t0, "outputs": watcher.done_count,  # type: ignore[operator]
           "first_output_s": watcher.first_at - t0 if watcher.first_at is not None else None}
    if watcher.final is not None:
        out.update(watcher.final.summary())
    if watcher.missed is not None:  # the watcher's own consumer lost records; a recount found them
        out.update(watcher_missed=watcher.missed, watcher_skipped=watcher.skipped[:20])
    return out


def _consume_loop(args: argparse.Namespace, work: Any) -> dict[str, Any]:
    from confluent_kafka import Consumer, TopicPartition

    from streamsql.kafka.admin import topic_partitions
    from streamsql.kafka.clients import consumer_config

    t0 = time.monotonic()
    consumer = Consumer(consumer_config(args.bootstrap, {"group.id": f"bench-{args.system}",
                                                         "enable.partition.eof": False}))
    parts = topic_partitions(consumer, args.input_topic)
    consumer.assign([TopicPartition(args.input_topic, p, 0) for p in parts])
    n = outputs = 0
    deadline = t0 + args.timeout
    while n < args.records:
        if time.monotonic() > deadline:
            raise TimeoutError(f"read {n} of {args.records} records in {args.timeout}s")
        for m in consumer.consume(10000, 0.5):
            if m.error() is not None:
                continue
            key, value = m.key(), m.value()
            m.offset()
            n += 1
            if work is not None:
                outputs += work(key, value)
    seconds = time.monotonic() - t0
    consumer.close()
    result: dict[str, Any] = {"records": n, "seconds": seconds}
    if work is not None:
        result["outputs"] = outputs
        if outputs != args.expected:
            raise AssertionError(f"ceiling-json computed {outputs} outputs, expected {args.expected}")
    return result


def run_ceiling_raw(args: argparse.Namespace, _w: Workload) -> dict[str, Any]:
    return _consume_loop(args, None)


def run_ceiling_json(args: argparse.Namespace, w: Workload) -> dict[str, Any]:
    return _consume_loop(args, w.reference())


def _progress_dict(p: Any) -> dict[str, Any]:
    """PySpark 4's StreamingQueryProgress is a dict subclass whose items may be empty; its JSON is not."""
    text = getattr(p, "json", None)
    if isinstance(text, str):
        return json.loads(text)
    return dict(p)


def _timeline(progress: list[dict[str, Any]], t0_wall: float) -> list[tuple[int, float, float, int]]:
    """Per micro-batch: (batch id, its start in seconds after ``execute`` was called, its
    duration in seconds, its input rows) — where a run's time goes before the first batch, between
    batches and after the last one with data."""
    from datetime import datetime

    out = []
    for p in sorted(progress, key=lambda p: p["batchId"]):
        start = datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp()
        out.append((p["batchId"], round(start - t0_wall, 3),
                    p["durationMs"].get("triggerExecution", 0) / 1000.0, _read(p)))
    return out


def _read(p: dict[str, Any]) -> int:
    """The input records a micro-batch read: its sources' end less start offsets (a run's input
    topics are new, so a query's first batch starts at 0), not Spark's ``numInputRows`` — a
    stream reader applying a pushed WHERE hands Spark only the rows it keeps."""
    from streamsql.runtime.progress import consumed_records, source_offsets

    total = 0
    for source in p.get("sources") or []:
        end = source_offsets(source.get("endOffset"))
        start = source.get("startOffset") or ({part: 0 for part in end} if end is not None else None)
        total += consumed_records({**source, "startOffset": start})
    return total


def _steady(progress: list[dict[str, Any]]) -> dict[str, Any]:
    """Throughput over the micro-batches after the first one that had data (the first carries
    Python worker start, planning and code generation)."""
    batches = sorted((p for p in progress if _read(p) > 0), key=lambda p: p["batchId"])
    #: records the query read over all batches: the workload's input records only when the query
    #: reads the input topic record for record (not W2's aggregation, which reads the cutter's
    #: words, nor W4's, which reads a row per quote of a gzipped batch)
    out: dict[str, Any] = {"batches": len(batches), "input_rows": sum(_read(p) for p in batches)}
    if batches:
        first = batches[0]
        out["first_batch_rows"] = _read(first)
        out["first_batch_s"] = first["durationMs"].get("triggerExecution", 0) / 1000.0
        out["first_batch_duration_ms"] = dict(first["durationMs"])
    rest = batches[1:]
    if rest:
        rows = sum(_read(p) for p in rest)
        secs = sum(p["durationMs"].get("triggerExecution", 0) for p in rest) / 1000.0
        out.update(steady_rows=rows, steady_s=secs, steady_records_per_s=rows / secs if secs else None)
        keys = ("addBatch", "latestOffset", "queryPlanning", "walCommit", "commitOffsets", "getBatch")
        out["steady_duration_ms"] = {k: sum(p["durationMs"].get(k, 0) for p in rest) for k in keys}
    return out


def run_streamsql(args: argparse.Namespace, w: Workload) -> dict[str, Any]:
    from streamsql.runtime.config import EngineConfig
    from streamsql.runtime.engine import Engine
    from streamsql.runtime.spark import get_spark, stop_spark

    data_dir = tempfile.mkdtemp(prefix="bench-streamsql-")
    # a caller's own properties on top of the system's (the scale-out benchmark's batch size)
    properties = {**STREAMSQL_PROPERTIES[args.system], **(getattr(args, "properties", None) or {})}
    result: dict[str, Any] = {"properties": properties}
    os.environ.update(STREAMSQL_ENV.get(args.system, {}))
    t = time.monotonic()
    spark = get_spark()
    from streamsql.runtime import warm_up

    if warm_up.enabled():  # a query submitted to a server's or shell's session, warmed while it waited
        result["warm_up_s"] = warm_up.run(spark)
    result["spark_start_s"] = time.monotonic() - t
    engine = Engine(EngineConfig(args.bootstrap, data_dir, properties=dict(properties)), spark=spark)
    try:
        engine.start()
        watcher = _watcher(args, w).start()
        result["cpu_at_query_start"] = tree_cpu(os.getpid())
        t0, t0_wall = time.monotonic(), time.time()
        result["execute_at"] = t0_wall  # the timeline's zero, on the wall clock
        engine.execute(w.sql(args.input_topic, args.output_topic))
        result["execute_s"] = time.monotonic() - t0
        deadline = t0 + args.timeout
        while not watcher.wait(0.5):
            failed = engine.failed_queries()
            if failed:
                raise RuntimeError(f"query failed: {failed}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"output held {watcher.progress()} after {args.timeout}s")
        if watcher.error is not None:
            raise watcher.error
        result.update(_done(watcher, t0), records=args.records)
        watcher.stop()
        engine.wait_until_idle()  # the last batch's progress is posted after its output is written
        query = list(engine.queries.values())[-1]  # the query writing the output topic
        progress = [_progress_dict(p) for p in query.handle.recentProgress]
        result.update(_steady(progress), timeline=_timeline(progress, t0_wall))
        if args.latency_seconds > 0:
            result.update(_streamsql_latency(args, w, engine, query.info.id))
    finally:
        engine.close()
        stop_spark()
        shutil.rmtree(data_dir, ignore_errors=True)
    return result


def _streamsql_latency(args: argparse.Namespace, w: Workload, engine: Any, query_id: str) -> dict[str, Any]:
    """Produce at a steady low rate into a fresh topic with the same query running; latency is
    the output consumer's receive time minus the producer's send time (same clock)."""
    from confluent_kafka import Producer

    from streamsql.kafka.clients import client_config

    engine.execute(f"TERMINATE {query_id};")
    for src in reversed(list(engine.catalog.sources.values())):  # the workload's SQL runs again on new topics
        engine.execute(f"DROP {src.kind} {src.name};")
    lat_in, lat_out = f"{args.input_topic}_lat", f"{args.output_topic}_lat"
    engine.admin.create_topic(lat_in, w.partitions)
    engine.admin.create_topic(lat_out, w.partitions)
    #: send time per key; only records whose key is unique can be matched to their output, so a
    #: keyless workload (the Nexmark bids) has no latency figure rather than a wrong one
    sent: dict[bytes, float] = {}
    ambiguous: set[bytes] = set()
    watcher = OutputWatcher(args.bootstrap, lat_out, None, sent=sent).start()
    engine.execute(w.sql(lat_in, lat_out))
    # the statement is acknowledged here; records are sent from now on at the probe's rate, so the
    # first output's arrival is a new query's start on a warm session (Spark already up)
    acknowledged = time.monotonic()
    producer = Producer(client_config(args.bootstrap, {"linger.ms": 1, "partitioner": "murmur2_random"}))
    rate = args.latency_rate
    warmup = args.latency_warmup
    total_s = warmup + args.latency_seconds
    records = w.generate(int(rate * total_s) + rate, 7)
    start = time.time()
    measure_from = start + warmup
    n = 0
    step = max(1, rate // 100)  # send in 10 ms slices
    while True:
        now = time.time()
        if now - start >= total_s:
            break
        due = int((now - start) * rate)
        while n < due:
            for _ in range(step):
                key, value, _ts = next(records)
                if key is not None and key not in ambiguous:
                    if key in sent:  # a repeated key: its outputs cannot be told apart
                        ambiguous.add(key)
                        sent.pop(key, None)
                    else:
                        sent[key] = time.time()
                producer.produce(lat_in, key=key, value=value)
                n += 1
        producer.poll(0)
        time.sleep(max(0.0, start + (n + step) / rate - time.time()))
    producer.flush(10)
    time.sleep(3)  # let the last records through
    watcher.stop()
    lats = [lat for sent_at, lat in watcher.latencies_ms if sent_at >= measure_from]
    first = watcher.first_at - acknowledged if watcher.first_at is not None else None
    return {"latency_rate": rate, "latency_produced": n, "latency_samples": len(lats),
            "first_output_after_create_s": first, "p50_ms": percentile(lats, 50), "p99_ms": percentile(lats, 99),
            "max_ms": max(lats) if lats else None}


def run_quixstreams(args: argparse.Namespace, w: Workload) -> dict[str, Any]:
    import logging

    from quixstreams import Application

    state_dir = tempfile.mkdtemp(prefix="bench-quix-")
    # Same librdkafka fix the streamsql source and the ceilings get (research/spark.md §3.4,
    # kafka/admin.consumer_config): without it librdkafka 2.x backs off 1 s whenever its local
    # queue is full; at 0 its broker thread spins on a full queue.
    # session.timeout.ms: tansu answers a new member's JoinGroup only after session.timeout.ms / 2
    # (librdkafka's default 45 s → 23 s before the first record); 6 s is Kafka's minimum → 3 s.
    consumer_extra: dict[str, Any] = {"fetch.queue.backoff.ms": 1, "queued.min.messages": 200000, "log_level": 4,
                                      "session.timeout.ms": 6000,
                                      **json.loads(os.environ.get("BENCH_QUIX_CONSUMER_EXTRA", "{}"))}
    if os.environ.get("BENCH_QUIX_RDKAFKA_DEBUG"):
        consumer_extra.update(debug=os.environ["BENCH_QUIX_RDKAFKA_DEBUG"], log_level=7)
    app = Application(broker_address=args.bootstrap, consumer_group=f"bench-quix-{uuid.uuid4().hex[:8]}",
                      auto_offset_reset="earliest", state_dir=state_dir, loglevel=os.environ.get("BENCH_QUIX_LOGLEVEL", "WARNING"),
                      use_changelog_topics=False, consumer_extra_config=consumer_extra,
                      producer_extra_config={"log_level": 4})
    in_topic = app.topic(args.input_topic, key_deserializer="bytes", value_deserializer=w.quix_value_format)
    out_topic = app.topic(args.output_topic, key_serializer="bytes", value_serializer="json")
    if w.table is not None:
        table_topic = app.topic(f"{args.input_topic}_table", key_deserializer="bytes", value_deserializer="json")
        w.quix(app.dataframe(in_topic), out_topic, app.dataframe(table_topic))
    else:
        w.quix(app.dataframe(in_topic), out_topic)
    watcher = _watcher(args, w, on_done=app.stop).start()
    timer = threading.Timer(args.timeout, app.stop)
    timer.daemon = True
    timer.start()
    t0 = time.monotonic()
    try:
        app.run()
    finally:
        timer.cancel()
        shutil.rmtree(state_dir, ignore_errors=True)
    if watcher.error is not None:
        raise watcher.error
    if not watcher.done.is_set():
        raise TimeoutError(f"quixstreams stopped with {watcher.progress()} in the output")
    watcher.stop()
    return {**_done(watcher, t0), "records": args.records}


SYSTEMS = {"ceiling-raw": run_ceiling_raw, "ceiling-json": run_ceiling_json, "streamsql": run_streamsql,
           "streamsql-nocache": run_streamsql, "streamsql-cold": run_streamsql, "quixstreams": run_quixstreams}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.child")
    p.add_argument("system", choices=sorted(SYSTEMS))
    p.add_argument("--workload", required=True, choices=sorted(WORKLOADS))
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--input-topic", required=True)
    p.add_argument("--output-topic", required=True)
    p.add_argument("--records", type=int, required=True)
    p.add_argument("--expected", type=int, required=True,
                   help="records the reference emits (without a record cache: one per update)")
    p.add_argument("--final", help="JSON file of the expected final value per output key: done by final state")
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--latency-seconds", type=float, default=0)
    p.add_argument("--latency-warmup", type=float, default=10)
    p.add_argument("--latency-rate", type=int, default=1000)
    args = p.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    try:
        result = SYSTEMS[args.system](args, WORKLOADS[args.workload])
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        result = {"error": f"{type(e).__name__}: {e}"}
    import resource

    # this process's own peak (exact, unlike the parent's sampling of a short-lived process)
    result["self_max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("BENCH_RESULT " + json.dumps(result), flush=True)
    return 0 if "error" not in result else 1


if __name__ == "__main__":
    sys.exit(main())
