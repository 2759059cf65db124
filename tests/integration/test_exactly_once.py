"""``processing.guarantee=exactly_once_v2`` (issue #18 item 1), on the real broker and Spark.

tansu gives ``read_committed`` consumers aborted records too, so the output is checked as the
broker stores it (tests/support/committed_log.py): the committed and aborted batches, and the
records a ``read_committed`` reader must return once the markers are applied.

A crash between a micro-batch's writes and Spark's commit of it is made exactly: the engine is
stopped, the batch's entry in the checkpoint's commit log removed, and the engine restarted, so
Spark replays that batch. Under at-least-once the replay writes the batch again (the control
case); under exactly-once its tasks find their markers and write nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from streamsql.errors import ConfigError
from streamsql.kafka import transactions
from streamsql.kafka.transactions import BatchTask
from streamsql.runtime.config import EngineConfig
from streamsql.runtime.engine import Engine
from tests.integration.test_engine import produce
from tests.support.committed_log import read_committed, stored_batches

pytestmark = pytest.mark.integration


def _send(records: list[tuple[bytes, bytes]], topic: str) -> object:
    """A ``produce`` callable for :func:`transactions.write_once` sending ``records``."""

    def send(producer, _batches) -> int:  # type: ignore[no-untyped-def]
        for key, value in records:
            producer.produce(topic, key=key, value=value, partition=0)
        producer.flush(30)
        return len(records)

    return send


def test_a_replayed_task_writes_nothing_and_a_killed_one_is_aborted(engine, topic_name, bootstrap):  # type: ignore[no-untyped-def]
    topic = topic_name("txn")
    engine.admin.create_topic(topic, 1)
    query = topic_name("query")
    first, again = BatchTask(query, 0, 0), BatchTask(query, 0, 0)
    assert transactions.write_once(bootstrap, topic, {}, [b"rows"], _send([(b"a", b"1"), (b"b", b"2")], topic), first) == 2
    # the same batch of the same task again (Spark's replay after a crash): nothing is written
    assert transactions.write_once(bootstrap, topic, {}, [b"rows"], _send([(b"a", b"1"), (b"b", b"2")], topic), again) == 0
    assert transactions.written_batches(bootstrap, topic, first) == 1
    assert transactions.write_once(bootstrap, topic, {}, [b"rows"], _send([(b"c", b"3")], topic), BatchTask(query, 1, 0)) == 1

    # a task of another partition killed with SIGKILL in the middle of its transaction ...
    killed = textwrap.dedent(f"""
        import os
        from streamsql.kafka import transactions
        def die(producer, _batches):
            producer.produce({topic!r}, key=b"zombie", value=b"never", partition=0)
            producer.flush(30)
            os.kill(os.getpid(), 9)
        transactions.write_once({bootstrap!r}, {topic!r}, {{}}, [b"rows"], die, transactions.BatchTask({query!r}, 2, 1))
    """)
    proc = subprocess.run([sys.executable, "-c", killed], cwd=Path(__file__).parents[2], timeout=120)
    assert proc.returncode == -9
    # ... and its retry (the same task, the same batch) fences it: Kafka aborts the open one
    retry = BatchTask(query, 2, 1)
    assert transactions.write_once(bootstrap, topic, {}, [b"rows"], _send([(b"d", b"4")], topic), retry) == 1

    # a task whose write fails aborts its own transaction; the marker stays, the retry writes
    def fail(producer, _batches):  # type: ignore[no-untyped-def]
        producer.produce(topic, key=b"failed", value=b"never", partition=0)
        producer.flush(30)
        raise transactions.KafkaError("the encoder failed")

    with pytest.raises(transactions.KafkaError, match="the encoder failed"):
        transactions.write_once(bootstrap, topic, {}, [b"rows"], fail, BatchTask(query, 3, 0))
    assert transactions.written_batches(bootstrap, topic, BatchTask(query, 3, 0)) == 2
    assert transactions.write_once(bootstrap, topic, {}, [b"rows"], _send([(b"e", b"5")], topic), BatchTask(query, 3, 0)) == 1

    # another worker process writes the next batch of partition 0 (Spark runs a partition's task
    # in whichever Python worker is free), then this one the batch after: each write's producer
    # is its own, so neither finds itself fenced by the other
    assert transactions.write_once(bootstrap, topic, {}, [], _send([(b"x", b"never")], topic),
                                   BatchTask(query, 4, 0)) == 0  # no rows: no transaction, no marker
    other = textwrap.dedent(f"""
        from streamsql.kafka import transactions
        def send(producer, _batches):
            producer.produce({topic!r}, key=b"f", value=b"6", partition=0)
            producer.flush(30)
            return 1
        task = transactions.BatchTask({query!r}, 4, 0)
        assert transactions.write_once({bootstrap!r}, {topic!r}, {{}}, [b"rows"], send, task) == 1
    """)
    assert subprocess.run([sys.executable, "-c", other], cwd=Path(__file__).parents[2], timeout=120).returncode == 0
    assert transactions.write_once(bootstrap, topic, {}, [b"rows"], _send([(b"g", b"7")], topic), BatchTask(query, 5, 0)) == 1

    stored = stored_batches(bootstrap, topic)
    aborted = [b for b in stored if b.marker == "ABORT"]
    assert len(aborted) == 2  # the killed task's (ended by its retry's fencing) and the failed one's
    held = {pid for pid in (b.producer_id for b in aborted)}
    zombie = [b for b in stored if any(k == b"zombie" for _, k, _ in b.records)]
    assert zombie and zombie[0].transactional and zombie[0].producer_id in held
    assert [(k, v) for _, k, v in read_committed(bootstrap, topic)] == [
        (b"a", b"1"), (b"b", b"2"), (b"c", b"3"), (b"d", b"4"), (b"e", b"5"), (b"f", b"6"), (b"g", b"7")]


def test_processing_guarantee_values(engine):  # type: ignore[no-untyped-def]
    engine.execute("SET 'processing.guarantee'='exactly_once';")  # Kafka Streams' older name
    assert engine.exactly_once()
    engine.execute("SET 'processing.guarantee'='at_least_once';")
    assert not engine.exactly_once()
    with pytest.raises(ConfigError, match="Invalid value exactly_twice for configuration processing.guarantee"):
        engine.execute("SET 'ksql.streams.processing.guarantee'='exactly_twice';")


def test_a_bad_guarantee_given_with_a_statement_is_refused_before_anything_is_created(  # type: ignore[no-untyped-def]
        engine, topic_name):
    """A REST request's ``streamsProperties`` (or the config file) reach the engine without a SET:
    the value is checked as the query is planned, before its topic, command or catalog entry."""
    from streamsql.runtime.session import Session

    src = topic_name("guarantee")
    engine.execute(f"CREATE STREAM g (k VARCHAR KEY, v INT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', "
                   f"PARTITIONS=1);")
    with engine.session_scope(Session({"ksql.streams.processing.guarantee": "twice"})):
        with pytest.raises(ConfigError, match="Invalid value twice for configuration processing.guarantee"):
            engine.execute("CREATE STREAM g_out AS SELECT * FROM g;")
    assert engine.catalog.find("G_OUT") is None and not engine.catalog.queries
    assert "G_OUT" not in engine.admin.topics()


def _replay_last_batch(state: Path, query_id: str) -> int:
    """Forget that Spark committed the query's last micro-batch (as a crash after its writes and
    before its commit leaves the checkpoint); returns that batch's id."""
    commits = state / "checkpoints" / query_id / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)
    return last


Rows = list[tuple[bytes | None, dict[str, object]]]


def _run_replayed(bootstrap: str, spark: object, state: Path, topic_name, guarantee: str,  # type: ignore[no-untyped-def]
                  ) -> dict[str, Rows]:
    """Three queries under ``guarantee`` — a stream filter (the streaming sink), a count per key
    (Spark's aggregation, written from ``foreachBatch``) and a sum per key with HAVING (the
    Python operator, the streaming sink) — every input in one batch, that batch replayed after a
    restart. Returns each output as read_committed reads it."""
    src = topic_name("eos_in")
    outs = {name: topic_name(name) for name in ("filtered", "counts", "sums")}
    engine = Engine(EngineConfig(bootstrap, state), spark=spark)
    engine.start()
    try:
        engine.execute("SET 'auto.offset.reset'='earliest';")
        engine.execute(f"SET 'processing.guarantee'='{guarantee}';")
        engine.execute(f"CREATE STREAM eos_in (k VARCHAR KEY, v INT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', "
                       f"PARTITIONS=2);")
        produce(engine.admin, src, [(f"k{i % 5}", json.dumps({"v": i}), 1000 + i) for i in range(40)])
        engine.execute(f"CREATE STREAM filtered WITH (KAFKA_TOPIC='{outs['filtered']}', PARTITIONS=1) AS "
                       f"SELECT k, v FROM eos_in WHERE v % 2 = 0;")
        engine.execute(f"CREATE TABLE counts WITH (KAFKA_TOPIC='{outs['counts']}', PARTITIONS=1) AS "
                       f"SELECT k, COUNT(*) AS n FROM eos_in GROUP BY k;")
        engine.execute(f"CREATE TABLE sums WITH (KAFKA_TOPIC='{outs['sums']}', PARTITIONS=1) AS "
                       f"SELECT k, SUM(v) AS s FROM eos_in GROUP BY k HAVING SUM(v) > 0;")
        engine.wait_until_idle()
        queries = list(engine.catalog.queries)
    finally:
        engine.close()
    assert len(queries) == 3
    for query_id in queries:
        _replay_last_batch(state, query_id)
    engine = Engine(EngineConfig(bootstrap, state), spark=spark)
    engine.start()
    try:
        engine.wait_until_idle()
    finally:
        engine.close()
    return {name: [(k, json.loads(v)) for _, k, v in read_committed(bootstrap, topic) if v is not None]
            for name, topic in outs.items()}


def test_a_replayed_batch_is_written_once_under_exactly_once_and_again_under_at_least_once(  # type: ignore[no-untyped-def]
        bootstrap, spark, tmp_path, topic_name):
    evens = sorted(i for i in range(40) if i % 2 == 0)
    counts = {f"k{i}".encode(): {"N": 8} for i in range(5)}
    sums = {f"k{i}".encode(): {"S": sum(v for v in range(40) if v % 5 == i)} for i in range(5)}

    once = _run_replayed(bootstrap, spark, tmp_path / "once", topic_name, "exactly_once_v2")
    assert sorted(v["V"] for _, v in once["filtered"]) == evens  # each record once
    assert sorted(once["counts"]) == sorted(counts.items())  # one update per key (the record cache)
    assert sorted(once["sums"]) == sorted(sums.items())

    least = _run_replayed(bootstrap, spark, tmp_path / "least", topic_name, "at_least_once")
    assert sorted(v["V"] for _, v in least["filtered"]) == sorted(evens * 2)  # the replay wrote the batch again
    assert sorted(least["counts"]) == sorted([*counts.items(), *counts.items()])
    assert sorted(least["sums"]) == sorted([*sums.items(), *sums.items()])
    assert dict(least["counts"]) == counts and dict(least["sums"]) == sums  # the tables are exact either way
