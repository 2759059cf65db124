"""PAUSE / RESUME on the real engine: a paused query reads nothing, keeps its offsets and state,
and goes on from there when resumed, also after the engine restarts (the commands are logged)."""

from __future__ import annotations

import pytest

from streamsql.errors import CatalogError
from streamsql.runtime import results as r
from tests.integration.test_engine import produce, read

pytestmark = pytest.mark.integration


def _state(engine, query_id: str) -> str:  # type: ignore[no-untyped-def]
    [queries] = engine.execute("SHOW QUERIES;")
    assert isinstance(queries, r.QueryList)
    return next(q.state for q in queries.queries if q.id == query_id)


def test_pause_and_resume_a_query_across_a_restart(engine, topic_name, bootstrap, spark, tmp_path):  # type: ignore[no-untyped-def]
    from streamsql.runtime.config import EngineConfig
    from streamsql.runtime.engine import Engine

    src = topic_name("clicks")
    engine.execute(f"CREATE STREAM clicks (user VARCHAR KEY, page VARCHAR) "
                   f"WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);")
    engine.execute("CREATE TABLE clicks_per_user AS SELECT user, COUNT(*) AS n FROM clicks GROUP BY user;")
    [query_id] = [q for q in engine.catalog.queries if q.startswith("CTAS_CLICKS_PER_USER_")]
    produce(engine.admin, src, [("ann", '{"page":"a"}', 1)])
    engine.wait_until_idle()
    [paused] = engine.execute(f"PAUSE {query_id};")
    assert isinstance(paused, r.CommandStatus) and paused.message == "Query paused."
    assert _state(engine, query_id) == "PAUSED"
    produce(engine.admin, src, [("ann", '{"page":"b"}', 2)])
    engine.wait_until_idle()
    assert [v for _k, v, _ts in read(engine.admin, "CLICKS_PER_USER")] == [{"N": 1}]
    with pytest.raises(CatalogError, match="^Unknown queryId: NOPE$"):
        engine.execute("PAUSE nope;")

    # a restart keeps it paused: the command log has the PAUSE
    engine.close()
    again = Engine(EngineConfig(bootstrap, tmp_path / "state"), spark=spark)
    try:
        again.start()
        assert _state(again, query_id) == "PAUSED"
        produce(again.admin, src, [("ann", '{"page":"c"}', 3)])
        again.wait_until_idle()
        assert len(read(again.admin, "CLICKS_PER_USER")) == 1
        [resumed] = again.execute("RESUME ALL;")
        assert isinstance(resumed, r.CommandStatus) and resumed.message == "Query resumed."
        again.wait_until_idle()
        assert _state(again, query_id) == "RUNNING"
        # from where it paused: the two records read after, counted on top of the state kept
        assert read(again.admin, "CLICKS_PER_USER")[-1][1] == {"N": 3}
    finally:
        again.close()
