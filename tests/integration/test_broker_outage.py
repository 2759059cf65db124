"""A broker that stops answering (frozen with SIGSTOP, as a long GC pause, a network partition or
a stopped VM looks to a client) while the engine serves a table: pull queries still answer from
the table's store, and an INSERT that cannot be acknowledged says whether it may still be
written. The broker here is the test's own: freezing the session's broker would stall every
other test. The longer drill (queries resuming, nothing lost, the REST server answering) is
``benchmarks/broker_outage.py``."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest

from streamsql.errors import KafkaError
from streamsql.kafka.broker import EmbeddedBroker
from streamsql.runtime.config import EngineConfig
from streamsql.runtime.engine import Engine

pytestmark = pytest.mark.integration


@pytest.fixture
def own_broker() -> Iterator[EmbeddedBroker]:
    broker = EmbeddedBroker().start()
    yield broker
    assert broker.pid is not None
    os.kill(broker.pid, signal.SIGCONT)  # a failed test must not leave it frozen
    broker.stop()
    # the pull queries' cached reader of it is closed with it (it used to retry the gone broker,
    # and log each failure, for the rest of the test session)
    from streamsql.kafka import reading

    assert not [key for key, idle in reading._IDLE.items() if key[0] == broker.bootstrap_servers and idle]


def _pull(engine: Engine, text: str, expected: list[list[object]], timeout_s: float = 60) -> list[list[object]]:
    deadline = time.monotonic() + timeout_s
    while True:
        [result] = engine.execute(text)
        rows = sorted(result.rows(timeout=60))  # type: ignore[attr-defined]
        if rows == expected or time.monotonic() > deadline:
            return rows
        time.sleep(0.5)


def test_a_frozen_broker_leaves_pull_queries_answering_and_inserts_saying_what_happened(  # type: ignore[no-untyped-def]
        own_broker: EmbeddedBroker, spark, tmp_path) -> None:
    engine = Engine(EngineConfig(own_broker.bootstrap_servers, tmp_path / "state"), spark=spark)
    engine.start()
    try:
        engine.execute("SET 'auto.offset.reset'='earliest';")
        engine.execute("CREATE TABLE prices (sku VARCHAR PRIMARY KEY, price INT) "
                       "WITH (KAFKA_TOPIC='prices', VALUE_FORMAT='JSON', PARTITIONS=1);")
        engine.execute("CREATE TABLE priced AS SELECT * FROM prices;")  # queryable
        engine.execute("CREATE TABLE unseen AS SELECT * FROM prices;")  # never pulled from
        engine.execute("INSERT INTO prices (sku, price) VALUES ('a', 1);")
        engine.execute("INSERT INTO prices (sku, price) VALUES ('b', 2);")
        expected = [["a", 1], ["b", 2]]
        assert _pull(engine, "SELECT sku, price FROM priced;", expected) == expected

        assert own_broker.pid is not None
        os.kill(own_broker.pid, signal.SIGSTOP)
        # the store cannot catch up with Kafka: it answers with what it holds (before: an error)
        [result] = engine.execute("SELECT sku, price FROM priced;")
        assert sorted(result.rows(timeout=120)) == expected  # type: ignore[attr-defined]
        # a table whose store never caught up has nothing true to answer with: an error
        with pytest.raises(KafkaError, match="cannot read metadata of topic 'UNSEEN'"):
            engine.execute("SELECT * FROM unseen;")
        # an INSERT not acknowledged says whether its record may still be written
        with pytest.raises(KafkaError, match=r"^1 record\(s\) not acknowledged by Kafka within \d+s; "
                                             r"(1 withdrawn|1 already sent may still be written when Kafka "
                                             r"answers again)$") as failed:
            engine.execute("INSERT INTO prices (sku, price) VALUES ('c', 3);")
        os.kill(own_broker.pid, signal.SIGCONT)
        engine.execute("INSERT INTO prices (sku, price) VALUES ('d', 4);")  # Kafka answers again
        written = [r.key for r in engine.admin.read_all("prices")]
        assert written[:2] == [b"a", b"b"] and written[-1] == b"d", written
        # a withdrawn record is never written; a sent one is (the broker had it when it froze)
        assert (b"c" in written) == ("already sent" in str(failed.value)), (written, str(failed.value))
    finally:
        engine.close()


def test_streamsql_run_restarts_its_query_after_the_broker_comes_back(own_broker: EmbeddedBroker,  # type: ignore[no-untyped-def]
                                                                      tmp_path) -> None:
    """``streamsql run`` used to exit with the error of a query that failed while Kafka did not
    answer; it now restarts the query from its checkpoint (the server's supervisor, shared), so
    a headless pipeline outlives a broker's outage and loses nothing."""
    import json
    import subprocess
    import sys

    from streamsql.kafka.admin import KafkaAdmin

    admin = KafkaAdmin(own_broker.bootstrap_servers)
    admin.create_topic("orders", 2)
    script = tmp_path / "pipeline.sql"
    script.write_text("SET 'auto.offset.reset'='earliest';\n"
                      "CREATE STREAM orders (id VARCHAR KEY, qty INT) WITH (KAFKA_TOPIC='orders', VALUE_FORMAT='JSON');\n"
                      "CREATE STREAM doubled AS SELECT id, qty * 2 AS q2 FROM orders;\n")

    def produce(lo: int, hi: int) -> None:
        for i in range(lo, hi):
            admin.produce("orders", f"o{i}".encode(), json.dumps({"QTY": i}).encode(), 1_700_000_000_000 + i,
                          flush=False)
        admin.flush()

    def output() -> set[int]:
        try:
            return {json.loads(r.value)["Q2"] for r in admin.read_all("DOUBLED") if r.value is not None}
        except KafkaError:  # the run has not created its output topic yet
            return set()

    def wait_for(wanted: set[int], timeout_s: float) -> set[int]:
        deadline = time.monotonic() + timeout_s
        while (got := output()) != wanted and time.monotonic() < deadline:
            time.sleep(1)
        return got

    log = tmp_path / "run.log"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "streamsql", "run", str(script), "--bootstrap-servers",
                                 own_broker.bootstrap_servers, "--data-dir", str(tmp_path / "state")],
                                cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        produce(0, 100)
        assert wait_for({2 * i for i in range(100)}, 180) == {2 * i for i in range(100)}, log.read_text()
        assert own_broker.pid is not None
        os.kill(own_broker.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 120  # until the query has failed (its clients time out)
        while "restarting it from its checkpoint" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(1)
        os.kill(own_broker.pid, signal.SIGCONT)
        assert "restarting it from its checkpoint" in log.read_text(), log.read_text()
        assert proc.poll() is None, log.read_text()  # before: exit 1 with the query's error
        produce(100, 200)
        assert wait_for({2 * i for i in range(200)}, 240) == {2 * i for i in range(200)}, log.read_text()
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(60)
