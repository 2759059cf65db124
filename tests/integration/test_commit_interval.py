"""``ksql.streams.commit.interval.ms``: with the record cache on, a persistent aggregation runs a
micro-batch at most that often (a Spark processing-time trigger); 0, or the cache off, runs one as
soon as records arrive. The rows are the same either way."""

from __future__ import annotations

from typing import Any

import pytest

from streamsql.errors import ConfigError
from tests.integration.test_engine import produce, read

pytestmark = pytest.mark.integration


def _trigger(engine: Any, sink: str) -> str:
    query_id = engine.catalog.find(sink).writer_query
    handle = engine.queries[query_id].handle
    return str(handle._jsq.streamingQuery().trigger().toString())  # the JVM's StreamExecution


def test_the_trigger_follows_the_commit_interval_and_the_cache(engine, topic_name):  # type: ignore[no-untyped-def]
    src = topic_name("ci")
    engine.execute(f"""
        SET 'auto.offset.reset'='earliest';
        CREATE STREAM ci_s (k STRING KEY, v INT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);
        CREATE TABLE ci_default AS SELECT k, COUNT(*) AS n FROM ci_s GROUP BY k;
        SET 'ksql.streams.commit.interval.ms'='1500';
        CREATE TABLE ci_slow AS SELECT k, COUNT(*) AS n FROM ci_s GROUP BY k;
        SET 'commit.interval.ms'='0';
        CREATE TABLE ci_zero AS SELECT k, COUNT(*) AS n FROM ci_s GROUP BY k;
        SET 'ksql.streams.commit.interval.ms'='1500';
        SET 'ksql.streams.cache.max.bytes.buffering'='0';
        CREATE TABLE ci_uncached AS SELECT k, COUNT(*) AS n FROM ci_s GROUP BY k;
        CREATE STREAM ci_copy AS SELECT * FROM ci_s;
    """)
    assert "500" in _trigger(engine, "CI_DEFAULT")
    assert "1500" in _trigger(engine, "CI_SLOW")
    for sink in ("CI_ZERO", "CI_UNCACHED", "CI_COPY"):  # as soon as records arrive
        assert "ProcessingTime" not in _trigger(engine, sink) or "(0)" in _trigger(engine, sink), sink
    produce(engine.admin, src, [(f"k{i % 2}", f'{{"v": {i}}}', i + 1) for i in range(6)])
    engine.wait_until_idle()
    for sink in ("CI_DEFAULT", "CI_SLOW", "CI_ZERO"):
        latest = {k: v["N"] for k, v, _ in read(engine.admin, engine.catalog.find(sink).topic)}
        assert latest == {"k0": 3, "k1": 3}, sink
    for bad in ("soon", "-1"):
        with pytest.raises(ConfigError, match=f"Invalid value {bad} for configuration commit.interval.ms"):
            engine.execute(f"SET 'ksql.streams.commit.interval.ms'='{bad}';")
