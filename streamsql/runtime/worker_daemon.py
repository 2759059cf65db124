"""Spark's Python worker daemon, with the modules streamsql's tasks run imported before it forks.

Spark runs each Python task in a worker that its daemon (``pyspark.daemon``) forks on demand; with
``spark.python.worker.reuse`` a worker serves many tasks, but every new worker (a query's first
tasks, a second task slot, a worker replaced after a failure) imports what its task needs *after*
the fork: pandas, pyarrow, PySpark's serializers, confluent-kafka and streamsql's Kafka source,
sink and formats — about a second of CPU per worker, paid inside a query's first micro-batch,
several workers at once on a laptop's two cores.

``spark.python.daemon.module`` names the module Spark runs as the daemon. This one imports those
modules once, freezes the collector's view of them (:func:`gc.freeze`: a forked worker's
collections then do not touch, and so do not copy, the parent's pages), then runs PySpark's own
daemon loop unchanged. Every worker forked afterwards starts with them imported and shares their
memory pages with the daemon until it writes to them.

PySpark's daemon imports nothing before forking on purpose: "pandas and pyarrow start some
threads when they are imported", and a fork copies only the forking thread. The threads they
start here are jemalloc's background thread (pyarrow) and OpenBLAS's pool (numpy); both libraries
register ``pthread_atfork`` handlers that leave a forked child consistent, and Arrow re-creates
its thread pools in a forked child — the same as every ``multiprocessing`` fork after
``import pandas`` on Linux. :func:`preload` imports nothing that starts Spark, Kafka clients or
anything else with live threads or sockets.

Local masters only (:mod:`streamsql.runtime.spark`): the daemon starts before any task ships
code, so this module must be importable from the daemon's own path, which on a local master is
the driver's ``sys.path``; a cluster's executors keep PySpark's daemon.
"""

from __future__ import annotations

import gc
import importlib
import sys

#: what a streamsql task imports: PySpark's worker and Arrow serializers, then the Kafka source
#: and sink (which bring confluent-kafka, orjson, pyarrow and the formats they decode)
PRELOADED = (
    "pyspark.worker",
    "pyspark.sql.pandas.serializers",
    "pyspark.sql.worker.plan_data_source_read",
    "pandas",
    "pyarrow",
    "pyarrow.compute",
    "streamsql.kafka.source",
    "streamsql.kafka.sink",
    "streamsql.formats.json_format",
)


def preload(modules: tuple[str, ...] = PRELOADED) -> list[str]:
    """Import ``modules`` (a missing one is skipped: its task imports it as before) and freeze
    the collector's generations. Returns the modules that could not be imported."""
    missing = []
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - a preload is an optimisation, never a failure
            missing.append(name)
            print(f"streamsql worker daemon: not preloaded {name}: {exc}", file=sys.stderr)
    gc.collect()
    gc.freeze()
    return missing


def main() -> None:
    preload()
    from pyspark.daemon import manager

    manager()


if __name__ == "__main__":
    main()
