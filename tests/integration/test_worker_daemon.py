"""A local session's Python tasks run in workers forked from streamsql's preloading daemon."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration


def _parent_command_and_modules(_: object) -> tuple[str, bool]:
    import os
    import sys

    with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
        parent = f.read().replace(b"\0", b" ").decode()
    return parent, "streamsql.kafka.source" in sys.modules


def test_tasks_run_in_workers_of_the_preloading_daemon(spark) -> None:  # type: ignore[no-untyped-def]
    rows = spark.sparkContext.parallelize(range(4), 2).map(_parent_command_and_modules).collect()
    for parent, preloaded in rows:
        assert "-m streamsql.runtime.worker_daemon" in parent, parent
        # a map over numbers imports nothing of streamsql's: the daemon did before it forked
        assert preloaded


def _task_runner(_: object) -> str:
    import sys

    return sys.modules["pyspark.daemon"].worker.__qualname__  # type: ignore[no-any-return]


def test_workers_run_tasks_through_the_runner_that_releases_after_growth(spark) -> None:  # type: ignore[no-untyped-def]
    # the daemon's per-task runner is worker_daemon.releasing_after_growth's (its effect:
    # tests/unit/runtime/test_worker_daemon_memory.py)
    runners = set(spark.sparkContext.parallelize(range(4), 2).map(_task_runner).collect())
    assert runners == {"releasing_after_growth.<locals>.worker"}
