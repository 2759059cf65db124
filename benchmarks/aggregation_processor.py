"""The aggregation processor alone (no Spark, no Kafka): records/s it applies on one core.

``python -m benchmarks.aggregation_processor [--records N] [--keys K]``. The processor runs in
the aggregate step of every GROUP BY query (``physical/aggregate.py``, one call per key bucket
and micro-batch), so this is the ceiling of one bucket's throughput after Spark has decoded the
input.
"""

from __future__ import annotations

import argparse
import time

from streamsql import types as t
from streamsql.catalog import Catalog, Source
from streamsql.functions.catalog import builtin_registry
from streamsql.planner.planner import Planner
from streamsql.physical.aggregator import AggregationProcessor, MemoryState
from streamsql.sql import parse

QUERIES = {
    "count+sum": "CREATE TABLE o AS SELECT k, COUNT(*) AS n, SUM(v) AS s FROM s GROUP BY k;",
    "tumbling count": "CREATE TABLE o AS SELECT k, COUNT(*) AS n FROM s WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY k;",
    "tumbling sum, EMIT FINAL (W3)": "CREATE TABLE o AS SELECT k, SUM(v) AS total, COUNT(*) AS n FROM s "
                                     "WINDOW TUMBLING (SIZE 60 SECONDS, GRACE PERIOD 10 SECONDS) GROUP BY k EMIT FINAL;",
}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--records", type=int, default=200_000)
    p.add_argument("--keys", type=int, default=1_000)
    args = p.parse_args()
    catalog = Catalog()
    catalog.add(Source("S", "STREAM", [t.Column("K", t.STRING), t.Column("V", t.INTEGER)], topic="s",
                       key_format="NONE", value_format="JSON"))
    for name, sql in QUERIES.items():
        [stmt] = parse(sql)
        plan = Planner(catalog, builtin_registry()).plan_query(stmt.query, persistent=True, sink_name="O")
        rows = []
        for i in range(args.records):
            row = {"__K0": f"k{i % args.keys}", t.ROWTIME: i * 10, t.ROWPARTITION: 0, t.ROWOFFSET: i}
            for call in plan.calls:  # type: ignore[union-attr]
                for col in call.arg_columns:
                    row[col] = i
            rows.append(row)
        proc = AggregationProcessor(plan, MemoryState())  # type: ignore[arg-type]
        start = time.perf_counter()
        for i in range(0, len(rows), 10_000):  # micro-batches of 10k
            proc.process(rows[i:i + 10_000])
            proc.state_changes()
        elapsed = time.perf_counter() - start
        print(f"{name}: {args.records / elapsed:,.0f} records/s ({args.records} records, {args.keys} keys)")


if __name__ == "__main__":
    main()
