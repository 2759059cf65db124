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

A reused worker that a task grew by more than :data:`GROWTH_TO_RELEASE` gives the task's freed
memory back before it waits for the next (:func:`release_freed_memory`). glibc keeps the freed
chunks of a large batch (its heap and its mmap threshold grow with the biggest block it has
freed) and pyarrow's mimalloc keeps freed pages, so an idle worker stayed as large as its
largest batch had made it; seed 003's pipeline keeps five or six task workers alive on two
cores, and their sum is its largest memory after the JVM (docs/performance.md). Only a task
that grew the worker pays (a collection and ``malloc_trim``, some milliseconds): in a steady
stream of similar batches a worker reuses what it freed and stays the same size, so no task
does. (Releasing after every task cost W1 a fifth of its records/s.)

Local masters only (:mod:`streamsql.runtime.spark`): the daemon starts before any task ships
code, so this module must be importable from the daemon's own path, which on a local master is
the driver's ``sys.path``; a cluster's executors keep PySpark's daemon.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import importlib
import os
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
    # the stateful operators Spark unpickles in a task (without the planner: they do not import it)
    "streamsql.physical.table_changes",
    "streamsql.physical.joins",
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


#: a task that left its worker this much larger (resident) than it found it is followed by
#: :func:`release_freed_memory`
GROWTH_TO_RELEASE = 16 * 2**20
_PAGE = os.sysconf("SC_PAGE_SIZE")


def resident_bytes() -> int:
    """This process's resident memory (``/proc/self/statm``: one read, microseconds); 0 where
    there is no ``/proc``."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


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
    """Give the pages a finished task freed back to the system: the collector frees what only
    cycles kept, pyarrow's pool (mimalloc or jemalloc) purges its unused pages, glibc returns
    its arenas' free pages (``malloc_trim(0)``)."""
    gc.collect()
    pyarrow = sys.modules.get("pyarrow")
    if pyarrow is not None:
        pyarrow.default_memory_pool().release_unused()
    if _malloc_trim is not None:
        _malloc_trim(0)


def releasing_after_growth(run_task: Callable[..., int], growth: int = GROWTH_TO_RELEASE,
                           measure: Callable[[], int] = resident_bytes,
                           release: Callable[[], None] = release_freed_memory) -> Callable[..., int]:
    """``pyspark.daemon.worker`` (one task in a forked worker), then ``release()`` when the task
    left the worker more than ``growth`` bytes larger than it found it."""

    def worker(*args: Any) -> int:
        before = measure()
        try:
            return run_task(*args)
        finally:
            if measure() - before > growth:
                release()

    return worker


def main() -> None:
    preload()
    import pyspark.daemon

    # the daemon's loop calls the module's ``worker`` by name for each task of a forked worker
    pyspark.daemon.worker = releasing_after_growth(pyspark.daemon.worker)
    pyspark.daemon.manager()


if __name__ == "__main__":
    main()
