"""Crash recovery of an aggregation, as a user would see it: ``streamsql run`` is killed with
SIGKILL (the runner, its Spark JVM and Spark's Python workers, all at once) three times at
random moments while it aggregates, restarted on the same data directory each time, and finally
run with ``--until-idle``. The aggregation state lives in Spark's RocksDB state store and is
committed with the source offsets; the Kafka sink is at-least-once with deterministic replay, so
the output topic may hold repeated updates, but the last value of every key must be exact, and
a pull query (the SQLite store that follows the changelog topic) must return the same rows.

Deterministic: the input comes from a seeded generator and the kill delays from
``random.Random(SEED)``; the expected counts and sums are computed here, independently of the
engine."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streamsql.kafka.admin import KafkaAdmin
from streamsql.runtime.config import EngineConfig
from streamsql.runtime.engine import Engine

pytestmark = pytest.mark.integration

SEED = 20240611
RECORDS = 60_000
CHUNKS = 5  # one before the first run, one during each killed run, one before the last run
USERS = 97
KILLS = 3
BATCH = 2000  # ksql.streams.max.records.per.batch: many micro-batches, many places to die in
STREAMSQL = Path(sys.executable).with_name("streamsql")


def _inputs() -> list[tuple[bytes, bytes, int]]:
    """(key, JSON value, timestamp) of every input record; amounts large enough that the sums
    need BIGINT and negative ones so that a lost or repeated record cannot cancel out easily."""
    rng = random.Random(SEED)
    out = []
    for i in range(RECORDS):
        user = f"u{rng.randrange(USERS):03d}"
        amount = rng.randrange(-50_000, 5_000_000_000)
        out.append((f"r{i}".encode(), json.dumps({"user": user, "amount": amount}).encode(), 1_700_000_000_000 + i))
    return out


def _expected(records: list[tuple[bytes, bytes, int]]) -> dict[str, dict[str, int]]:
    totals: dict[str, dict[str, int]] = {}
    for _, value, _ in records:
        v = json.loads(value)
        t = totals.setdefault(v["user"], {"N": 0, "TOTAL": 0})
        t["N"] += 1
        t["TOTAL"] += v["amount"]
    return totals


def _session_processes(sid: int) -> dict[int, str]:
    """Live processes of session ``sid`` (a runner started with start_new_session=True and every
    process it started, even those that moved to their own process group like PySpark's worker
    daemon): pid -> command line."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        state, session = fields[0], int(fields[3])
        if session == sid and state != "Z":
            out[int(entry)] = cmdline.strip()
    return out


def _kill_session(proc: subprocess.Popen, timeout: float = 30.0) -> dict[int, str]:
    """SIGKILL the runner's process group, then anything else of its session; returns what was
    alive at the moment of the kill. Raises if something of the session is still alive after
    ``timeout``."""
    alive = _session_processes(proc.pid)
    groups = {proc.pid}  # the runner's group: its JVM and everything that did not move away
    for pid in alive:
        try:
            groups.add(os.getpgid(pid))  # e.g. PySpark's worker daemon, which makes its own group
        except ProcessLookupError:
            pass
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(timeout=timeout)
    deadline = time.monotonic() + timeout
    left = _session_processes(proc.pid)
    while left and time.monotonic() < deadline:
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.2)
        left = _session_processes(proc.pid)
    assert not left, f"processes of the killed runner still alive: {left}"
    return alive


def _commits(data_dir: Path) -> int:
    """Micro-batches the aggregation has committed (Spark's checkpoint: one file per batch in
    ``commits/``; a batch's state and source offsets are committed together)."""
    ids = [int(f.name) for d in data_dir.glob("checkpoints/*/commits") for f in d.iterdir() if f.name.isdigit()]
    return max(ids) + 1 if ids else 0


def _wait_for_commit(data_dir: Path, before: int, proc: subprocess.Popen, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while _commits(data_dir) <= before:
        if proc.poll() is not None:
            raise AssertionError(f"runner exited ({proc.returncode}) before committing a batch:\n{log.read_text()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"runner committed no batch within {timeout}s:\n{log.read_text()}")
        time.sleep(0.1)


# its own waits (3 x 240 s for a commit, 600 s for the final run) are the bounds; pytest's default 600 s
# cut it off on a contended machine while the final run was still catching up
@pytest.mark.drill  # minutes: run by `python -m benchmarks.drills`, not the suite
@pytest.mark.timeout(1800)
def test_sigkilled_aggregation_recovers_exact_table(bootstrap, spark, topic_name, tmp_path):  # type: ignore[no-untyped-def]
    src, sink = topic_name("crash_in"), topic_name("CRASH_TOTALS").upper()
    data_dir = tmp_path / "state"
    script = tmp_path / "totals.sql"
    script.write_text(f"""
        SET 'auto.offset.reset'='earliest';
        SET 'ksql.streams.max.records.per.batch'='{BATCH}';
        CREATE STREAM s (user VARCHAR, amount BIGINT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=2);
        CREATE TABLE totals WITH (KAFKA_TOPIC='{sink}') AS
            SELECT user, COUNT(*) AS n, SUM(amount) AS total FROM s GROUP BY user EMIT CHANGES;
    """)
    records = _inputs()
    expected = _expected(records)
    assert sum(t["N"] for t in expected.values()) == RECORDS and len(expected) == USERS
    admin = KafkaAdmin(bootstrap)
    admin.create_topic(src, 2)
    chunk = RECORDS // CHUNKS

    def produce(part: int) -> None:
        for key, value, ts in records[part * chunk:(part + 1) * chunk]:
            admin.produce(src, key, value, ts, flush=False)
        admin.flush()

    scratch = tmp_path / "tmp"  # what a killed Spark leaves behind stays in the test's directory
    scratch.mkdir()
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, TMPDIR=str(scratch), SPARK_LOCAL_DIRS=str(scratch))
    args = [str(STREAMSQL), "run", str(script), "--bootstrap-servers", bootstrap, "--data-dir", str(data_dir)]
    rng = random.Random(SEED)
    produce(0)
    kills = []  # (delay after the run's first commit, batches committed when killed)
    for run in range(KILLS):
        log = tmp_path / f"run{run}.log"
        before = _commits(data_dir)
        with log.open("wb") as out:
            proc = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        try:
            # more input arrives as the query starts: the run's first commit needs records it has
            # not read yet (a run that found none would never commit: an aggregation without a
            # window runs no empty batches), and a fast run may have read everything before
            produce(run + 1)
            # processing: this run has committed a batch (so the next one restores real state)
            _wait_for_commit(data_dir, before, proc, log, timeout=240)
            delay = rng.uniform(3.0, 15.0)
            time.sleep(delay)
            assert proc.poll() is None, f"runner {run} exited on its own ({proc.returncode}):\n{log.read_text()}"
        finally:
            alive = _kill_session(proc)
        # the kill hit the whole Spark process tree (the runner and its JVM at least)
        assert any("java" in cmd for cmd in alive.values()), alive
        kills.append((round(delay, 1), _commits(data_dir)))
    produce(KILLS + 1)  # and some while nothing runs
    assert (KILLS + 2) * chunk == RECORDS

    final_log = tmp_path / "final.log"
    with final_log.open("wb") as out:
        final = subprocess.Popen([*args, "--until-idle"], cwd=tmp_path, env=env, stdout=out,
                                 stderr=subprocess.STDOUT, start_new_session=True)
    try:
        code = final.wait(timeout=600)
        assert code == 0, final_log.read_text()
        # a clean exit leaves nothing of its Spark behind
        deadline = time.monotonic() + 30
        while _session_processes(final.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _session_processes(final.pid), _session_processes(final.pid)
    finally:
        _kill_session(final)
    # every run resumed from the previous one's checkpoint (none started afresh) and progressed
    commits = [c for _, c in kills] + [_commits(data_dir)]
    assert all(a < b for a, b in zip(commits, commits[1:])), kills

    changelog = [(rec.key.decode(), json.loads(rec.value) if rec.value is not None else None)
                 for rec in admin.read_all(sink)]
    latest: dict[str, dict[str, int]] = {}
    by_count: dict[tuple[str, int], dict[str, int]] = {}
    for key, value in changelog:
        assert value is not None, key  # an aggregation over a stream never deletes a key
        # replays repeat updates but never go back: counts only grow, per key in topic order
        assert key not in latest or value["N"] >= latest[key]["N"], (key, latest.get(key), value)
        # and a replayed batch repeats exactly what it wrote before the crash (deterministic)
        assert by_count.setdefault((key, value["N"]), value) == value, (key, by_count[(key, value["N"])], value)
        latest[key] = value
    assert latest == expected
    repeated = len(changelog) - len(by_count)
    print(f"kills (delay s, batches committed): {kills}; batches {commits[-1]}, output records {len(changelog)}, "
          f"repeated updates {repeated}")

    # a pull query: the table's store follows the changelog topic
    engine = Engine(EngineConfig(bootstrap, data_dir), spark=spark)
    try:
        engine.start()
        [pull] = engine.execute("SELECT user, n, total FROM totals;")
        rows = sorted(pull.rows(timeout=120))
    finally:
        engine.close()
    assert rows == [[user, t["N"], t["TOTAL"]] for user, t in sorted(expected.items())]
