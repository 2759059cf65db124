"""`streamsql run` as a user runs it: a real process, a real broker, a data directory that
survives between runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamsql.kafka.admin import KafkaAdmin
from streamsql.kafka.broker import LocalBroker

pytestmark = pytest.mark.integration


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    return subprocess.run([sys.executable, "-m", "streamsql", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_rerun_resumes_from_checkpoint_without_loss_or_duplicates(bootstrap, topic_name, tmp_path):  # type: ignore[no-untyped-def]
    src, sink = topic_name("orders"), topic_name("BIG_ORDERS").upper()
    script = tmp_path / "pipeline.sql"
    script.write_text(f"""
        SET 'auto.offset.reset' = 'earliest';
        CREATE STREAM orders (id VARCHAR KEY, qty INT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=2);
        CREATE STREAM big_orders WITH (KAFKA_TOPIC='{sink}') AS SELECT id, qty FROM orders WHERE qty >= 10;
    """)
    admin = KafkaAdmin(bootstrap)
    admin.create_topic(src, 2)

    def produce(start: int, end: int) -> None:
        for i in range(start, end):
            admin.produce(src, f"o{i}".encode(), json.dumps({"qty": i % 20}).encode(), 1000 + i, flush=False)
        admin.flush()

    produce(0, 60)
    first = run_cli("run", str(script), "--until-idle", "--bootstrap-servers", bootstrap,
                    "--data-dir", str(tmp_path / "state"), cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    assert len(admin.read_all(sink)) == 30

    produce(60, 100)
    second = run_cli("run", str(script), "--until-idle", "--bootstrap-servers", bootstrap,
                     "--data-dir", str(tmp_path / "state"), cwd=tmp_path)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "unchanged" in second.stdout
    keys = [r.key.decode() for r in admin.read_all(sink)]
    assert len(keys) == len(set(keys)) == 50
    assert set(keys) == {f"o{i}" for i in range(100) if i % 20 >= 10}


def test_parse_error_reports_line_and_column_and_exits_nonzero(bootstrap, tmp_path):  # type: ignore[no-untyped-def]
    script = tmp_path / "bad.sql"
    script.write_text("SHOW STREAMS;\nCREATE STREAM s (a INT) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='JSON')\n  SELEKT;\n")
    proc = run_cli("run", str(script), "--until-idle", "--bootstrap-servers", bootstrap,
                   "--data-dir", str(tmp_path / "state"), cwd=tmp_path)
    assert proc.returncode == 1
    assert "line 3:" in proc.stdout


def test_embedded_broker_when_no_bootstrap_servers(tmp_path):  # type: ignore[no-untyped-def]
    script = tmp_path / "p.sql"
    script.write_text("""
        CREATE STREAM s (k VARCHAR KEY, n INT) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON', PARTITIONS=1);
        INSERT INTO s (k, n) VALUES ('a', 1);
        SHOW TOPICS;
    """)
    env = {k: v for k, v in os.environ.items() if k != "STREAMSQL_BOOTSTRAP_SERVERS"}
    try:
        proc = subprocess.run([sys.executable, "-m", "streamsql", "run", str(script), "--until-idle",
                               "--data-dir", str(tmp_path / "state")], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"started the local broker of {tmp_path / 'state'}" in proc.stderr
        assert "| s " in proc.stdout
    finally:
        stopped = LocalBroker(tmp_path / "state").stop()
    assert stopped is not None  # it was left running for the next command
