"""The worker daemon's preload: every module imports, and the collector is frozen before forks."""

from __future__ import annotations

import gc
import subprocess
import sys

from streamsql.runtime import worker_daemon


def test_preload_imports_every_module_and_freezes_the_collector() -> None:
    # in a fresh interpreter: this test process has imported most of them already
    code = ("import gc, sys, threading\n"
            "from streamsql.runtime.worker_daemon import PRELOADED, preload\n"
            "assert preload() == [], 'missing'\n"
            "assert all(m in sys.modules for m in PRELOADED)\n"
            "assert gc.get_freeze_count() > 0\n"
            "assert threading.active_count() == 1, threading.enumerate()\n"
            "print('ok')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


def test_a_module_that_cannot_be_imported_is_named_not_fatal(capsys) -> None:  # type: ignore[no-untyped-def]
    try:
        assert worker_daemon.preload(("json", "streamsql_no_such_module")) == ["streamsql_no_such_module"]
    finally:
        gc.unfreeze()
    assert "not preloaded streamsql_no_such_module" in capsys.readouterr().err


def test_the_stateful_operators_modules_do_not_import_the_planner() -> None:
    """A task's worker unpickles the join and table-changes operators, importing their modules;
    the planner (and sqlglot with it) cost each new worker ~0.3 s of CPU on its first batch."""
    code = ("import sys\n"
            "import streamsql.physical.table_changes, streamsql.physical.joins, streamsql.physical.aggregate\n"
            "print(sorted(m for m in sys.modules if m.startswith(('sqlglot', 'streamsql.planner', 'streamsql.sql'))))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", (proc.stdout, proc.stderr[-2000:])
