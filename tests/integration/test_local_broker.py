"""One local broker per data directory, shared by every command given no bootstrap servers
(``kafka/broker.LocalBroker``): real tansu processes and real ``streamsql`` commands."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from streamsql.errors import KafkaError
from streamsql.kafka.admin import KafkaAdmin
from streamsql.kafka.broker import RECORD_FILE, BrokerRecord, LocalBroker, free_port
from streamsql.seeds import PIPELINES_DIR
from tests.support.cli import run_streamsql

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def test_a_data_directory_has_one_local_broker_until_it_is_stopped(tmp_path: Path) -> None:
    local = LocalBroker(tmp_path / "state")
    assert local.find() is None
    try:
        first, started = local.ensure()
        assert started and _alive(first.pid)
        again, started_again = LocalBroker(tmp_path / "state").ensure()
        assert (again, started_again) == (first, False)
        assert json.loads((tmp_path / "state" / RECORD_FILE).read_text())["port"] == first.port
        admin = KafkaAdmin(first.bootstrap_servers)
        admin.create_topic("kept", 1)
        assert LocalBroker(tmp_path / "state").find() == first
        assert admin.topic_exists("kept")
        admin.close()

        foreground = LocalBroker(tmp_path / "other").launch(memory=True)
        try:
            with pytest.raises(KafkaError, match=f"already has a local broker at 127.0.0.1:{first.port} "
                                                 f"\\(pid {first.pid}\\)"):
                local.register(foreground)
        finally:
            foreground.stop()
    finally:
        stopped = local.stop()
    assert stopped == first
    assert not _alive(first.pid) and not _alive(first.store_pid)  # the broker and its object store
    assert local.find() is None and local.stop() is None
    assert not (tmp_path / "state" / RECORD_FILE).exists()


def test_commands_starting_at_once_share_one_broker(tmp_path: Path) -> None:
    local = LocalBroker(tmp_path)
    records: list[BrokerRecord] = []

    def ensure() -> None:
        records.append(LocalBroker(tmp_path).ensure()[0])

    threads = [threading.Thread(target=ensure) for _ in range(3)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert len(records) == 3 and len(set(records)) == 1
    finally:
        local.stop()


def test_a_record_of_a_broker_that_is_gone_is_replaced(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    local = LocalBroker(tmp_path)
    for pid in (dead.pid, 0, -1, 1):  # gone, or a damaged record naming a process group, every process, init
        (tmp_path / RECORD_FILE).write_text(json.dumps(
            {"pid": pid, "port": 1, "cluster_id": "streamsql-gone", "started_at": 0.0, "mode": "background"}))
        assert local.find() is None and local.stop() is None
        assert not (tmp_path / RECORD_FILE).exists()
    try:
        record, started = local.ensure()
        assert started and record.pid != dead.pid
    finally:
        local.stop()


_cli = run_streamsql


@pytest.mark.timeout(600)
def test_produce_then_run_then_shell_see_the_same_topics(tmp_path: Path) -> None:
    """The README's commands, as three separate processes with no Kafka flags: what ``produce``
    writes, ``run`` reads, and the shell sees both the catalog ``run`` built and its output."""
    local = LocalBroker(tmp_path / ".streamsql")  # the commands' default data directory
    try:
        produced = _cli("produce", "payments", "--topic", "payments", "--count", "300", cwd=tmp_path)
        assert produced.returncode == 0, produced.stderr
        assert "started the local broker" in produced.stderr
        record = local.find()
        assert record is not None

        admin = KafkaAdmin(record.bootstrap_servers)
        payments = {r.key.decode(): json.loads(r.value) for r in admin.read_all("payments")}
        assert len(payments) == 300
        flagged = {k for k, p in payments.items() if p["fraudProbability"] > 0.8}
        expected = len(flagged)
        assert expected > 0

        ran = _cli("run", str(PIPELINES_DIR / "fraud_filter.sql"), "--until-idle", "--no-progress", cwd=tmp_path)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert f"using the local broker of {tmp_path / '.streamsql'} at {record.bootstrap_servers}" in ran.stderr
        assert len(admin.read_all("FRAUDULENT_PAYMENTS")) == expected

        shell = _cli("shell", "--embedded", "-e", "SHOW QUERIES; PRINT 'FRAUDULENT_PAYMENTS' FROM BEGINNING LIMIT 2;",
                     cwd=tmp_path)
        assert shell.returncode == 0, shell.stdout + shell.stderr
        assert "CSAS_FRAUDULENT_PAYMENTS" in shell.stdout
        printed = re.findall(r"key: (pay-\d+), value: .*FRAUDPROBABILITY", shell.stdout)
        assert len(printed) == 2 and set(printed) <= flagged, shell.stdout
        assert "new Kafka cluster" not in shell.stderr  # the catalog was not reset
        admin.close()

        status = _cli("broker", "status", cwd=tmp_path)
        assert status.returncode == 0 and f"pid {record.pid}" in status.stdout
        stopped = _cli("broker", "stop", cwd=tmp_path)
        assert stopped.returncode == 0 and f"pid {record.pid}" in stopped.stdout
        assert not _alive(record.pid)
        assert _cli("broker", "status", cwd=tmp_path).returncode == 1

        # the next command starts the broker again on the same topics: the catalog is kept
        after = _cli("shell", "--embedded", "-e", "SHOW STREAMS;", cwd=tmp_path)
        assert after.returncode == 0, after.stderr
        assert "new Kafka cluster" not in after.stderr
        assert "FRAUDULENT_PAYMENTS" in after.stdout and "PAYMENTS" in after.stdout
    finally:
        local.stop()


@pytest.mark.timeout(600)
def test_the_demo_run_twice_reuses_its_payments_and_query(tmp_path: Path) -> None:
    """The README's main job on the local broker: a second ``streamsql demo`` finds the first
    one's payments and resumes its query instead of doubling the input."""
    local = LocalBroker(tmp_path / ".streamsql")
    try:
        first = _cli("demo", "--count", "300", cwd=tmp_path)
        assert first.returncode == 0, first.stdout + first.stderr
        record = local.find()
        assert record is not None
        admin = KafkaAdmin(record.bootstrap_servers)
        flagged = sum(1 for r in admin.read_all("payments") if json.loads(r.value)["fraudProbability"] > 0.8)
        admin.close()
        line = f"fraudulent_payments: {flagged} of 300 payments flagged"
        assert line in first.stdout

        second = _cli("demo", "--count", "300", cwd=tmp_path)
        assert second.returncode == 0, second.stdout + second.stderr
        assert "topic 'payments' already holds 300 payments; producing none" in second.stdout
        assert "Restored 2 source(s) and 1 persistent query(ies)" in second.stderr
        assert line in second.stdout
    finally:
        local.stop()


def _wait(condition, timeout_s: float = 20.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_foreground_broker_leaves_no_process_behind(tmp_path: Path, sig: signal.Signals) -> None:
    """``streamsql broker`` in the foreground, stopped as docker/systemd stop it, or killed: its
    tansu process goes with it (the kernel kills it on kill -9), and the data directory's record
    never points at a broker that is gone."""
    port = free_port()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))
    proc = subprocess.Popen([sys.executable, "-m", "streamsql", "broker", "--port", str(port), "--data-dir",
                             str(tmp_path)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    local = LocalBroker(tmp_path)
    try:
        assert _wait(lambda: local.find() is not None), proc.communicate(timeout=5)
        record = local.find()
        assert record is not None and record.mode == "foreground" and record.port == port
        proc.send_signal(sig)
        proc.wait(timeout=15)
        assert _wait(lambda: not _alive(record.pid), 10), f"tansu {record.pid} outlived its command"
        assert _wait(lambda: not _alive(record.store_pid), 10), f"its store {record.store_pid} outlived it"
        assert local.find() is None
        if sig == signal.SIGTERM:
            assert proc.returncode == 0 and not (tmp_path / RECORD_FILE).exists()
    finally:
        if proc.poll() is None:
            proc.kill()
        local.stop()


def test_broker_commands_find_the_data_directory_of_the_config_file(tmp_path: Path) -> None:
    """``streamsql broker start|status|stop`` resolve the data directory as the other commands do
    (here ``streamsql.data.dir`` of ./streamsql.properties), so stop finds what run started."""
    (tmp_path / "streamsql.properties").write_text("streamsql.data.dir=elsewhere\n")
    local = LocalBroker(tmp_path / "elsewhere")
    try:
        started = _cli("broker", "start", cwd=tmp_path)
        assert started.returncode == 0 and "started the local broker" in started.stdout, started.stderr
        record = local.find()
        assert record is not None and record.mode == "background"
        assert _cli("broker", "status", cwd=tmp_path).returncode == 0
        stopped = _cli("broker", "stop", cwd=tmp_path)
        assert stopped.returncode == 0 and f"pid {record.pid}" in stopped.stdout
        assert _wait(lambda: not _alive(record.pid), 10)
    finally:
        local.stop()
