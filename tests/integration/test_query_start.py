"""A query with ``auto.offset.reset=latest`` reads every record produced after its statement was
accepted (issue #18, item 2): the offsets it starts from are pinned when the statement runs, not
when Spark plans its first batch seconds later, and kept across a restart before that batch."""

from __future__ import annotations

import shutil

import pytest

from tests.integration.test_engine import produce, read

pytestmark = pytest.mark.integration


def _counts(changelog: list[tuple[str | None, object, int]]) -> dict[str | None, object]:
    """The latest COUNT per key in a table's changelog."""
    latest: dict[str | None, object] = {}
    for key, value, _ts in changelog:
        latest[key] = value["N"] if isinstance(value, dict) else value
    return latest


def test_a_table_counts_every_insert_made_right_after_its_statement(engine, topic_name):  # type: ignore[no-untyped-def]
    """As a new user tried it over REST: CREATE TABLE … GROUP BY, then six records at once (here
    from another producer, as fast as it can, and by INSERT VALUES)."""
    src = topic_name("clicks")
    engine.execute(f"CREATE STREAM clicks (user VARCHAR, page VARCHAR) "
                   f"WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=2);")
    produce(engine.admin, src, [(None, '{"user":"old","page":"x"}', 1)])  # before the statement: not read
    engine.execute("SET 'auto.offset.reset'='latest';")
    engine.execute("CREATE TABLE per_user AS SELECT user, COUNT(*) AS n FROM clicks GROUP BY user;")
    produce(engine.admin, src, [(None, f'{{"user":"{"ab"[i % 2]}","page":"p{i}"}}', 10 + i) for i in range(6)])
    for i in range(6):
        engine.execute(f"INSERT INTO clicks (user, page) VALUES ('{'ab'[i % 2]}', 'q{i}');")
    engine.wait_until_idle()
    assert _counts(read(engine.admin, "PER_USER")) == {"a": 6, "b": 6}


def test_a_restart_before_the_first_batch_keeps_the_pinned_start(engine, topic_name, bootstrap, spark,  # type: ignore[no-untyped-def]
                                                                   tmp_path):
    """A query stopped before its first micro-batch committed restarts from the offsets its
    statement pinned, so the records produced in between are read."""
    from streamsql.runtime.config import EngineConfig
    from streamsql.runtime.engine import Engine

    src = topic_name("visits")
    engine.execute(f"CREATE STREAM visits (user VARCHAR KEY, page VARCHAR) "
                   f"WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);")
    produce(engine.admin, src, [("old", '{"page":"x"}', 1)])
    engine.execute("SET 'auto.offset.reset'='latest';")
    engine.execute("CREATE TABLE visit_counts AS SELECT user, COUNT(*) AS n FROM visits GROUP BY user;")
    [query_id] = [q for q in engine.catalog.queries if q.startswith("CTAS_VISIT_COUNTS_")]
    engine.close()
    checkpoint = tmp_path / "state" / "checkpoints" / query_id
    for progress in ("offsets", "commits", "sources"):  # as if killed before its first batch
        shutil.rmtree(checkpoint / progress, ignore_errors=True)
    produce(engine.admin, src, [("u1", '{"page":"a"}', 2), ("u2", '{"page":"b"}', 3), ("u1", '{"page":"c"}', 4)])
    again = Engine(EngineConfig(bootstrap, tmp_path / "state"), spark=spark)
    try:
        again.start()
        again.wait_until_idle()
        assert _counts(read(again.admin, "VISIT_COUNTS")) == {"u1": 2, "u2": 1}
    finally:
        again.close()


def test_a_push_query_sees_records_produced_as_soon_as_it_is_accepted(engine, topic_name):  # type: ignore[no-untyped-def]
    src = topic_name("events")
    engine.execute(f"CREATE STREAM events (id INT, what VARCHAR) "
                   f"WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);")
    produce(engine.admin, src, [(None, '{"id":0,"what":"before"}', 1)])
    engine.execute("SET 'auto.offset.reset'='latest';")
    [stream] = engine.execute("SELECT id, what FROM events EMIT CHANGES LIMIT 3;")
    produce(engine.admin, src, [(None, f'{{"id":{i},"what":"after"}}', 1 + i) for i in (1, 2, 3)])
    try:
        assert list(stream.rows(timeout=60)) == [[1, "after"], [2, "after"], [3, "after"]]
    finally:
        stream.close()
