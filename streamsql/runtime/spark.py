"""One SparkSession per process, configured the way streamsql's queries need it.

Settings and why:
  * ``PYSPARK_PYTHON`` = this interpreter, else Python workers start another Python that lacks
    our packages and fail to connect back (research/spark.md §5.1).
  * ``spark.sql.caseSensitive=true``: ksqlDB's back-quoted identifiers are case-sensitive; the
    parser upper-cases unquoted names, so plain SQL still behaves case-insensitively.
  * ``spark.sql.shuffle.partitions`` small (2× cores): the default 200 is 4–5× slower here and the
    value is frozen into each query's checkpoint.
  * session time zone UTC: ksqlDB's timestamps are UTC unless a function says otherwise.
  * the Python workers' ``pyspark.zip`` is byte-compiled once (:mod:`streamsql.runtime.worker_zip`):
    every Python process Spark starts would otherwise compile PySpark from source (0.6 CPU-s each).
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

from pyspark.sql import SparkSession

_lock = threading.Lock()
#: keeps Spark's own logging to errors (the default prints WARN lines users cannot act on)
_LOG4J = Path(__file__).with_name("log4j2.properties")
_registered: set[int] = set()


def get_spark(master: str | None = None, conf: dict[str, str] | None = None) -> SparkSession:
    """Return the process's SparkSession, creating it on first use, with our data sources registered."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    with _lock:
        if SparkSession.getActiveSession() is None:
            from streamsql.runtime.worker_zip import ensure_compiled

            ensure_compiled()
        builder = SparkSession.builder.appName("streamsql")
        builder = builder.master(master or os.environ.get("STREAMSQL_SPARK_MASTER", "local[2]"))
        settings = {
            "spark.sql.caseSensitive": "true",
            "spark.sql.shuffle.partitions": str(2 * (os.cpu_count() or 2)),
            "spark.sql.session.timeZone": "UTC",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.driver.host": "127.0.0.1",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={_LOG4J}",
            "spark.sql.streaming.stopTimeout": "30s",
            "spark.sql.ansi.enabled": "false",
            # ksqlDB's MAP(...) keeps the last value of a duplicated key; Spark would fail the query
            "spark.sql.mapKeyDedupPolicy": "LAST_WIN",
            # ENCODE/FROM_BYTES: unmappable characters become '?'/U+FFFD as in Java, not a query failure
            "spark.sql.legacy.codingErrorAction": "true",
            "spark.python.worker.reuse": "true",
            "spark.sql.streaming.noDataMicroBatches.enabled": "true",
            "spark.pyspark.python": sys.executable,
            "spark.executorEnv.PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        }
        settings.update(conf or {})
        for k, v in settings.items():
            builder = builder.config(k, v)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel(os.environ.get("STREAMSQL_SPARK_LOG_LEVEL", "ERROR"))
        if id(spark) not in _registered:
            from streamsql.kafka.datasource import KafkaDataSource

            spark.dataSource.register(KafkaDataSource)
            _registered.add(id(spark))
        return spark


def stop_spark() -> None:
    """Stop the process's SparkSession, if one was started (before an embedded broker stops, so
    Spark's Kafka clients do not outlive it)."""
    session = SparkSession.getActiveSession()
    if session is not None:
        for q in session.streams.active:
            try:
                q.stop()
            except Exception:  # stopping is best effort at shutdown
                pass
        session.stop()
