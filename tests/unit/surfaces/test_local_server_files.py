"""The local server's files (surfaces/local_server.py): its credential, readable by its owner
alone, and the engine flags a shell starts it with."""

from __future__ import annotations

import argparse
import stat
from pathlib import Path

import pytest

from streamsql.surfaces.local_server import USER, LocalServer, LocalServerError, engine_args


def test_the_credential_is_made_once_with_mode_0600_and_refused_when_others_may_read_it(tmp_path: Path) -> None:
    local = LocalServer(tmp_path / "data")
    user, password = local.credentials()
    assert user == USER and len(password) >= 24
    assert stat.S_IMODE(local.credentials_path.stat().st_mode) == 0o600
    assert local.credentials() == (user, password)  # kept, not made anew
    local.credentials_path.chmod(0o644)
    with pytest.raises(LocalServerError, match=r"may be read by other users \(mode 644\); `chmod 600 "):
        local.credentials()


def test_no_server_is_found_where_none_was_started(tmp_path: Path) -> None:
    local = LocalServer(tmp_path)
    assert local.find() is None and local.stop() is None
    local.record_path.write_text('{"pid": 1, "port": 1, "started_at": 0}')  # init: never taken for it
    assert local.find() is None and not local.record_path.exists()


def test_engine_args_carry_the_shells_engine_flags(tmp_path: Path) -> None:
    config = tmp_path / "streamsql.properties"
    args = argparse.Namespace(bootstrap_servers="kafka:9092", config=str(config), spark_master=None,
                              conf=["spark.executor.memory=2g"], kafka_property=["security.protocol=SSL"],
                              spark_ui=True)
    assert engine_args(args) == ["--bootstrap-servers", "kafka:9092", "--config", str(config.resolve()),
                                 "--conf", "spark.executor.memory=2g", "--kafka-property", "security.protocol=SSL",
                                 "--spark-ui"]
