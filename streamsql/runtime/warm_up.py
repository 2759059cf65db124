"""Warm a new session's query path before its first query.

A session's first streaming query pays one-off costs that later queries of the same session do
not: its Python task workers are forked and import the Arrow and PySpark serializers, the JVM
interprets Catalyst's optimizer, Janino (Spark's code generator) and the state store's code
before its JIT compiles them, RocksDB's native library loads, and the driver's py4j callback
server starts on the first ``foreachBatch``. Measured on 2 cores (docs/performance.md): W3's
first micro-batch of 100k records took 4.4 s against 0.8 s for the next ones.

:func:`run` pays those costs once, when a local session starts, by running two tiny streaming
queries at once over a synthetic Python source (no broker needed), shaped as the engine's queries
are: a stateless projection into a Python stream writer, and a windowed aggregation in the JVM
with a watermark whose micro-batch goes through ``foreachBatch`` into ``mapInArrow`` tasks (~5 s
on 2 cores; W3's first batch then took 1.9 s). The generated code differs from a user's query's,
so Janino still compiles that query's code, but with its own code already compiled by the JIT.

Who warms: a server with no persistent queries to restore, and an interactive shell, start their
session and warm it in the background (:func:`start_in_background`) while they wait for their
first statement; ``streamsql run`` and ``streamsql test`` do not — they start their first query
at once, so the costs would only move and the warm-up's own work would add. ``STREAMSQL_WARM_UP=0``
turns it off.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import ReadLimit
from pyspark.sql.types import LongType, StringType, StructField, StructType

from streamsql.arrow_map import map_in_arrow
from streamsql.runtime.config import switched_on

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger(__name__)

SHORT_NAME = "streamsql_warm_up"
#: rows per synthetic batch: enough for Arrow's and the aggregation's batch paths, cheap to run
_ROWS = 2_000
_SCHEMA = StructType([StructField("k", StringType()), StructField("v", LongType()), StructField("ts", LongType())])


def enabled() -> bool:
    return switched_on("STREAMSQL_WARM_UP")


class _Batches(DataSourceStreamReader):
    """One micro-batch of one partition of synthetic rows, then nothing (offsets count batches)."""

    def initialOffset(self) -> dict[str, int]:
        return {"batch": 0}

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        return {"batch": 1}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        return [InputPartition(b) for b in range(start["batch"], end["batch"])]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield pa.RecordBatch.from_pydict({
            "k": [f"k{i % 17}" for i in range(_ROWS)],
            "v": list(range(_ROWS)),
            "ts": [1_000 * i for i in range(_ROWS)],
        })

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to release."""


class _Count(WriterCommitMessage):
    pass


class _Discard(DataSourceStreamArrowWriter):
    """Reads every batch it is given and keeps nothing."""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        for _ in iterator:
            pass
        return _Count()

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to publish."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo."""


class WarmUpSource(DataSource):
    """A broker-free stand-in for the Kafka source and sink, used by :func:`run` only."""

    @classmethod
    def name(cls) -> str:
        return SHORT_NAME

    def schema(self) -> StructType:
        return _SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return _Batches()

    def streamWriter(self, schema: StructType, overwrite: bool) -> _Discard:
        return _Discard()


def _count_rows(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    n = sum(b.num_rows for b in batches)
    yield pa.RecordBatch.from_pydict({"n": [n]}, schema=pa.schema([("n", pa.int64())]))


def _write_batch(batch_df: DataFrame, _batch_id: int) -> None:
    map_in_arrow(batch_df.sortWithinPartitions("window"), _count_rows, "n BIGINT").collect()


#: seconds the last :func:`run` of this process took (None: not run)
last_seconds: float | None = None


def start_in_background(session: Callable[[], SparkSession]) -> threading.Thread | None:
    """Start the session (``session()``) and warm it in a daemon thread, when :func:`enabled`
    and the master is local (a cluster's executors are other machines', and its driver outlives
    many queries). Statements that arrive meanwhile wait for the session as they would without
    this, then run beside the warm-up queries."""
    if not enabled():
        return None

    def body() -> None:
        from streamsql.runtime.spark import is_local_master

        try:
            spark = session()
        except Exception as exc:  # noqa: BLE001 - the statement that needs the session says why
            log.debug("no session to warm: %s", exc)
            return
        if is_local_master(spark.sparkContext.master or ""):
            log.info("session warmed up in %.1f s", run(spark))

    thread = threading.Thread(target=body, name="session-warm-up", daemon=True)
    thread.start()
    return thread


def run(spark: SparkSession) -> float:
    """Run the warm-up queries to their end; returns the seconds taken. A failure is logged and
    ignored: warming is an optimisation, never a reason for a session not to start."""
    from pyspark.sql import functions as F

    global last_seconds
    started = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="streamsql-warm-up-")
    queries: list[StreamingQuery] = []
    try:
        from streamsql.runtime.spark import activate

        activate(spark)  # this may be a background thread: the source is registered in ``spark``
        spark.dataSource.register(WarmUpSource)
        source = spark.readStream.format(SHORT_NAME).load()
        queries.append(source.where("v % 3 <> 0").selectExpr("k", "v * 2 AS w", "ts")
                       .writeStream.format(SHORT_NAME).option("checkpointLocation", f"{tmp}/stateless")
                       .queryName("streamsql-warm-up-stateless").start())
        windowed = (source.withColumn("t", F.expr("timestamp_millis(ts)")).withWatermark("t", "0 seconds")
                    .groupBy(F.window("t", "60 seconds"), "k")
                    .agg(F.expr("sum(v) AS s"), F.expr("count(*) AS n"), F.expr("max(ts) AS ts")))
        queries.append(windowed.writeStream.foreachBatch(_write_batch).outputMode("update")
                       .option("checkpointLocation", f"{tmp}/windowed")
                       .queryName("streamsql-warm-up-windowed").start())
        for query in queries:  # both run at once: the session's two task slots are busy
            query.processAllAvailable()
    except Exception as exc:  # noqa: BLE001 - an optimisation must not stop a session
        log.warning("the session's warm-up failed (its first query will start slower): %s", exc)
    finally:
        for query in queries:
            query.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    last_seconds = time.monotonic() - started
    return last_seconds
