"""Crash drills at scale (issue #18 item 3): ``kill -9`` of ``streamsql run`` and of
``streamsql server`` at random moments while three queries process 200k records — a stream
filter, an aggregation and a stream-table join — restarted on the same data directory each time,
under ``at_least_once`` and ``exactly_once_v2``.

Checked after the last restart, against what is computed here from the seeded input:

* nothing lost: every filtered record and every joined record is in its output topic, and the
  table's last value per key and its pull query are exact;
* nothing duplicated under ``exactly_once_v2``: no record twice, no update of a key repeated
  (under ``at_least_once`` the repeats a replayed batch writes are counted and reported).

Outputs are read as the broker stores them with the transaction markers applied
(tests/support/committed_log.py; tansu gives ``read_committed`` consumers aborted records too).
Each drill takes minutes: ``python -m benchmarks.drills -k crash_drill`` runs them; the figures
go to docs/reliability.md. ``STREAMSQL_DRILL_RECORDS`` makes a quicker, smaller run.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from streamsql.kafka.admin import KafkaAdmin
from streamsql.kafka.broker import free_port
from streamsql.runtime.config import EngineConfig
from streamsql.runtime.engine import Engine
from tests.integration.test_crash_recovery import _commits, _kill_session, _wait_for_commit
from tests.support.committed_log import read_committed

pytestmark = pytest.mark.integration

SEED = 20261127
RECORDS = int(os.environ.get("STREAMSQL_DRILL_RECORDS", "200000"))
USERS = 97
REGIONS = ("north", "south", "east", "west", "centre")
KILLS = 3
CHUNKS = KILLS + 2  # one before the first run, one during each killed run, one before the last
BATCH = max(RECORDS // 20, 500)  # ksql.streams.max.records.per.batch: many batches to die in
STREAMSQL = Path(sys.executable).with_name("streamsql")


def _user(i: int) -> str:
    return f"u{i:03d}"


def _inputs() -> list[tuple[bytes, bytes, int]]:
    """(key = user, JSON value with a unique id, timestamp) of every payment."""
    rng = random.Random(SEED)
    out = []
    for i in range(RECORDS):
        amount = rng.randrange(-50_000, 5_000_000_000)
        out.append((_user(rng.randrange(USERS)).encode(), json.dumps({"id": i, "amount": amount}).encode(),
                    1_700_000_000_000 + i))
    return out


def _statements(topics: dict[str, str]) -> list[str]:
    return [
        f"CREATE STREAM pay (user VARCHAR KEY, id BIGINT, amount BIGINT) "
        f"WITH (KAFKA_TOPIC='{topics['pay']}', VALUE_FORMAT='JSON', PARTITIONS=2);",
        f"CREATE TABLE users (user VARCHAR PRIMARY KEY, region VARCHAR) "
        f"WITH (KAFKA_TOPIC='{topics['users']}', VALUE_FORMAT='JSON', PARTITIONS=2);",
        f"CREATE STREAM kept WITH (KAFKA_TOPIC='{topics['kept']}') AS "
        f"SELECT user, id, amount FROM pay WHERE amount % 3 <> 0;",
        f"CREATE TABLE totals WITH (KAFKA_TOPIC='{topics['totals']}') AS "
        f"SELECT user, COUNT(*) AS n, SUM(amount) AS total FROM pay GROUP BY user;",
        f"CREATE STREAM enriched WITH (KAFKA_TOPIC='{topics['enriched']}') AS "
        f"SELECT p.user AS user, p.id AS id, u.region AS region FROM pay p JOIN users u ON p.user = u.user;",
    ]


@dataclass
class Figures:
    mode: str
    guarantee: str
    records: int = RECORDS
    kills: list[dict[str, float]] = field(default_factory=list)
    outputs: dict[str, dict[str, int]] = field(default_factory=dict)
    final_seconds: float = 0.0


class Drill:
    """One drill's engine, started as a user would: ``streamsql run FILE`` or ``streamsql
    server`` (the statements sent once over REST; a restart resumes them from its command log)."""

    def __init__(self, mode: str, guarantee: str, bootstrap: str, root: Path, topics: dict[str, str]) -> None:
        self.mode, self.guarantee, self.bootstrap, self.root = mode, guarantee, bootstrap, root
        self.data_dir = root / "state"
        self.properties = {"auto.offset.reset": "earliest", "ksql.streams.max.records.per.batch": str(BATCH),
                           "processing.guarantee": guarantee}
        self.statements = _statements(topics)
        self.script = root / "drill.sql"
        self.script.write_text("".join(f"SET '{k}'='{v}';\n" for k, v in self.properties.items())
                               + "\n".join(self.statements) + "\n")
        self.port = free_port()
        scratch = root / "tmp"  # what a killed Spark leaves behind stays in the drill's directory
        scratch.mkdir(exist_ok=True)
        self.env = dict(os.environ, PYSPARK_PYTHON=sys.executable, TMPDIR=str(scratch), SPARK_LOCAL_DIRS=str(scratch))
        self.submitted = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, log: Path, until_idle: bool = False) -> subprocess.Popen[bytes]:
        common = ["--bootstrap-servers", self.bootstrap, "--data-dir", str(self.data_dir)]
        if self.mode == "run":
            args = [str(STREAMSQL), "run", str(self.script), *common, *(["--until-idle"] if until_idle else [])]
        else:
            args = [str(STREAMSQL), "server", "--port", str(self.port), *common]
        with log.open("wb") as out:
            proc = subprocess.Popen(args, cwd=self.root, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        if self.mode == "server":
            self._wait_for_server(proc, log)
            if not self.submitted:
                with httpx.Client(base_url=self.url, timeout=300) as client:
                    for text in self.statements:
                        resp = client.post("/ksql", json={"ksql": text, "streamsProperties": self.properties})
                        assert resp.status_code == 200, resp.text
                self.submitted = True
        return proc

    def _wait_for_server(self, proc: subprocess.Popen[bytes], log: Path, timeout_s: float = 300) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise AssertionError(f"server exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(self.url + "/info", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise AssertionError(f"server not answering after {timeout_s}s:\n{log.read_text()[-3000:]}")

    def pull_totals(self, spark: object) -> list[list[object]]:
        """The table's pull query: through the server (server mode), else an engine on the run's
        data directory (as the next ``streamsql run`` or shell would read it)."""
        text = "SELECT user, n, total FROM totals;"
        if self.mode == "server":
            resp = httpx.post(self.url + "/query", json={"ksql": text}, timeout=300)
            assert resp.status_code == 200, resp.text
            return sorted(e["row"]["columns"] for e in resp.json() if "row" in e)
        engine = Engine(EngineConfig(self.bootstrap, self.data_dir), spark=spark)
        try:
            engine.start()
            [pull] = engine.execute(text)
            return sorted(pull.rows(timeout=120))
        finally:
            engine.close()


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-3000:]


def _outputs(bootstrap: str, topics: dict[str, str]) -> dict[str, list[tuple[bytes | None, dict[str, object]]]]:
    """Each output topic's records (both partitions) as read_committed must read them."""
    out: dict[str, list[tuple[bytes | None, dict[str, object]]]] = {}
    for name in ("kept", "totals", "enriched"):
        rows = []
        for partition in (0, 1):
            rows += [(k, json.loads(v)) for _, k, v in read_committed(bootstrap, topics[name], partition)
                     if v is not None]
        out[name] = rows
    return out


@pytest.mark.drill  # minutes each: `python -m benchmarks.drills -k crash_drill`
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
@pytest.mark.parametrize("mode", ["run", "server"])
def test_crash_drill(mode: str, guarantee: str, bootstrap: str, spark, topic_name,  # type: ignore[no-untyped-def]
                     tmp_path: Path) -> None:
    topics = {name: topic_name(f"drill_{name}") for name in ("pay", "users", "kept", "totals", "enriched")}
    records = _inputs()
    admin = KafkaAdmin(bootstrap)
    admin.create_topic(topics["pay"], 2)
    admin.create_topic(topics["users"], 2)
    for u in range(USERS):  # the table is there before any payment
        admin.produce(topics["users"], _user(u).encode(), json.dumps({"region": REGIONS[u % 5]}).encode(),
                      1_600_000_000_000, flush=False)
    admin.flush()
    chunk = -(-RECORDS // CHUNKS)

    def produce(part: int) -> None:
        for key, value, ts in records[part * chunk:(part + 1) * chunk]:
            admin.produce(topics["pay"], key, value, ts, flush=False)
        admin.flush()

    drill = Drill(mode, guarantee, bootstrap, tmp_path, topics)
    figures = Figures(mode, guarantee)
    rng = random.Random(f"{SEED}-{mode}-{guarantee}")
    produce(0)
    for run in range(KILLS):
        log = tmp_path / f"run{run}.log"
        before = _commits(drill.data_dir)
        started = time.monotonic()
        proc = drill.start(log)
        try:
            produce(run + 1)  # more input arrives while it runs
            _wait_for_commit(drill.data_dir, before, proc, log, timeout=300)  # recovered: a batch committed
            recovered = time.monotonic() - started
            delay = rng.uniform(2.0, 12.0)
            time.sleep(delay)
            assert proc.poll() is None, f"{mode} {run} exited on its own ({proc.returncode}):\n{_tail(log)}"
        finally:
            alive = _kill_session(proc)
        assert any("java" in cmd for cmd in alive.values()), alive
        figures.kills.append({"first_commit_s": round(recovered, 1), "killed_after_s": round(delay, 1),
                              "batches_committed": _commits(drill.data_dir)})
    produce(KILLS + 1)

    expected_kept = {i for i, (_, v, _) in enumerate(records) if json.loads(v)["amount"] % 3 != 0}
    expected_totals: dict[str, dict[str, int]] = {}
    for key, value, _ in records:
        t = expected_totals.setdefault(key.decode(), {"N": 0, "TOTAL": 0})
        t["N"] += 1
        t["TOTAL"] += json.loads(value)["amount"]
    started = time.monotonic()
    final_log = tmp_path / "final.log"
    final = drill.start(final_log, until_idle=True)
    try:
        if mode == "run":
            assert final.wait(timeout=1200) == 0, final_log.read_text()[-3000:]
            outputs = _outputs(bootstrap, topics)
        else:
            deadline = time.monotonic() + 1200
            while True:
                outputs = _outputs(bootstrap, topics)
                kept = {v["ID"] for _, v in outputs["kept"]}
                joined = {v["ID"] for _, v in outputs["enriched"]}
                last = {k.decode(): v for k, v in outputs["totals"] if k is not None}
                if kept >= expected_kept and len(joined) == RECORDS and last == expected_totals:
                    break
                assert time.monotonic() < deadline, (len(kept), len(joined), len(last))
                time.sleep(5)
        figures.final_seconds = round(time.monotonic() - started, 1)
        pulled = drill.pull_totals(spark)
    finally:
        if mode == "server":
            _kill_session(final)

    kept_ids = [v["ID"] for _, v in outputs["kept"]]
    joined = [(k.decode() if k else None, v["ID"], v["REGION"]) for k, v in outputs["enriched"]]
    updates = [(k.decode() if k else "", v["N"]) for k, v in outputs["totals"]]
    last: dict[str, dict[str, int]] = {}
    for k, v in outputs["totals"]:
        last[k.decode() if k else ""] = {"N": int(v["N"]), "TOTAL": int(v["TOTAL"])}
    figures.outputs = {
        "kept": {"expected": len(expected_kept), "out": len(kept_ids), "lost": len(expected_kept - set(kept_ids)),
                 "duplicated": len(kept_ids) - len(set(kept_ids))},
        "enriched": {"expected": RECORDS, "out": len(joined), "lost": RECORDS - len({j[1] for j in joined}),
                     "duplicated": len(joined) - len({j[1] for j in joined})},
        "totals": {"expected_keys": len(expected_totals), "updates": len(updates),
                   "repeated_updates": len(updates) - len(set(updates)),
                   "wrong_keys": sum(1 for u, t in expected_totals.items() if last.get(u) != t)},
    }
    print("DRILL", json.dumps(figures.__dict__))
    user_of = {i: records[i][0].decode() for i in range(RECORDS)}
    assert set(kept_ids) == expected_kept
    assert {i for _, i, _ in joined} == set(range(RECORDS))
    assert all(user == user_of[i] and region == REGIONS[int(user[1:]) % 5] for user, i, region in joined)
    assert last == expected_totals
    assert pulled == [[u, t["N"], t["TOTAL"]] for u, t in sorted(expected_totals.items())]
    if guarantee == "exactly_once_v2":
        assert figures.outputs["kept"]["duplicated"] == 0
        assert figures.outputs["enriched"]["duplicated"] == 0
        assert figures.outputs["totals"]["repeated_updates"] == 0
