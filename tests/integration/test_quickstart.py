"""docs/quickstart.md as written: its commands and statements run in order in a fresh directory,
and the rows it shows are the rows they print."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from streamsql.kafka.broker import LocalBroker
from streamsql.surfaces.local_server import LocalServer
from tests.support.cli import run_streamsql

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"```(\w+)\n(.*?)```", re.S)


def _blocks(kind: str) -> list[str]:
    return [body for k, body in FENCE.findall((ROOT / "docs" / "quickstart.md").read_text()) if k == kind]


def _streamsql(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    done = run_streamsql(*args, cwd=cwd)
    assert done.returncode == 0, f"{args}: {done.stdout}\n{done.stderr}"
    return done


def _rows(text: str) -> set[tuple[str, ...]]:
    return {tuple(c.strip() for c in line.strip("|").split("|")) for line in text.splitlines()
            if line.startswith("|") and not line.startswith("|USER_ID")}


@pytest.mark.timeout(600)
def test_the_quickstart_runs_as_written(tmp_path: Path) -> None:
    commands = [line.split("#")[0].split() for body in _blocks("bash") for line in body.splitlines()
                if line.startswith(".venv/bin/streamsql")]
    assert [c[1:] for c in commands] == [["broker", "start"], ["shell"], ["server", "stop"], ["broker", "stop"]]
    script = tmp_path / "quickstart.sql"
    script.write_text("\n".join(_blocks("sql")))
    try:
        started = _streamsql(commands[0][1:], tmp_path)
        assert "started the local broker" in started.stdout
        # the statements as typed at the shell's prompt: the same shell, reading them from a file
        shell = _streamsql([*commands[1][1:], "-f", str(script)], tmp_path)
        assert "starting the local server" in shell.stderr
    finally:
        stopped = [subprocess.run([sys.executable, "-m", "streamsql", *command[1:]], cwd=tmp_path,
                                  capture_output=True, text=True, timeout=120,
                                  env={**os.environ, "PYTHONPATH": str(ROOT)}) for command in commands[2:]]
    for done in stopped:
        assert done.returncode == 0, done.stdout + done.stderr
    assert LocalServer(tmp_path / ".streamsql").find() is None
    assert LocalBroker(tmp_path / ".streamsql").find() is None
    # each query's output ends with "Query terminated": the page's outputs are those, in order
    outputs = shell.stdout.split("Query terminated")[:-1]
    shown = _blocks("text")
    assert len(outputs) == len(shown), shell.stdout
    for page, printed in zip(shown, outputs):
        assert _rows(page) == _rows(printed), f"the page shows:\n{page}\nthe shell printed:\n{printed}"
    assert "Source `PAGEVIEWS` (topic: pageviews) was dropped." in shell.stdout
