"""State buckets: the Kafka Streams tasks of the stateful steps (aggregate, table changes, join).

Kafka Streams keeps one *stream time* per task (one per partition of its input), and closes
windows, drops late records and expires join records on it. A bucket is that task inside Spark:
every stateful step groups its rows by ``__BUCKET`` and keeps one ``transformWithState`` state key
per bucket, so a bucket's records arrive together and share one stream time.

A bucket value is a BIGINT chosen so that Spark's hash partitioning sends bucket ``i`` to
shuffle partition ``i mod n`` (:func:`bucket_values`): buckets spread over the cores instead of
colliding. The values depend on ``n``, ``spark.sql.shuffle.partitions``; Spark records that
number in a query's checkpoint and runs a resumed query with it whatever the session says, so a
resumed query must compute its values with the recorded number too
(:func:`recorded_shuffle_partitions`), or it would key its state under other values and start
from empty state.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

BUCKET_COL = "__BUCKET"
_SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"


def bucket_values(spark: Any, buckets: int, shuffle_partitions: int | None = None) -> list[int]:
    """One distinct BIGINT per bucket; Spark's hash partitioning (``pmod(hash(v), n)`` over ``n``
    shuffle partitions: ``shuffle_partitions``, else the session's) sends bucket ``i`` to
    partition ``i mod n``, so the buckets spread over the partitions (and the cores)."""
    n = shuffle_partitions or int(spark.conf.get(_SHUFFLE_PARTITIONS) or 1)
    rows = spark.range(0, 64 * n * buckets).selectExpr("id", f"pmod(hash(id), {n}) AS p").collect()
    free: dict[int, list[int]] = {}
    for row in rows:
        free.setdefault(int(row["p"]), []).append(int(row["id"]))
    return [free[i % n][i // n] for i in range(buckets)]


def bucket_expression(key_columns: list[str], values: list[int], partition_column: str | None = None) -> str:
    """Spark SQL: the bucket value of a row from a hash of its key columns, or from its Kafka
    partition (``partition_column``) when the input is partitioned by that key already."""
    # imported here: the operators' Python workers import this module, the driver alone calls this
    from streamsql.planner.expressions import quote

    n = len(values)
    if n == 1 or not (key_columns or partition_column):
        return f"CAST({values[0]} AS BIGINT)"
    index = (f"pmod({quote(partition_column)}, {n})" if partition_column
             else f"pmod(hash({', '.join(quote(c) for c in key_columns)}), {n})")
    return f"element_at(array({', '.join(f'CAST({v} AS BIGINT)' for v in values)}), {index} + 1)"


def recorded_shuffle_partitions(checkpoint: Path | None) -> int | None:
    """The shuffle-partition count a query's checkpoint runs with (Spark writes it into each
    offset-log entry and restores it when the query resumes), or None for a new query."""
    offsets = checkpoint / "offsets" if checkpoint is not None else None
    if offsets is None or not offsets.is_dir():
        return None
    batches = sorted((int(p.name) for p in offsets.iterdir() if p.name.isdigit()), reverse=True)
    for batch in batches:
        try:
            lines = (offsets / str(batch)).read_text(encoding="utf-8").splitlines()
            value = json.loads(lines[1]).get("conf", {}).get(_SHUFFLE_PARTITIONS)
        except (OSError, ValueError, IndexError, AttributeError):
            continue  # a half-written entry: Spark ignores it too and uses the one before
        if value is not None:
            return int(value)
    return None
