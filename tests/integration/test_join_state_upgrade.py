"""A join query's checkpoint from before the operator's output named the side that produced a
row (``__TRIGSIDE``, physical/joins.py) and carried both rows in one JSON object (``__ROWS``)
resumes with its state: a user upgrading streamsql keeps their running joins.

The older operator is rebuilt here as it was: the same join task and state (the state layout did
not change, ``joins.JOIN_STATE``), an output frame without ``__TRIGSIDE`` whose ``__TRIG`` holds
the producing record's row JSON every time, and Spark parsing that JSON for the headers. This
module is pickled by value to Spark's Python workers (they cannot import the tests), so the
workers run the old operator while the driver plans the old query.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest
from pyspark import cloudpickle

from streamsql.physical import joins
from tests.integration.test_engine import read
from tests.support.upgrades import produce, started_engine

pytestmark = pytest.mark.integration

#: the operator's output before ``__TRIGSIDE`` was added
OLD_OUTPUT_SCHEMA = "__TS long, __SEQ long, __L string, __R string, __DEL boolean, __KEY string, __TRIG string"


class OldJoinOperator(joins.JoinOperator):
    """The join operator as an earlier streamsql ran it: its output has no ``__TRIGSIDE``."""

    planned = 0  # how many times the driver planned a query with it (the patch took)

    def __init__(self, task: Any) -> None:
        super().__init__(task)
        type(self).planned += 1

    def handleInputRows(self, key: Any, rows: Any, timerValues: Any = None) -> Iterator[Any]:
        import pandas as pd

        state = joins.BucketState(joins._MapStore(self.state))
        out = joins.run(self.task, joins._input_records(rows), state)
        state.flush()
        if out:
            ts, seq, left, right, deleted, jk, trigger = zip(*out)
            yield pd.DataFrame({"__TS": list(ts), "__SEQ": list(seq), "__L": list(left), "__R": list(right),
                                "__DEL": list(deleted), "__KEY": list(jk), "__TRIG": list(trigger)})


def test_a_join_checkpoint_from_before_trigside_resumes_with_its_table_state(  # type: ignore[no-untyped-def]
        bootstrap, spark, tmp_path, topic_name, monkeypatch):
    orders, customers, sink = topic_name("orders"), topic_name("customers"), topic_name("enriched")
    data_dir = tmp_path / "state"
    old_joined_rows = joins._joined_rows

    def joined_rows_without_trigside(spec: Any, joined: Any) -> Any:
        # the old plan read the headers from __TRIG always: a null side takes that branch; it
        # parsed __L and __R one by one, as the one object of both (__ROWS) is parsed now
        both = """concat('{"L":', coalesce(__L, 'null'), ',"R":', coalesce(__R, 'null'), '}') AS __ROWS"""
        return old_joined_rows(spec, joined.selectExpr("*", "CAST(NULL AS INT) AS __TRIGSIDE", both))

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        with monkeypatch.context() as old:
            old.setattr(joins, "JoinOperator", OldJoinOperator)
            old.setattr(joins, "OUTPUT_SCHEMA", OLD_OUTPUT_SCHEMA)
            old.setattr(joins, "_joined_rows", joined_rows_without_trigside)
            first = started_engine(bootstrap, spark, data_dir)
            try:
                first.execute(f"""
                    CREATE STREAM orders (cid VARCHAR KEY, id VARCHAR, amount INT)
                      WITH (KAFKA_TOPIC='{orders}', VALUE_FORMAT='JSON', PARTITIONS=1);
                    CREATE TABLE customers (cid VARCHAR PRIMARY KEY, name VARCHAR)
                      WITH (KAFKA_TOPIC='{customers}', VALUE_FORMAT='JSON', PARTITIONS=1);
                    CREATE STREAM enriched WITH (KAFKA_TOPIC='{sink}') AS
                      SELECT o.cid, o.id AS id, c.name AS name FROM orders o LEFT JOIN customers c ON o.cid = c.cid;
                """)
                produce(first, customers, [("c1", '{"name": "ann"}', 1), ("c2", '{"name": "bob"}', 2)])
                first.wait_until_idle()
                produce(first, orders, [("c1", '{"id": "o1", "amount": 1}', 3)])
                first.wait_until_idle()
                assert [(v["ID"], v["NAME"]) for _k, v, _ts in read(first.admin, sink)] == [("o1", "ann")]
                assert OldJoinOperator.planned >= 1
            finally:
                first.close()
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])

    # this streamsql: the customers are only in the checkpoint's join state (their offsets are
    # committed), so each order below meets them only if that state was resumed
    produce(first, orders, [("c2", '{"id": "o2", "amount": 2}', 4), ("c1", '{"id": "o3", "amount": 3}', 5)])
    produce(first, customers, [("c1", None, 6)])
    produce(first, orders, [("c1", '{"id": "o4", "amount": 4}', 7)])
    second = started_engine(bootstrap, spark, data_dir)
    try:
        second.wait_until_idle()
        assert second.failed_queries() == []
        rows = [(k, v["ID"], v["NAME"]) for k, v, _ts in read(second.admin, sink)]
        assert rows == [("c1", "o1", "ann"), ("c2", "o2", "bob"), ("c1", "o3", "ann"), ("c1", "o4", None)]
    finally:
        second.close()
