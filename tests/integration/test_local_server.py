"""The shell on its data directory's local server (issue #55 item 1): the first shell starts the
server in the background, the next one reuses it; a persistent query created from one shell
keeps running after it exits and is seen from another; `streamsql run FILE` sends the file to
the running server; `server status|stop`. One server (one JVM) for the whole module."""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from streamsql.kafka.broker import LocalBroker
from streamsql.surfaces.local_server import LocalServer
from tests.support.cli import run_streamsql
from tests.support.terminal import TRACEBACK, Terminal

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cwd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A working directory whose ./.streamsql gets the local server and broker; both stopped at the end."""
    path = tmp_path_factory.mktemp("local_server")
    try:
        yield path
    finally:
        LocalServer(path / ".streamsql").stop(grace_s=20)
        LocalBroker(path / ".streamsql").stop()


def _shell(cwd: Path, statements: str) -> tuple[str, str]:
    done = run_streamsql("shell", cwd=cwd, input=statements)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not TRACEBACK.search(done.stdout + done.stderr), done.stdout + done.stderr
    return done.stdout, done.stderr


@pytest.mark.timeout(600)
def test_shells_share_the_local_server_and_its_queries_outlive_them(cwd: Path) -> None:
    data_dir = cwd / ".streamsql"
    out, err = _shell(cwd, """
        SET 'auto.offset.reset' = 'earliest';
        CREATE STREAM ls_in (k VARCHAR KEY, v INT) WITH (KAFKA_TOPIC='ls_in', VALUE_FORMAT='JSON', PARTITIONS=1);
        INSERT INTO ls_in (k, v) VALUES ('a', 1);
        CREATE STREAM ls_out WITH (KAFKA_TOPIC='LS_OUT') AS SELECT k, v * 10 AS v10 FROM ls_in;
    """)
    assert f"starting the local server of {data_dir} in the background" in err
    assert "Created query with ID CSAS_LS_OUT_" in out
    record = json.loads((data_dir / "server.json").read_text())
    credentials = data_dir / "server.credentials"
    assert stat.S_IMODE(credentials.stat().st_mode) == 0o600

    # loopback only, and nothing without the credential
    listening = {c.laddr.ip for c in psutil.Process(record["pid"]).net_connections("tcp")
                 if c.status == psutil.CONN_LISTEN and c.laddr.port == record["port"]}
    assert listening == {"127.0.0.1"}
    assert httpx.get(f"http://127.0.0.1:{record['port']}/info").status_code == 401

    # a second shell, after the first has exited: the same server, the query still running
    out, err = _shell(cwd, "INSERT INTO ls_in (k, v) VALUES ('b', 2);\nSHOW QUERIES;\n"
                           "PRINT 'LS_OUT' FROM BEGINNING LIMIT 2;\n")
    assert "starting the local server" not in err
    assert json.loads((data_dir / "server.json").read_text())["pid"] == record["pid"]
    assert "CSAS_LS_OUT_" in out and "RUNNING" in out
    assert '"V10":10' in out and '"V10":20' in out, out

    # `run FILE` sends the file to the running server and returns; --until-idle is refused
    (cwd / "more.sql").write_text("CREATE STREAM ls_more AS SELECT k, v FROM ls_in;\n")
    sent = run_streamsql("run", "more.sql", cwd=cwd)
    assert sent.returncode == 0, sent.stdout + sent.stderr
    assert "Created query with ID CSAS_LS_MORE_" in sent.stdout
    refused = run_streamsql("run", "more.sql", "--until-idle", cwd=cwd)
    assert refused.returncode == 1
    assert f"the local server of {data_dir} (pid {record['pid']}) runs the queries" in refused.stderr
    demo = run_streamsql("demo", "--count", "10", cwd=cwd)
    assert demo.returncode == 1 and "`streamsql demo` runs an engine of its own on it" in demo.stderr

    # an interactive shell: a prompt, no JVM in its process; Ctrl-C ends a push query, Ctrl-C at
    # the prompt (the key, or SIGINT to the terminal's process group) clears it; SIGTERM ends it
    term = Terminal("shell", cwd=cwd)
    try:
        term.wait_for("streamsql>", timeout_s=60)
        assert f"Connected to the local server of {data_dir}" in term.output
        assert not any("java" in " ".join(p.cmdline()) for p in term.processes())
        term.type("SHOW QUERIES;\r")
        term.wait_for("CSAS_LS_MORE_")
        term.type("SELECT * FROM ls_in EMIT CHANGES;\r")
        term.wait_for("Press CTRL-C to interrupt")
        term.type("\x03")
        term.wait_for("Query terminated")
        term.type("\x03")
        time.sleep(0.5)
        term.ctrl_c()
        time.sleep(0.5)
        term.proc.send_signal(signal.SIGTERM)
        assert term.finish() == 143
        assert not TRACEBACK.search(term.output), term.output
    finally:
        term.close()

    refused = run_streamsql("broker", "stop", cwd=cwd)
    assert refused.returncode == 1 and "uses this broker: stop it first (`streamsql server stop`)" in refused.stderr

    status = run_streamsql("server", "status", cwd=cwd)
    assert status.returncode == 0 and f"pid {record['pid']}" in status.stdout
    stopped = run_streamsql("server", "stop", cwd=cwd, timeout=120)
    assert stopped.returncode == 0 and f"pid {record['pid']}" in stopped.stdout
    assert not psutil.pid_exists(record["pid"]) or psutil.Process(record["pid"]).status() == psutil.STATUS_ZOMBIE
    assert run_streamsql("server", "status", cwd=cwd).returncode == 1


README = Path(__file__).resolve().parents[2] / "README.md"


def _try_it_block() -> str:
    """The README's "Try it" block: the first bash block after that heading."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Try it"):]
    return section[section.index("```bash\n") + len("```bash\n"):section.index("```\n", section.index("```bash\n") + 8)]


@pytest.mark.timeout(600)
def test_the_readmes_try_it_block_runs_as_written(cwd: Path) -> None:
    """The block runs in bash as written, in a directory whose ``.venv/bin/streamsql`` is this
    checkout's command; it shares the module's broker (the server is stopped by the test above,
    so the block's shell starts one, as a new user's would)."""
    block = _try_it_block()
    assert len(block.splitlines()) <= 10 and block.startswith(".venv/bin/streamsql produce payments")
    command = cwd / ".venv" / "bin" / "streamsql"
    command.parent.mkdir(parents=True, exist_ok=True)
    command.write_text(f"#!/bin/sh\nPYTHONPATH={README.parent} PYSPARK_PYTHON={sys.executable} "
                       f'exec {sys.executable} -m streamsql "$@"\n')
    command.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "STREAMSQL_BOOTSTRAP_SERVERS"}
    done = subprocess.run(["bash", "-e", "-c", block], cwd=cwd, env=env, capture_output=True, text=True, timeout=540)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert not TRACEBACK.search(output), output
    assert "produced 1000 records to payments" in done.stdout
    assert "Created query with ID CSAS_SUSPICIOUS_" in done.stdout
    rows = [line for line in done.stdout.splitlines() if re.match(r"\|pay-\d+", line)]
    assert len(rows) == 3, done.stdout
    assert "Limit Reached" in done.stdout
    assert "stopped the local server" in done.stdout and "stopped the local broker" in done.stdout
    assert LocalServer(cwd / ".streamsql").find() is None and LocalBroker(cwd / ".streamsql").find() is None
    assert (cwd / ".streamsql" / "topics").is_dir()  # the topics stay for next time
