"""``python -m benchmarks.python_udf [--records N]``: the price of a Python function.

One embedded broker, one engine, one input topic of JSON log lines; the same query shape runs
once per variant, one after the other in the same process, each as a persistent query to its own
output topic:

* ``builtin``       ``SELECT UCASE(msg) ...``                (Spark's upper(): JVM only)
* ``python-row``    ``SELECT PY_UPPER(msg) ...``             (Arrow-optimised Python UDF, per row)
* ``python-pandas`` ``SELECT PY_UPPER_VEC(msg) ...``         (pandas UDF, per Arrow batch)
* ``builtin-agg``   ``COUNT(*)`` per word per 1-minute window after SPLIT + EXPLODE
* ``python-udaf``   ``HEAVY_HITTERS(word, 10)`` per 1-minute window (an accumulator of the aggregation processor)

Reported: records/s end to end (execute → output holds every record) and steady-state rows/s
from Spark's progress (first batch excluded). Numbers move with the machine's load (printed).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
import uuid
from pathlib import Path

UDF_FILE = '''
import pandas as pd
from streamsql.udf import udf

@udf(name="PY_UPPER", returns="VARCHAR", params=["VARCHAR"])
def py_upper(s):
    return None if s is None else s.upper()

@udf(name="PY_UPPER_VEC", returns="VARCHAR", params=["VARCHAR"], vectorized=True)
def py_upper_vec(s: pd.Series) -> pd.Series:
    return s.str.upper()
'''

VARIANTS = {
    "builtin": ("STREAM", "SELECT k, UCASE(msg) AS m FROM logs"),
    "python-row": ("STREAM", "SELECT k, PY_UPPER(msg) AS m FROM logs"),
    "python-pandas": ("STREAM", "SELECT k, PY_UPPER_VEC(msg) AS m FROM logs"),
    "builtin-agg": ("TABLE", "SELECT k, COUNT(*) AS c FROM logs WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY k"),
    "python-udaf": ("TABLE", "SELECT k, HEAVY_HITTERS(msg, 10) AS c FROM logs WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY k"),
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.python_udf", description=__doc__)
    p.add_argument("--records", type=int, default=50_000)
    p.add_argument("--variants", default=",".join(VARIANTS))
    args = p.parse_args(argv)

    from streamsql.kafka.broker import EmbeddedBroker
    from streamsql.runtime.config import EngineConfig
    from streamsql.runtime.engine import Engine
    from streamsql.runtime.spark import get_spark, stop_spark

    work = Path(tempfile.mkdtemp(prefix="bench-udf-"))
    (work / "ext").mkdir()
    (work / "ext" / "bench_udfs.py").write_text(UDF_FILE)
    broker = EmbeddedBroker().start()
    try:
        engine = Engine(EngineConfig(broker.bootstrap_servers, work / "state",
                                     properties={"ksql.extension.dir": str(work / "ext")}), spark=get_spark())
        engine.start()
        engine.execute("SET 'auto.offset.reset'='earliest';")
        engine.execute(f"SET 'ksql.streams.max.records.per.batch'='{max(1000, args.records // 10)}';")
        topic = f"logs_{uuid.uuid4().hex[:6]}"
        engine.admin.create_topic(topic, 2)
        rng = random.Random(1)
        words = [f"word{i}" for i in range(200)]
        for i in range(args.records):
            msg = " ".join(rng.choices(words, k=8))
            engine.admin.produce(topic, f"k{i % 50}".encode(), json.dumps({"msg": msg}).encode(),
                                 1_700_000_000_000 + i, flush=False)
        engine.admin.flush()
        engine.execute(f"CREATE STREAM logs (k VARCHAR KEY, msg VARCHAR) WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON');")
        print(f"records={args.records} load_at_start={os.getloadavg()}")
        print(f"{'variant':<15}{'end-to-end rec/s':>18}{'steady rows/s':>15}{'seconds':>9}")
        for name in args.variants.split(","):
            kind, select = VARIANTS[name]
            sink = f"OUT_{name.replace('-', '_').upper()}"
            started = time.monotonic()
            [status] = engine.execute(f"CREATE {kind} {sink} AS {select} EMIT CHANGES;")
            engine.wait_until_idle()
            seconds = time.monotonic() - started
            handle = engine.queries[status.query_id].handle
            progress = [p for p in handle.recentProgress if p["numInputRows"]][1:]
            rows = sum(p["numInputRows"] for p in progress)
            busy = sum(p["durationMs"].get("triggerExecution", 0) for p in progress) / 1000
            steady = f"{rows / busy:,.0f}" if busy else "n/a"
            print(f"{name:<15}{args.records / seconds:>18,.0f}{steady:>15}{seconds:>9.1f}", flush=True)
            engine.execute(f"TERMINATE {status.query_id};")
        print(f"load_at_end={os.getloadavg()}")
        engine.close()
    finally:
        stop_spark()
        broker.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
