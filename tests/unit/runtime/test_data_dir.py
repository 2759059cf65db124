"""The engine's claim on its data directory (runtime/data_dir.py, issue #18 item 6) without a
broker: the lock between processes, and which cluster changes reset state and which refuse."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streamsql.errors import DataDirError
from streamsql.runtime.data_dir import CLUSTER_FILE, DataDirLock, check_cluster, record_cluster, reset_state

HOLD = """
import sys, time
from pathlib import Path
from streamsql.runtime.data_dir import DataDirLock
DataDirLock(Path(sys.argv[1])).acquire()
print("held", flush=True)
time.sleep(120)
"""


def _holding_process(directory: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(directory)], stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[3])))
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_claim_names_the_holder_and_the_way_out(tmp_path: Path) -> None:
    holder = _holding_process(tmp_path)
    try:
        with pytest.raises(DataDirError) as refused:
            DataDirLock(tmp_path).acquire()
        message = str(refused.value)
        assert f"the data directory {tmp_path} is in use by another streamsql engine (pid {holder.pid}, " in message
        assert "`streamsql server start`" in message and "watch it with `streamsql shell`" in message
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
    # killed: the kernel released its lock, the directory is free
    claim = DataDirLock(tmp_path)
    claim.acquire()
    assert claim.held
    claim.release()


def test_one_process_cannot_run_two_engines_on_one_directory(tmp_path: Path) -> None:
    first, second = DataDirLock(tmp_path), DataDirLock(tmp_path)
    first.acquire()
    with pytest.raises(DataDirError, match=rf"in use by another streamsql engine \(pid {os.getpid()}, "):
        second.acquire()
    first.release()
    second.acquire()  # released: the next one may have it
    second.release()


def _record(directory: Path, **fields: object) -> None:
    (directory / CLUSTER_FILE).write_text(json.dumps(fields))


def test_state_of_an_in_memory_broker_is_reset_with_a_notice(tmp_path: Path) -> None:
    record_cluster(tmp_path, "old", "127.0.0.1:40000", ephemeral=True)
    notice = check_cluster(tmp_path, "new", "127.0.0.1:40001")
    assert notice is not None and notice.startswith("new Kafka cluster new (was old: its topics are gone")
    assert check_cluster(tmp_path, "old", "127.0.0.1:40000") is None  # same cluster: nothing to say


def test_state_of_another_real_cluster_is_never_deleted(tmp_path: Path) -> None:
    record_cluster(tmp_path, "prod", "kafka.example:9092", ephemeral=False)
    with pytest.raises(DataDirError) as refused:
        check_cluster(tmp_path, "laptop", "127.0.0.1:9092")
    assert str(refused.value) == (
        f"the data directory {tmp_path} holds the catalog and query checkpoints of Kafka cluster prod at "
        f"kafka.example:9092, and 127.0.0.1:9092 is cluster laptop; nothing was changed. Use another --data-dir "
        f"for this cluster, or, to start this one afresh here, delete {tmp_path / 'commands.jsonl'}, "
        f"{tmp_path / 'checkpoints'}, {tmp_path / 'tables'} and {tmp_path / CLUSTER_FILE}.")
    assert json.loads((tmp_path / CLUSTER_FILE).read_text())["cluster_id"] == "prod"


def test_a_reset_deletes_checkpoints_and_table_stores_and_nothing_else(tmp_path: Path) -> None:
    """A new cluster's empty catalog must not find the old cluster's table stores (a pull query
    would answer with their rows): both per-name areas go, the rest of the directory stays."""
    for area in ("checkpoints/CTAS_T_1/state", "tables"):
        (tmp_path / area).mkdir(parents=True)
    (tmp_path / "tables" / "T.sqlite").write_text("rows")
    (tmp_path / "files").mkdir()
    record_cluster(tmp_path, "old", "127.0.0.1:1", ephemeral=True)
    reset_state(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [CLUSTER_FILE, "files"]


def test_a_record_from_before_the_rule_resets_as_it_did(tmp_path: Path) -> None:
    _record(tmp_path, cluster_id="old")
    assert check_cluster(tmp_path, "new", "127.0.0.1:1") is not None
    (tmp_path / CLUSTER_FILE).write_text("{damaged")
    assert check_cluster(tmp_path, "new", "127.0.0.1:1") is None


def test_release_empties_the_holder_note(tmp_path: Path) -> None:
    claim = DataDirLock(tmp_path)
    claim.acquire()
    info = json.loads((tmp_path / "engine.lock").read_text())
    assert info["pid"] == os.getpid() and time.strptime(info["since"], "%Y-%m-%d %H:%M:%S")
    claim.release()
    assert (tmp_path / "engine.lock").read_text() == ""
