"""A table filter's checkpoint from before its changes reached the Kafka sink packed (the step's
rows were unpacked by a ``mapInArrow`` pass, ``physical/builder._packed_to_sink``) resumes with
its present bits: a user upgrading streamsql keeps their running table queries, and a key the
table held before the upgrade still gets its tombstone after it (and one it did not, none)."""

from __future__ import annotations

from typing import Any

import pytest

from streamsql.physical import builder
from tests.integration.test_engine import read
from tests.support.upgrades import produce, started_engine

pytestmark = pytest.mark.integration


def test_a_table_filter_checkpoint_from_before_the_packed_sink_resumes_with_its_present_bits(  # type: ignore[no-untyped-def]
        bootstrap, spark, tmp_path, topic_name, monkeypatch):
    src, sink = topic_name("tin"), topic_name("tout")
    data_dir = tmp_path / "state"
    planned_old = []

    def old_plan(plan: Any) -> bool:
        planned_old.append(plan)
        return False

    with monkeypatch.context() as old:
        old.setattr(builder, "_packed_to_sink", old_plan)
        first = started_engine(bootstrap, spark, data_dir)
        try:
            first.execute(f"""
                CREATE TABLE tin (id VARCHAR PRIMARY KEY, v BIGINT)
                  WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);
                CREATE TABLE tout WITH (KAFKA_TOPIC='{sink}') AS SELECT * FROM tin WHERE v > 0;
            """)
            produce(first, src, [("a", '{"v": 1}', 1), ("b", '{"v": 0}', 2)])
            first.wait_until_idle()
            assert read(first.admin, sink) == [("a", {"V": 1}, 1)]
            assert planned_old
        finally:
            first.close()

    # this streamsql: only the checkpoint's state knows that "a" is in the table and "b" is not
    produce(first, src, [("a", None, 3), ("b", None, 4), ("c", '{"v": 5}', 5)])
    second = started_engine(bootstrap, spark, data_dir)
    try:
        second.wait_until_idle()
        assert second.failed_queries() == []
        assert read(second.admin, sink) == [("a", {"V": 1}, 1), ("a", None, 3), ("c", {"V": 5}, 5)]
    finally:
        second.close()
