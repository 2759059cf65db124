"""Consumer lag from a query's progress and the topics' offsets (no Kafka: the offsets are given)."""

from __future__ import annotations

from streamsql import types as t
from streamsql.catalog import Catalog, Source
from streamsql.functions.catalog import builtin_registry
from streamsql.physical.steps import Collect, KafkaSink, PhysicalPlan, TopicScan, physical_plan
from streamsql.planner.planner import Planner
from streamsql.runtime.progress import committed_offsets, lag_stats, query_lag
from streamsql.sql import parse


def test_lag_is_the_end_now_minus_the_committed_offset_per_partition() -> None:
    catalog = Catalog()
    source = Source("S", "STREAM", [t.Column("ID", t.BIGINT, "key"), t.Column("V", t.INTEGER)],
                    topic="s_topic", key_format="KAFKA", value_format="JSON")
    catalog.add(source)
    [stmt] = parse("CREATE STREAM o AS SELECT * FROM s;")
    plan = physical_plan(Planner(catalog, builtin_registry()).plan_query(stmt.query, persistent=True, sink_name="O"),
                         KafkaSink(source), "earliest")
    progress = {"sources": [{"description": "PythonMicroBatchStream", "endOffset": '{"0": 7, "1": 3}'}]}
    assert committed_offsets(progress, ["s_topic"]) == {"s_topic": {0: 7, 1: 3}}
    rows = query_lag(plan, progress, lambda topic: {0: (2, 10), 1: (0, 3), 2: (4, 9)})
    assert [(x.partition, x.start, x.end, x.committed, x.lag) for x in rows] == [
        (0, 2, 10, 7, 3), (1, 0, 3, 3, 0), (2, 4, 9, 4, 5)]  # partition 2: nothing committed yet
    assert lag_stats(rows)["consumerTotalLag"] == 8


def test_a_connectors_topics_in_the_order_spark_lists_them() -> None:
    plan = PhysicalPlan([TopicScan(("a", "b")), Collect(lambda _df, _id: None)])
    progress = {"sources": [{"endOffset": {"0": 4}}, {"endOffset": {"0": 1}}]}
    assert committed_offsets(progress, ["a", "b"]) == {"a": {0: 4}, "b": {0: 1}}
    assert [x.lag for x in query_lag(plan, progress, lambda topic: {0: (0, 5)})] == [1, 4]


def test_a_batch_read_its_end_offsets_less_its_start_offsets() -> None:
    """Not Spark's ``numInputRows``: a reader applying a pushed WHERE hands Spark the rows it
    keeps only. A first batch (no start offsets) and a source that is not ours count Spark's rows."""
    from streamsql.runtime.progress import consumed_records

    batch = {"startOffset": '{"0": 10, "1": 5}', "endOffset": '{"0": 60, "1": 25}', "numInputRows": 3}
    assert consumed_records(batch) == 70
    assert consumed_records({**batch, "startOffset": None}) == 3
    assert consumed_records({"startOffset": "x", "endOffset": '{"0": 1}', "numInputRows": 4}) == 4
    assert consumed_records({"startOffset": {"0": 2}, "endOffset": {"0": 9, "1": 4}, "numInputRows": 1}) == 7
