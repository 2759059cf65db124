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

Between two tasks a reused worker gives back the memory its last task freed
(:func:`release_freed_memory`). PySpark collects garbage there; but glibc keeps the freed chunks of
a large batch (its heap and its mmap threshold grow with the biggest block it has freed), and
pyarrow's mimalloc keeps its freed pages, so an idle worker stayed as large as its largest batch
had made it (seed 003's pipeline: docs/performance.md).

Local masters only (:mod:`streamsql.runtime.spark`): the daemon starts before any task ships
code, so this module must be importable from the daemon's own path, which on a local master is
the driver's ``sys.path``; a cluster's executors keep PySpark's daemon.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import importlib
import sys
from collections.abc import Callable
from typing import Any

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


def _glibc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library is not glibc."""
    name = ctypes.util.find_library("c")
    try:
        trim = ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        return None
    if trim is not None:
        trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


_malloc_trim = _glibc_trim()


def release_freed_memory() -> None:
    """Give the pages a finished task freed back to the system: pyarrow's pool (mimalloc or
    jemalloc) purges its unused pages, glibc returns its arenas' free pages (``malloc_trim(0)``).
    A few milliseconds once per task; the next task's allocations fault pages in again."""
    gc.collect()
    pyarrow = sys.modules.get("pyarrow")
    if pyarrow is not None:
        pyarrow.default_memory_pool().release_unused()
    if _malloc_trim is not None:
        _malloc_trim(0)


def _releasing(run_task: Callable[..., int]) -> Callable[..., int]:
    """``pyspark.daemon.worker`` (one task in a forked worker), then :func:`release_freed_memory`."""

    def worker(*args: Any) -> int:
        try:
            return run_task(*args)
        finally:
            release_freed_memory()

    return worker


def main() -> None:
    preload()
    import pyspark.daemon

    # the daemon's loop calls the module's ``worker`` by name after each fork and for each task
    pyspark.daemon.worker = _releasing(pyspark.daemon.worker)
    pyspark.daemon.manager()


if __name__ == "__main__":
    main()
