"""Push-query latency through ``streamsql server``: produce → a REST client's ``/query-stream`` row.

    python -m benchmarks.push_latency [--rate 1000] [--seconds 20] [--warmup 10]

A real server over an embedded broker; one client holds ``SELECT … FROM S WHERE … EMIT
CHANGES`` open over HTTP/2 (as ksqlDB's Java client and the REST tests do) while a producer sends
``--rate`` records/s into the stream's topic, each keyed by its sequence number. Latency is the
client's receive time of a row minus the producer's send time of the record it came from (one
machine, one clock). The first ``--warmup`` seconds are not counted (the push query's Spark query
starts inside them). Prints one JSON object: p50, p99 and max in ms, and the rows matched.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path

import httpx

from benchmarks.measure import percentile
from streamsql.conformance.server_process import ServerProcess
from streamsql.kafka.broker import EmbeddedBroker


def _read_rows(url: str, sent: dict[int, float], received: dict[int, float], stop: threading.Event,
               ready: threading.Event) -> None:
    body = {"sql": "SELECT ID, V FROM S WHERE V >= 0 EMIT CHANGES;", "properties": {"auto.offset.reset": "latest"}}
    try:
        with httpx.Client(base_url=url, http2=True, http1=False, timeout=None) as c:
            with c.stream("POST", "/query-stream", json=body) as resp:
                assert resp.status_code == 200, resp.read()
                ready.set()
                for line in resp.iter_lines():
                    now = time.monotonic()
                    row = json.loads(line) if line.strip() else None
                    if isinstance(row, list):  # the header is an object, rows are arrays [ID, V]
                        received[int(row[1])] = now
                    if stop.is_set():
                        return
    except httpx.HTTPError:
        if not stop.is_set():  # the server closing the stream at the end is expected
            raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.push_latency")
    parser.add_argument("--rate", type=int, default=1000, help="records/s produced")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured seconds")
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds produced before measuring")
    args = parser.parse_args(argv)

    from confluent_kafka import Producer

    from streamsql.kafka.clients import client_config

    broker = EmbeddedBroker().start()
    server = ServerProcess(broker.bootstrap_servers, Path(tempfile.mkdtemp()) / "data", service_id="pushlat_")
    sent: dict[int, float] = {}
    received: dict[int, float] = {}
    stop, ready = threading.Event(), threading.Event()
    try:
        server.start()
        with httpx.Client(base_url=server.url, timeout=600) as c:
            resp = c.post("/ksql", json={"ksql": "CREATE STREAM S (ID VARCHAR KEY, V BIGINT) WITH "
                                                 "(KAFKA_TOPIC='s', VALUE_FORMAT='JSON', PARTITIONS=1);"})
            assert resp.status_code == 200, resp.text
        reader = threading.Thread(target=_read_rows, args=(server.url, sent, received, stop, ready), daemon=True)
        reader.start()
        ready.wait(120)
        producer = Producer(client_config(broker.bootstrap_servers, {"linger.ms": 1}))
        start = time.monotonic()
        measure_from = start + args.warmup
        end = measure_from + args.seconds
        n = 0
        step = max(1, args.rate // 100)  # send in 10 ms slices
        while time.monotonic() < end:
            due = start + n / args.rate
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            for _ in range(step):
                sent[n] = time.monotonic()
                producer.produce("s", key=f"k{n}".encode(), value=json.dumps({"V": n}).encode())
                n += 1
            producer.poll(0)
        producer.flush(10)
        time.sleep(3)  # the last records' rows
        stop.set()
        lats = [1000.0 * (received[i] - t) for i, t in sent.items() if t >= measure_from and i in received]
        print(json.dumps({"rate": args.rate, "produced": n, "measured_rows": len(lats),
                          "rows_missing": sum(1 for i, t in sent.items() if t >= measure_from and i not in received),
                          "p50_ms": round(percentile(lats, 50), 1), "p99_ms": round(percentile(lats, 99), 1),
                          "max_ms": round(max(lats), 1) if lats else None}))
    finally:
        stop.set()
        server.stop()
        broker.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
