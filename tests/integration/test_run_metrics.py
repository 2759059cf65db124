"""``streamsql run --metrics-port``: a port already in use is a clear error, not a traceback."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from streamsql.surfaces.cli import main

pytestmark = pytest.mark.integration


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
