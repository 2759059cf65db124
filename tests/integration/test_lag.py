"""Consumer lag in DESCRIBE … EXTENDED: after a query has processed everything the lag is 0 and
the offsets it committed add up to the records produced; new records show as lag until the next
micro-batch (ksqlDB's "Consumer Groups summary")."""

from __future__ import annotations

import pytest

from streamsql.runtime import results as r
from streamsql.surfaces.render import render

from tests.integration.test_engine import produce

pytestmark = pytest.mark.integration


def test_lag_falls_to_zero_and_committed_offsets_equal_the_records(engine, topic_name):  # type: ignore[no-untyped-def]
    src = topic_name("lagged")
    engine.execute(f"""
        CREATE STREAM lagged (id VARCHAR KEY, v INT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=2);
        CREATE STREAM doubled AS SELECT id, v * 2 AS v2 FROM lagged;
    """)
    produce(engine.admin, src, [(f"k{i}", f'{{"v":{i}}}', i) for i in range(25)])
    engine.wait_until_idle()
    [described] = engine.execute("DESCRIBE lagged EXTENDED;")
    assert isinstance(described, r.SourceDescription)
    [summary] = described.offset_summaries
    assert summary.group_id.endswith("query_CSAS_DOUBLED_1") and summary.topic == src
    assert [p.partition for p in summary.partitions] == [0, 1]
    assert sum(p.committed for p in summary.partitions) == 25 == sum(p.log_end for p in summary.partitions)
    assert all(p.lag == 0 for p in summary.partitions)
    assert "Max lag              : 0" in render(described)
    [plain] = engine.execute("DESCRIBE lagged;")
    assert isinstance(plain, r.SourceDescription) and plain.offset_summaries == []  # only EXTENDED asks Kafka
    [queries] = engine.execute("SHOW QUERIES EXTENDED;")
    assert isinstance(queries, r.QueryList)
    [stats] = [q.stats for q in queries.queries if q.id == "CSAS_DOUBLED_1"]
    assert stats["consumerTotalLag"] == 0 and sum(stats["committedOffsets"].values()) == 25
