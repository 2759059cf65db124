"""``scripts/setup.sh`` says what it does and how long it takes, and a second run says it is
already set up without redoing anything (issue #55 item 4).

The script runs for real (bash, the machine's java and python3) in a copy of the checkout's
layout; its virtualenv's interpreter is a recording stand-in, so the steps it would run (pip, the
archives) are seen without minutes of downloads."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _checkout(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "setup.sh", tmp_path / "scripts" / "setup.sh")
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/bin/sh\necho "$*" >> {tmp_path / "calls.log"}\n')
    python.chmod(0o755)
    return tmp_path


def _setup(checkout: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(checkout / "scripts" / "setup.sh")], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, PYTHON="python3"))


def _calls(checkout: Path) -> list[str]:
    log = checkout / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def test_setup_talks_and_a_second_run_says_it_is_set_up(tmp_path: Path) -> None:
    checkout = _checkout(tmp_path)
    first = _setup(checkout)
    assert first.returncode == 0, first.stderr
    lines = [line for line in first.stdout.splitlines() if line.startswith("setup: ")]
    assert "about 6 minutes" in lines[0]
    assert any("installing streamsql and its dependencies" in line and "about 3 minutes" in line for line in lines)
    assert any("building the Spark class archive" in line for line in lines)
    assert sum("done in" in line for line in lines) >= 3
    assert lines[-1].startswith("setup: streamsql is set up in")
    calls = _calls(checkout)
    assert any(c.startswith("-m pip install") and "-e .[test]" in c for c in calls)
    assert {"-m streamsql.runtime.worker_zip", "-m streamsql.runtime.local_fs",
            "-m streamsql.setup.class_archive"} <= set(calls)

    (checkout / "calls.log").unlink()
    second = _setup(checkout)
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == (f"setup: already set up in {checkout}/.venv (delete "
                                     f".venv/.streamsql-ready to redo the checks)")
    assert _calls(checkout) == []  # nothing redone

    time.sleep(0.01)
    (checkout / "pyproject.toml").touch()  # a changed dependency list: installed again
    os.utime(checkout / "pyproject.toml", (time.time() + 5, time.time() + 5))
    third = _setup(checkout)
    assert third.returncode == 0 and "installing streamsql" in third.stdout
    assert any(c.startswith("-m pip install") for c in _calls(checkout))
