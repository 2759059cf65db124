"""Quiet terminals (issue #55 item 3): on a terminal, Ctrl-C and SIGTERM of `streamsql run` and
`streamsql server`, and the end of `run --until-idle` after a push query, print no Python or Java
traceback, leave no process behind but the data directory's broker, and `run` ends with one
summary line; Spark's and the workers' chatter goes to the log file named on the terminal.

One data directory and its local broker for the module; each case is one command's JVM start."""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from streamsql.kafka.broker import LocalBroker, free_port
from tests.support.terminal import TRACEBACK, Terminal, left_running

pytestmark = pytest.mark.integration

PIPELINE = """
SET 'auto.offset.reset' = 'earliest';
CREATE STREAM quiet_in (k VARCHAR KEY, v INT) WITH (KAFKA_TOPIC='quiet_in', VALUE_FORMAT='JSON', PARTITIONS=1);
INSERT INTO quiet_in (k, v) VALUES ('a', 1);
CREATE STREAM quiet_out AS SELECT k, v FROM quiet_in;
"""


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A working directory whose ./.streamsql has a running local broker (kept between cases)."""
    cwd = tmp_path_factory.mktemp("quiet")
    local = LocalBroker(cwd / ".streamsql")
    local.ensure()
    (cwd / "pipeline.sql").write_text(PIPELINE)
    (cwd / "push.sql").write_text(PIPELINE + "SELECT k, v FROM quiet_in EMIT CHANGES LIMIT 1;\n")
    try:
        yield cwd
    finally:
        local.stop()


def _broker_pid(cwd: Path) -> int:
    return int(json.loads((cwd / ".streamsql" / "broker.json").read_text())["pid"])


def _assert_quiet(term: Terminal) -> None:
    shown = term.output
    assert not TRACEBACK.search(shown), shown
    assert "Setting default log level" not in shown and "incubator" not in shown, shown


@pytest.mark.parametrize("stop", ["ctrl-c", "sigterm"])
def test_a_stopped_run_prints_its_summary_and_nothing_else(stop: str, data_dir: Path) -> None:
    # the live progress display is on by default on a terminal: with Ctrl-C, keep it (it must not
    # garble the results above it, and it ends with its final state); with SIGTERM, turn it off
    progress = stop == "ctrl-c"
    term = Terminal("run", "pipeline.sql", *([] if progress else ["--no-progress"]), cwd=data_dir)
    try:
        term.wait_for("Ctrl-C to stop")
        tree = term.processes()
        assert any("java" in " ".join(p.cmdline()) for p in tree)
        if stop == "ctrl-c":
            term.ctrl_c()
        else:
            term.proc.send_signal(signal.SIGTERM)
        assert term.finish() == 0, term.output
        _assert_quiet(term)
        assert "streamsql: done: 1 persistent query, " in term.output and " errors logged" in term.output
        assert ("progress: CSAS_QUIET_OUT_" in term.output) == progress
        # the statements' results stay (a later run on the data directory resumes the query)
        assert re.search(r"Message: (Created query with ID|Stream QUIET_OUT already exists).*CSAS_QUIET_OUT_",
                         term.output), term.output
        log = data_dir / ".streamsql" / "run.log"
        assert f"engine logs (Spark, Kafka clients) go to {log}" in term.output
        assert "streamsql run (pid" in log.read_text()
        assert left_running(tree, keep={_broker_pid(data_dir)}) == []
    finally:
        term.close()


def test_run_until_idle_after_a_push_query_ends_quietly(data_dir: Path) -> None:
    term = Terminal("run", "push.sql", "--until-idle", "--no-progress", cwd=data_dir)
    try:
        assert term.finish(timeout_s=240) == 0, term.output
        _assert_quiet(term)
        assert "Limit Reached" in term.output
        assert "streamsql: done: 1 persistent query, " in term.output
    finally:
        term.close()


@pytest.mark.parametrize("stop", ["ctrl-c", "sigterm"])
def test_a_stopped_server_prints_no_traceback(stop: str, data_dir: Path) -> None:
    term = Terminal("server", "--port", str(free_port()), cwd=data_dir)
    try:
        term.wait_for("server ready")
        tree = term.processes()
        if stop == "ctrl-c":
            term.ctrl_c()
        else:
            term.proc.send_signal(signal.SIGTERM)
        assert term.finish() == 0, term.output
        _assert_quiet(term)
        assert left_running(tree, keep={_broker_pid(data_dir)}) == []
    finally:
        term.close()
