"""``streamsql run``: the progress display's last line shows each query's batches and a lag of
0 after ``--until-idle``; a metrics port already in use is a clear error, not a traceback."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from streamsql.surfaces.cli import main

from tests.integration.test_engine import produce

pytestmark = pytest.mark.integration


def test_progress_shows_batches_and_lag_zero_after_until_idle(bootstrap, spark, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                              topic_name, capsys) -> None:
    from streamsql.kafka.admin import KafkaAdmin

    src = topic_name("prog")
    admin = KafkaAdmin(bootstrap)
    admin.create_topic(src, 2)
    produce(admin, src, [(f"k{i}", f'{{"v":{i}}}', i) for i in range(12)])
    admin.close()
    script = tmp_path / "p.sql"
    script.write_text(f"SET 'auto.offset.reset'='earliest';\n"
                      f"CREATE STREAM prog (id VARCHAR KEY, v INT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON');\n"
                      f"CREATE STREAM prog_out AS SELECT id, v FROM prog;\n")
    assert main(["run", str(script), "--until-idle", "--progress", "--bootstrap-servers", bootstrap,
                 "--data-dir", str(tmp_path / "data")]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("progress: ")]
    assert lines, "no progress line"
    assert lines[-1].startswith("progress: CSAS_PROG_OUT_1 RUNNING batch ") and lines[-1].endswith(", lag 0")


def test_metrics_port_in_use_is_named(bootstrap, spark, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    script = tmp_path / "p.sql"
    script.write_text("SHOW STREAMS;\n")
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = main(["run", str(script), "--until-idle", "--bootstrap-servers", bootstrap,
                     "--data-dir", str(tmp_path / "data"), "--metrics-port", str(port)])
    assert code == 1
    assert f"--metrics-port {port}: cannot listen on 0.0.0.0:{port}" in capsys.readouterr().err
