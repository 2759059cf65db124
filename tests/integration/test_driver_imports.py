"""A streamsql driver hands ``mapInArrow`` functions to the JVM but never runs them, so it must
not import pandas: PySpark would import it at the session's first call into the JVM (its NumPy
converters ask ``pyspark.testing.utils``), at every ``mapInArrow`` (``pandas_udf``'s version
check) and at every Arrow-optimised UDF (``udf``'s), ~34 MB of PSS in every driver (docs/performance.md, seed 003). A real local session in
a fresh process, so nothing else in the test run has imported pandas first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys
from pyspark.sql.types import StringType
from streamsql.arrow_map import arrow_udf, map_in_arrow
from streamsql.runtime.spark import get_spark, stop_spark

def doubled(batches):
    import pyarrow.compute as pc
    for b in batches:
        yield b.set_column(1, "twice", pc.multiply(b.column(0), 2))

spark = get_spark("local[1]")
after_start = "pandas" in sys.modules
df = spark.range(5).selectExpr("id", "0 AS twice")
rows = sorted(tuple(r) for r in map_in_arrow(df, doubled, "id BIGINT, twice BIGINT").collect())
after_map = "pandas" in sys.modules
spark.udf.register("shout", arrow_udf(lambda s: s.upper() + "!", StringType()))
shouted = [r[0] for r in spark.sql("SELECT shout(CAST(id AS STRING)) FROM range(2) ORDER BY id").collect()]
print(json.dumps({"after_start": after_start, "after_map": after_map, "after_udf": "pandas" in sys.modules,
                  "rows": rows, "shouted": shouted}))
stop_spark()
"""


def test_the_driver_runs_a_map_in_arrow_step_and_an_arrow_udf_without_pandas() -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["rows"] == [[i, 2 * i] for i in range(5)]  # the workers ran the step
    assert seen["shouted"] == ["0!", "1!"]  # and the UDF
    assert seen["after_start"] is False
    assert seen["after_map"] is False
    assert seen["after_udf"] is False
