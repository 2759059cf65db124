"""Sink throughput: documents per second into a search server, streamsql's Elasticsearch sink
connector beside a ceiling measured in the same run.

``python -m benchmarks.sink_elasticsearch [--records 100000] [--json PATH]``. One embedded broker,
one search server process (``osmem-server``, OpenSearch-compatible, in memory), one topic of
``--records`` JSON records (2 partitions, keys ``doc-<i>``, values ``{"name", "count", "time"}``),
then, one after the other, each into its own index of the same server:

* ``streamsql``: ``CREATE SINK CONNECTOR … ('key.ignore'='false', batch.size 2000)`` through
  ``Engine.execute`` (local Spark, engine defaults); clock from ``execute`` until the index holds
  every document (``_count`` after ``_refresh``, polled every 0.25 s). Spark session start is
  reported apart (``spark_start_s``), not included.
* ``ceiling``: ``opensearch-py``'s ``helpers.bulk`` of the same documents with the same ids, 2,000
  per request, from memory (no Kafka, no decoding): what one Python client in one process gets
  from this server. Clock: the ``helpers.bulk`` call.

Both write the same documents to the same server, so the ratio says what reading Kafka, Spark's
micro-batches and the connector's per-record work cost against the server's own limit.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.measure import loadavg

ES = "io.confluent.connect.elasticsearch.ElasticsearchSinkConnector"


def document(i: int) -> tuple[str, dict[str, Any]]:
    return f"doc-{i}", {"name": f"w{i % 1000}", "count": i, "time": 1_700_000_000_000 + i}


def count(url: str, index: str) -> int:
    import httpx

    with httpx.Client(base_url=url, timeout=60) as c:
        if c.post(f"/{index}/_refresh").status_code == 404:
            return 0
        body = c.post(f"/{index}/_search", json={"size": 0, "track_total_hits": True}).json()
        return int(body["hits"]["total"]["value"])


def wait_for(url: str, index: str, n: int, timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if count(url, index) >= n:
            return time.monotonic()
        time.sleep(0.25)
    raise TimeoutError(f"index {index} did not reach {n} documents in {timeout} s (has {count(url, index)})")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (the search server's share of each phase)."""
    import psutil

    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def run(args: argparse.Namespace) -> dict[str, Any]:
    from confluent_kafka import Producer
    from opensearchpy import OpenSearch, helpers
    from osmem_server import OsmemServer

    from streamsql.kafka.clients import client_config
    from streamsql.kafka.broker import EmbeddedBroker
    from streamsql.runtime.config import EngineConfig
    from streamsql.runtime.engine import Engine

    load_start = loadavg()
    broker = EmbeddedBroker()
    broker.start()
    search = OsmemServer.start()
    out: dict[str, Any] = {"records": args.records, "machine": platform.node(), "cpus": os.cpu_count(),
                           "load_start": load_start, "date": time.strftime("%Y-%m-%d %H:%M")}
    try:
        topic = "sink_docs"
        from streamsql.kafka.admin import KafkaAdmin

        KafkaAdmin(broker.bootstrap_servers).create_topic(topic, 2)
        producer = Producer(client_config(broker.bootstrap_servers, {"linger.ms": 20}))
        for i in range(args.records):
            key, doc = document(i)
            producer.produce(topic, key=key.encode(), value=json.dumps(doc).encode())
            if i % 10000 == 0:
                producer.poll(0)
        producer.flush(120)

        # the ceiling first: the server is fresh for both (one index each)
        client = OpenSearch(hosts=[search.url], timeout=120)
        actions = ({"_index": "ceiling", "_id": key, "_source": doc} for key, doc in map(document, range(args.records)))
        server_cpu = cpu_seconds(search.pid)
        started = time.monotonic()
        ok, errors = helpers.bulk(client, actions, chunk_size=2000, raise_on_error=False, stats_only=True)
        ceiling_s = time.monotonic() - started
        assert ok == args.records and not errors, (ok, errors)
        assert count(search.url, "ceiling") == args.records
        out["ceiling"] = {"seconds": round(ceiling_s, 2), "docs_per_s": round(args.records / ceiling_s),
                          "server_cpu_s": round(cpu_seconds(search.pid) - server_cpu, 1)}
        print(f"ceiling: {args.records} documents in {ceiling_s:.1f} s", file=sys.stderr)

        started = time.monotonic()
        engine = Engine(EngineConfig(broker.bootstrap_servers, tempfile.mkdtemp(prefix="sinkbench-"), None, {}))
        engine.start()
        engine.spark  # noqa: B018 - start the session outside the clock
        out["spark_start_s"] = round(time.monotonic() - started, 2)
        server_cpu = cpu_seconds(search.pid)
        started = time.monotonic()
        t0_wall = time.time()
        engine.execute(f"CREATE SINK CONNECTOR bench WITH ('connector.class'='{ES}', 'connection.url'='{search.url}', "
                       f"'topics'='{topic}', 'key.ignore'='false', 'topic.index.map'='{topic}:streamsql');")
        done = wait_for(search.url, "streamsql", args.records, args.timeout)
        seconds = done - started
        from benchmarks.child import _progress_dict, _timeline

        handle = engine.queries["CONNECTOR_BENCH"].handle
        handle.processAllAvailable()  # outside the clock: the batch's progress is reported once it commits
        progress = [_progress_dict(p) for p in handle.recentProgress]
        timeline = _timeline(progress, t0_wall)
        with_rows = [b for b in timeline if b[3]]
        out["streamsql"] = {"seconds": round(seconds, 2), "docs_per_s": round(args.records / seconds),
                            "timeline": timeline,
                            "first_batch_start_s": with_rows[0][1] if with_rows else None,
                            "batch_seconds": round(sum(b[2] for b in with_rows), 2),
                            "server_cpu_s": round(cpu_seconds(search.pid) - server_cpu, 1)}
        out["ratio"] = round(out["streamsql"]["docs_per_s"] / out["ceiling"]["docs_per_s"], 2)
        engine.close()
    finally:
        search.close()
        broker.stop()
    out["load_end"] = loadavg()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    result = run(args)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
