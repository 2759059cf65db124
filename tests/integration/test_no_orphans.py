"""No process left behind (issue #18 item 7): SIGTERM (docker stop, systemd) or kill -9 of
`streamsql run` and `streamsql server` while a query runs takes every process they started with
them: Spark's JVM and its Python workers. (`streamsql broker`'s own drill is in
tests/integration/test_local_broker.py; a local broker started on purpose outlives its command.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from streamsql.kafka.admin import KafkaAdmin
from tests.support.cli import REPO

pytestmark = pytest.mark.integration


def _start(args: list[str], cwd: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "STREAMSQL_BOOTSTRAP_SERVERS"}
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    return subprocess.Popen([sys.executable, "-m", "streamsql", *args], cwd=cwd, env=env,
                            stdout=log.open("wb"), stderr=subprocess.STDOUT)


def _tree_once_working(proc: subprocess.Popen[bytes], admin: KafkaAdmin, sink: str, log: Path) -> list[psutil.Process]:
    """The process and its descendants once the query has written its output (Spark's JVM and
    a Python worker among them)."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-3000:]
        if sink in admin.topics() and admin.read_all(sink, timeout_s=2):
            break
        time.sleep(0.5)
    else:
        raise AssertionError(f"the query wrote nothing in 180 s:\n{log.read_text()[-3000:]}")
    tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    names = " ".join(" ".join(_cmdline(p)) for p in tree)
    assert "java" in names and "pyspark" in names, names  # the JVM and a Python worker (daemon)
    return tree


def _cmdline(p: psutil.Process) -> list[str]:
    """A process's command line; empty for one that just ended (a short-lived helper)."""
    try:
        return p.cmdline()
    except psutil.Error:
        return []


def _all_gone(tree: list[psutil.Process], timeout_s: float) -> list[str]:
    """What is still running (and not a zombie) after ``timeout_s``."""
    _gone, alive = psutil.wait_procs(tree, timeout=timeout_s)
    left = []
    for p in alive:
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                left.append(f"{p.pid} {' '.join(_cmdline(p))[:200]}")
        except psutil.NoSuchProcess:
            pass
    for p in alive:  # leave nothing for the next test either way
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    return left


@pytest.mark.parametrize(("command", "sig"), [("run", signal.SIGTERM), ("server", signal.SIGKILL)])
def test_a_signal_takes_every_child_with_it(command, sig, bootstrap, topic_name, tmp_path):  # type: ignore[no-untyped-def]
    src, sink = topic_name("orph"), topic_name("ORPH_OUT").upper()
    admin = KafkaAdmin(bootstrap)
    admin.create_topic(src, 1)
    for i in range(20):
        admin.produce(src, f"k{i}".encode(), json.dumps({"v": i}).encode(), 1000 + i, flush=False)
    admin.flush()
    statements = (f"SET 'auto.offset.reset' = 'earliest';"
                  f"CREATE STREAM orph (k VARCHAR KEY, v INT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON');"
                  f"CREATE STREAM orph_out WITH (KAFKA_TOPIC='{sink}') AS SELECT k, v FROM orph;")
    log = tmp_path / f"{command}.log"
    common = ["--bootstrap-servers", bootstrap, "--data-dir", str(tmp_path / "state")]
    if command == "run":
        script = tmp_path / "p.sql"
        script.write_text(statements)
        proc = _start(["run", str(script), *common], tmp_path, log)
    else:
        from streamsql.kafka.broker import free_port

        port = free_port()
        proc = _start(["server", "--port", str(port), *common], tmp_path, log)
        import httpx

        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            try:
                resp = httpx.post(f"http://127.0.0.1:{port}/ksql", json={"ksql": statements}, timeout=120)
            except httpx.TransportError:  # not listening yet
                time.sleep(0.5)
                continue
            if resp.status_code != 503:  # 503: still initializing
                assert resp.status_code == 200, resp.text
                break
            time.sleep(0.5)
    try:
        tree = _tree_once_working(proc, admin, sink, log)
        proc.send_signal(sig)
        left = _all_gone(tree, 60)
        assert left == [], f"left behind after {sig.name}:\n" + "\n".join(left)
        if sig == signal.SIGTERM:  # a clean stop, not a crash (psutil reaped it: its code is there)
            assert getattr(tree[0], "returncode", None) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
        admin.close()


def test_sigterm_of_a_rest_conformance_run_stops_its_server_and_broker(tmp_path):  # type: ignore[no-untyped-def]
    """`streamsql test` over REST cases starts a broker, a registry and a `streamsql server` (with
    its JVM); SIGTERM (a CI job's timeout) while a case runs takes them all with it."""
    rqtt = tmp_path / "rqtt"
    rqtt.mkdir()
    case = {"name": "slow", "statements": [
        "CREATE STREAM s (id INT KEY, v INT) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON', PARTITIONS=1);",
        "CREATE STREAM t AS SELECT id, v FROM s;"],
        "inputs": [{"topic": "s", "key": 1, "value": {"v": 1}}],
        "responses": [{"admin": {"@type": "currentStatus"}}, {"admin": {"@type": "currentStatus"}}]}
    (rqtt / "orphans.json").write_text(json.dumps({"tests": [dict(case, name=f"slow {i}") for i in range(50)]}))
    log = tmp_path / "test.log"
    proc = _start(["test", str(rqtt / "orphans.json")], tmp_path, log)
    try:
        deadline = time.monotonic() + 180
        tree: list[psutil.Process] = []
        while time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()[-3000:]
            tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
            names = " ".join(" ".join(_cmdline(p)) for p in tree)
            if "server" in names and "java" in names and "tansu" in names:
                break
            time.sleep(0.5)
        else:
            raise AssertionError(f"no server with its JVM within 180 s:\n{log.read_text()[-3000:]}")
        time.sleep(3)  # a case under way
        tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
        proc.send_signal(signal.SIGTERM)
        left = _all_gone(tree, 90)
        assert left == [], "left behind after SIGTERM:\n" + "\n".join(left)
    finally:
        if proc.poll() is None:
            proc.kill()
