"""How concurrent push queries cost on ``streamsql server``: time to first row and server memory
for 1 and N simultaneous ``/query-stream`` push queries on the same stream from ``earliest`` (each
one its own Spark streaming query: only identical push queries from the latest offset share one,
see docs/differences.md "Identical stateless push queries share one Spark query").

    python -m benchmarks.server_push_fanout [--clients 4]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psutil

from streamsql.kafka.broker import EmbeddedBroker
from streamsql.conformance.server_process import ServerProcess


def first_row_latency(url: str, stream: str) -> float:
    started = time.monotonic()
    body = {"sql": f"SELECT * FROM {stream} EMIT CHANGES LIMIT 1;", "properties": {"auto.offset.reset": "earliest"}}
    with httpx.Client(base_url=url, http2=True, http1=False, timeout=600) as c:
        resp = c.post("/query-stream", json=body)
        assert resp.status_code == 200, resp.text
        assert len([x for x in resp.text.split("\n") if x]) == 2
    return time.monotonic() - started


def server_rss_mb(proc: ServerProcess) -> float:
    assert proc.proc is not None
    root = psutil.Process(proc.proc.pid)
    return sum(p.memory_info().rss for p in [root, *root.children(recursive=True)]) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=4)
    args = parser.parse_args()
    broker = EmbeddedBroker().start()
    server = ServerProcess(broker.bootstrap_servers, Path(tempfile.mkdtemp()) / "data", service_id="bench_")
    try:
        server.start()
        with httpx.Client(base_url=server.url, timeout=600) as c:
            c.post("/ksql", json={"ksql": "CREATE STREAM S (ID VARCHAR KEY, V INT) WITH (KAFKA_TOPIC='s', "
                                          "VALUE_FORMAT='JSON', PARTITIONS=1); INSERT INTO S (ID, V) VALUES ('a', 1);"})
        first_row_latency(server.url, "S")  # warm-up: Spark's first query
        single = first_row_latency(server.url, "S")
        results: list[float] = []
        threads = [threading.Thread(target=lambda: results.append(first_row_latency(server.url, "S")))
                   for _ in range(args.clients)]
        started = time.monotonic()
        for t in threads:
            t.start()
        peak = 0.0
        while any(t.is_alive() for t in threads):
            peak = max(peak, server_rss_mb(server))
            time.sleep(0.2)
        wall = time.monotonic() - started
        print(json.dumps({"single_first_row_s": round(single, 2), "clients": args.clients,
                          "concurrent_first_row_s": sorted(round(x, 2) for x in results),
                          "concurrent_wall_s": round(wall, 2), "peak_server_rss_mb": round(peak)}))
    finally:
        server.stop()
        broker.stop()


if __name__ == "__main__":
    main()
