"""Pull-query latency: the table's materialized store against reading the changelog topic.

``python -m benchmarks.pull_query [--keys N] [--lookups M]``. Both run in the same engine on the
embedded broker, over the same CTAS table:

* **store**: ``SELECT * FROM t WHERE k = 'x'`` on the CREATE TABLE AS SELECT table: the SQLite
  store the aggregation commits with each micro-batch, read through its key index
  (``runtime/pull.py``), what streamsql does;
* **changelog scan**: the same lookup answered from the changelog topic, the alternative
  materialization (a stream declared over the table's topic, scanned to its end, latest record
  of the key wins), what a store-less design would do.

The ratio between the two, measured in one run, is the figure that decided the design
(docs/differences.md, "Pull queries").
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from streamsql.kafka.broker import EmbeddedBroker
from streamsql.runtime.config import EngineConfig
from streamsql.runtime.engine import Engine


def _timed(engine: Engine, sql: str) -> float:
    start = time.perf_counter()
    for result in engine.execute(sql):
        if hasattr(result, "rows"):  # a RowStream: read it to its end
            list(result)
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--keys", type=int, default=10_000)
    p.add_argument("--lookups", type=int, default=20)
    args = p.parse_args()
    broker = EmbeddedBroker()
    broker.start()
    engine = Engine(EngineConfig(broker.bootstrap_servers, tempfile.mkdtemp(prefix="pullbench-"), None, {}))
    engine.start()
    try:
        engine.execute("SET 'auto.offset.reset'='earliest';")
        engine.execute("CREATE STREAM clicks (user VARCHAR KEY, page VARCHAR) "
                       "WITH (KAFKA_TOPIC='pull_clicks', VALUE_FORMAT='JSON', PARTITIONS=1);")
        for i in range(args.keys * 3):
            engine.admin.produce("pull_clicks", f"u{i % args.keys}".encode(), b'{"PAGE": "p"}', 1000 + i,
                                 flush=False)
        engine.admin.flush()
        engine.execute("CREATE TABLE per_user AS SELECT user, COUNT(*) AS n FROM clicks GROUP BY user;")
        engine.wait_until_idle()
        topic = engine.catalog.get("PER_USER").topic
        engine.execute(f"CREATE STREAM per_user_log (user VARCHAR KEY, n BIGINT) "
                       f"WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON');")
        keys = [f"u{(i * 7919) % args.keys}" for i in range(args.lookups)]
        _timed(engine, f"SELECT * FROM per_user WHERE user = '{keys[0]}';")  # warm both paths
        _timed(engine, f"SELECT * FROM per_user_log WHERE user = '{keys[0]}';")
        store = [_timed(engine, f"SELECT * FROM per_user WHERE user = '{k}';") for k in keys]
        scan = [_timed(engine, f"SELECT * FROM per_user_log WHERE user = '{k}';") for k in keys]
        s, c = statistics.median(store), statistics.median(scan)
        print(f"{args.keys} keys, {args.keys * 3} changelog records, {args.lookups} lookups each")
        print(f"store (SQLite index):   median {s * 1000:8.1f} ms")
        print(f"changelog scan (Spark): median {c * 1000:8.1f} ms")
        print(f"ratio scan/store: {c / s:,.0f}x")
    finally:
        engine.close()
        broker.stop()


if __name__ == "__main__":
    main()
