"""The physical plan layer without Spark: steps and EXPLAIN, the record cache's collapse, the
previous value an update carries for HAVING, HAVING over old values, bucket SQL and checkpoint
compatibility (the state over Spark's real map state: tests/integration/test_aggregation.py)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from streamsql import types as t
from streamsql.catalog import Catalog, Source
from streamsql.functions.catalog import builtin_registry
from streamsql.physical import aggregate as agg
from streamsql.physical import spark_aggregate
from streamsql.physical.aggregator import AggregationProcessor, MemoryState, Update, collapse
from streamsql.physical.buckets import BUCKET_COL, bucket_expression, recorded_shuffle_partitions
from streamsql.physical.builder import (
    CHECKPOINT_META,
    STATE_FORMAT,
    CheckpointError,
    buckets_for,
    check_checkpoint,
    check_join_checkpoint,
    operator_for,
    start_writer,
)
from streamsql.physical.steps import (
    Aggregate,
    Collect,
    Join,
    KafkaSink,
    Scan,
    Select,
    SparkAggregate,
    TableChanges,
    physical_plan,
)
from streamsql.planner.aggregation import AggregatePlan
from streamsql.planner.planner import Planner, QueryPlan
from streamsql.sql import parse


@pytest.fixture
def catalog() -> Catalog:
    c = Catalog()
    c.add(Source("S", "STREAM", [t.Column("ID", t.BIGINT, "key"), t.Column("V", t.INTEGER)],
                 topic="s_topic", key_format="KAFKA", value_format="JSON"))
    return c


def logical(catalog: Catalog, sql: str) -> Any:
    [stmt] = parse(sql)
    return Planner(catalog, builtin_registry()).plan_query(stmt.query, persistent=True,
                                                         sink_name=getattr(stmt, "name", None))


def rows(plan: AggregatePlan, values: list[tuple[int, int, int]]) -> list[dict[str, Any]]:
    """(key, v, ts) → pre-aggregation rows of ``plan`` (one key, one argument)."""
    [(key, _, _)] = plan.keys
    out = []
    for offset, (k, v, ts) in enumerate(values):
        row = {key: k, t.ROWTIME: ts, t.ROWPARTITION: 0, t.ROWOFFSET: offset}
        for call in plan.calls:
            for col in call.arg_columns:
                row[col] = v
        out.append(row)
    return out


def test_physical_plan_of_an_aggregation_and_its_explain(catalog: Catalog) -> None:
    plan = logical(catalog, "CREATE TABLE o AS SELECT id, SUM(v) AS total FROM s "
                            "WINDOW TUMBLING (SIZE 10 SECONDS) GROUP BY id HAVING SUM(v) > 3;")
    sink = Source("O", "TABLE", [], topic="o_topic", key_format="KAFKA", value_format="JSON")
    physical = physical_plan(plan, KafkaSink(sink), "earliest", buckets=4, cache=True)
    assert [type(s) for s in physical.steps] == [Scan, Aggregate, KafkaSink]
    lines = physical.explain().splitlines()
    assert lines[0] == "[1] Scan stream S (topic s_topic, key KAFKA, value JSON, from earliest)"
    assert lines[1].startswith("  > [2] Aggregate by ") and "SUM(" in lines[1]
    assert "window TUMBLING (SIZE 10 SECONDS, GRACE PERIOD 1 DAY)" in lines[1] and "4 bucket(s), latest per key per batch" in lines[1]
    assert "having" in lines[1]
    assert lines[2] == "    > [3] Kafka sink O (topic o_topic, key KAFKA, value JSON)"


def test_physical_plan_of_a_stateless_query(catalog: Catalog) -> None:
    plan = logical(catalog, "SELECT id, v FROM s WHERE v > 1 EMIT CHANGES;")
    assert isinstance(plan, QueryPlan)
    physical = physical_plan(plan, Collect(lambda _df, _id: None), "latest")
    assert [type(s) for s in physical.steps] == [Scan, Select, Collect]
    assert physical.explain().splitlines()[1] == "  > [2] Select ID, V where V > 1"  # as written, not Spark's


def test_collapse_keeps_the_latest_value_and_the_value_before_the_batch() -> None:
    updates = [Update(("a",), (None, None), [1], 10, had=False, previous=None),
               Update(("b",), (None, None), [5], 11, had=True, previous=[4]),
               Update(("a",), (None, None), [2], 12, had=True, previous=[1]),
               Update(("a",), (0, 10), [7], 13, had=True, previous=[6])]
    out = collapse(updates)
    # one per key and window, in the order of each one's last change
    assert [(u.key, u.window, u.results, u.rowtime, u.had, u.previous) for u in out] == [
        (("b",), (None, None), [5], 11, True, [4]),
        (("a",), (None, None), [2], 12, False, None),   # 'a' did not exist before the batch
        (("a",), (0, 10), [7], 13, True, [6])]


def test_updates_carry_the_previous_results_only_when_having_needs_them(catalog: Catalog) -> None:
    with_having = logical(catalog, "CREATE TABLE o AS SELECT id, SUM(v) AS total FROM s GROUP BY id HAVING SUM(v) > 3;")
    out = AggregationProcessor(with_having, MemoryState()).process(rows(with_having, [(1, 2, 1), (1, 3, 2)]))
    assert [(u.results, u.had, u.previous) for u in out] == [([2], False, None), ([5], True, [2])]
    without = logical(catalog, "CREATE TABLE o AS SELECT id, SUM(v) AS total FROM s GROUP BY id;")
    out = AggregationProcessor(without, MemoryState()).process(rows(without, [(1, 2, 1), (1, 3, 2)]))
    assert [(u.results, u.had, u.previous) for u in out] == [([2], False, None), ([5], True, None)]


def test_emit_final_windows_have_no_previous_value(catalog: Catalog) -> None:
    plan = logical(catalog, "CREATE TABLE o AS SELECT id, SUM(v) AS total FROM s WINDOW TUMBLING (SIZE 10 MILLISECONDS) "
                            "GROUP BY id HAVING SUM(v) > 0 EMIT FINAL;")
    out = AggregationProcessor(plan, MemoryState()).process(rows(plan, [(1, 2, 1), (1, 3, 2), (1, 1, 12)]))
    assert [(u.window, u.results, u.had) for u in out] == [((0, 10), [5], False)]


def test_old_having_reads_the_previous_results(catalog: Catalog) -> None:
    plan = logical(catalog, "CREATE TABLE o AS SELECT id, SUM(v) AS total FROM s GROUP BY id HAVING SUM(v) > 3;")
    assert plan.having is not None
    [call] = plan.calls
    assert f"`{call.name}`" in plan.having
    old = agg.old_having(plan)
    assert f"`{agg.OLD_PREFIX}{call.name}`" in old and f"`{call.name}`" not in old


def test_bucket_expression() -> None:
    assert bucket_expression(["__K0"], [7]) == "CAST(7 AS BIGINT)"
    assert bucket_expression(["__K0", "__K1"], [3, 9]) == (
        "element_at(array(CAST(3 AS BIGINT), CAST(9 AS BIGINT)), pmod(hash(`__K0`, `__K1`), 2) + 1)")


def test_a_join_is_its_own_step_with_its_buckets_and_inputs_in_explain() -> None:
    """A joined source plans as a Join step over scans of its sides (an n-way join's left input is
    the join before it), with its kind, bucket count and how rows find their bucket."""
    catalog = Catalog()
    for name, partitions in (("O", 3), ("C", 3), ("I", 2)):
        catalog.add(Source(name, "TABLE" if name != "O" else "STREAM",
                           [t.Column("ID", t.BIGINT, "key"), t.Column("CID", t.BIGINT), t.Column("IID", t.BIGINT)],
                           topic=f"{name.lower()}_topic", key_format="KAFKA", value_format="JSON",
                           partitions=partitions))
    plan = logical(catalog, "CREATE STREAM x AS SELECT * FROM O JOIN C ON O.ID = C.ID LEFT JOIN I ON O.IID = I.ID;")
    physical = physical_plan(plan, Collect(lambda _df, _id: None), "earliest")
    outer = physical.steps[0]
    assert isinstance(outer, Join) and isinstance(outer.left, Join) and isinstance(outer.right, Scan)
    assert (outer.buckets, outer.by_partition) == (3, False)  # I joins on O's value column IID
    assert (outer.left.buckets, outer.left.by_partition) == (3, True)  # both on their keys, 3 partitions each
    assert [s.source.name for s in outer.scans()] == ["O", "C", "I"]
    assert physical.explain().splitlines()[:6] == [
        "[1] Join LEFT (Join INNER O ⋈ C) ⋈ I: stream-table; 3 bucket(s) by hash of the join key",
        "      left: Join INNER O ⋈ C: stream-table; 3 bucket(s) by partition",
        "        left: Scan stream O (topic o_topic, key KAFKA, value JSON, from earliest)",
        "        right: Scan table C (topic c_topic, key KAFKA, value JSON, from earliest)",
        "      right: Scan table I (topic i_topic, key KAFKA, value JSON, from earliest)",
        "  > [2] Select " + ", ".join(c.name for c in plan.columns),
    ]


def test_a_resumed_query_places_its_buckets_with_its_checkpoints_shuffle_partitions(tmp_path: Path) -> None:
    """Bucket values depend on the shuffle-partition count, which Spark fixes in a query's
    offset log and restores on resume whatever the session says; the builder reads it there."""
    assert recorded_shuffle_partitions(None) is None
    assert recorded_shuffle_partitions(tmp_path) is None  # a new query: no offset log yet
    offsets = tmp_path / "offsets"
    offsets.mkdir()
    conf = {"spark.sql.shuffle.partitions": "3", "spark.sql.streaming.multipleWatermarkPolicy": "min"}
    (offsets / "0").write_text('v1\n' + json.dumps({"batchWatermarkMs": 0, "conf": conf}) + '\n{"logOffset":0}')
    (offsets / "1").write_text("v1\n{truncated")  # a half-written entry is skipped, as Spark does
    assert recorded_shuffle_partitions(tmp_path) == 3


def test_checkpoint_of_an_earlier_version_is_refused_with_the_way_to_rebuild(tmp_path: Path, catalog: Catalog) -> None:
    plan = logical(catalog, "CREATE TABLE o AS SELECT id, COUNT(*) AS n FROM s GROUP BY id;")
    physical = physical_plan(plan, Collect(lambda _df, _id: None), "earliest", buckets=2, operator="python")
    old = tmp_path / "old"
    (old / "commits").mkdir(parents=True)
    (old / "commits" / "0").write_text("v1")
    with pytest.raises(CheckpointError, match="earlier streamsql.*delete that directory"):
        check_checkpoint(old, physical)
    new = tmp_path / "new"
    check_checkpoint(new, physical)  # a new checkpoint records the layout
    assert json.loads((new / CHECKPOINT_META).read_text()) == {"state_format": STATE_FORMAT, "buckets": 2}
    assert buckets_for(new, 8) == 2 and buckets_for(tmp_path / "none", 8) == 8
    check_checkpoint(new, physical)  # and is resumed
    other = physical_plan(plan, Collect(lambda _df, _id: None), "earliest", buckets=3, operator="python")
    with pytest.raises(CheckpointError, match="2 bucket"):
        check_checkpoint(new, other)


def test_a_tables_filter_writes_its_changelog_through_the_table_changes_step(tmp_path: Path) -> None:
    catalog = Catalog()
    catalog.add(Source("T", "TABLE", [t.Column("ID", t.BIGINT, "key"), t.Column("V", t.INTEGER)],
                       topic="t_topic", key_format="KAFKA", value_format="JSON"))
    plan = logical(catalog, "CREATE TABLE o AS SELECT id, v FROM t WHERE v > 1;")
    sink = Source("O", "TABLE", [], topic="o_topic", key_format="KAFKA", value_format="JSON")
    physical = physical_plan(plan, KafkaSink(sink), "earliest", changelog=True, buckets=2)
    assert [type(s) for s in physical.steps] == [Scan, Select, TableChanges, KafkaSink]
    assert physical.explain().splitlines()[2] == (
        "    > [3] Table changes by ID: tombstones only for present keys; 2 bucket(s)")
    # a transient query over the table hands over every change: no state
    pushed = physical_plan(plan, Collect(lambda _df, _id: None), "earliest", changelog=True)
    assert [type(s) for s in pushed.steps] == [Scan, Select, Collect]
    # its checkpoint: a layout of its own; one from before (the driver's store) is refused
    new = tmp_path / "new"
    check_checkpoint(new, physical)
    assert json.loads((new / CHECKPOINT_META).read_text()) == {
        "state_format": STATE_FORMAT, "buckets": 2, "step": "table_changes"}
    check_checkpoint(new, physical)
    old = tmp_path / "old"
    (old / "commits").mkdir(parents=True)
    (old / "commits" / "0").write_text("v1")
    with pytest.raises(CheckpointError, match="earlier streamsql, which kept table-changes state on the driver"):
        check_checkpoint(old, physical)
    aggregation = physical_plan(logical(catalog, "CREATE TABLE n AS SELECT v, COUNT(*) AS c FROM t GROUP BY v;"),
                                KafkaSink(sink), "earliest", buckets=2, operator="python")
    with pytest.raises(CheckpointError, match="holds table-changes state.*writes aggregation state"):
        check_checkpoint(new, aggregation)


@pytest.mark.parametrize(("sql", "reason"), [
    ("SELECT id, COUNT(*) AS n, SUM(v) AS total, MIN(v) AS lo, MAX(v) AS hi FROM s GROUP BY id", None),
    ("SELECT id, SUM(v) AS total FROM s WINDOW TUMBLING (SIZE 10 SECONDS, GRACE PERIOD 1 SECOND) GROUP BY id "
     "EMIT FINAL", None),
    ("SELECT id, COUNT(v) AS n FROM s WINDOW HOPPING (SIZE 10 SECONDS, ADVANCE BY 5 SECONDS) GROUP BY id", None),
    ("SELECT id, COUNT(*) AS n FROM s WINDOW SESSION (10 SECONDS) GROUP BY id", "a SESSION window"),
    ("SELECT id, SUM(v) AS total FROM s GROUP BY id HAVING SUM(v) > 3", "HAVING"),
    ("SELECT id, AVG(v) AS a FROM s GROUP BY id", "the aggregate AVG(V)"),
    ("SELECT id, COLLECT_LIST(v) AS l FROM s GROUP BY id", "the aggregate COLLECT_LIST(V)"),
    ("SELECT id, COUNT(*) AS n FROM t GROUP BY id", "a table source"),
])
def test_which_aggregations_take_sparks_operator(catalog: Catalog, sql: str, reason: str | None) -> None:
    catalog.add(Source("T", "TABLE", [t.Column("ID", t.BIGINT, "key"), t.Column("V", t.INTEGER)],
                       topic="t_topic", key_format="KAFKA", value_format="JSON"))
    plan = logical(catalog, f"CREATE TABLE o AS {sql};")
    found = spark_aggregate.unsupported_reason(plan)
    assert found == reason or (reason is not None and found is not None and found.startswith(reason))
    physical = physical_plan(plan, Collect(lambda _df, _id: None), "earliest", buckets=2, cache=False)
    assert type(physical.steps[1]) is (SparkAggregate if reason is None else Aggregate)


def test_sparks_operator_in_explain_and_its_checkpoint(tmp_path: Path, catalog: Catalog) -> None:
    plan = logical(catalog, "CREATE TABLE o AS SELECT id, SUM(v) AS total FROM s "
                            "WINDOW TUMBLING (SIZE 10 SECONDS, GRACE PERIOD 2 SECONDS) GROUP BY id EMIT FINAL;")
    per_record = physical_plan(plan, Collect(lambda _df, _id: None), "earliest", cache=False)
    assert per_record.explain().splitlines()[1] == (
        "  > [2] Aggregate (Spark) by `ID`: SUM(V) window TUMBLING (SIZE 10 SECONDS, GRACE PERIOD 2 SECONDS) "
        "emit FINAL (append); one record per batch")
    cached = physical_plan(plan, Collect(lambda _df, _id: None), "earliest", cache=True)
    assert cached.explain().splitlines()[1].endswith("emit FINAL (append); latest per key per batch")
    checkpoint = tmp_path / "ckpt"
    assert operator_for(checkpoint) is None  # a new query: the planner chooses
    check_checkpoint(checkpoint, cached)
    assert json.loads((checkpoint / CHECKPOINT_META).read_text()) == {"state_format": STATE_FORMAT,
                                                                      "operator": "spark"}
    assert operator_for(checkpoint) == "spark"
    # a query whose checkpoint holds the Python operator's state resumes on it
    python = tmp_path / "python"
    check_checkpoint(python, physical_plan(plan, Collect(lambda _df, _id: None), "earliest", operator="python"))
    assert operator_for(python) == "python"
    with pytest.raises(CheckpointError, match="Python aggregation operator.*delete that directory"):
        check_checkpoint(python, cached)


def test_pack_keeps_each_buckets_rows_with_exact_values() -> None:
    import datetime
    import decimal

    import pyarrow as pa

    rows_in = [{"K": "a", "N": None, "BIG": 2**62 + 1, "D": decimal.Decimal("1.10"), "DAY": datetime.date(2020, 1, 2),
                "S": {"X": 1, "Y": [1, 2]}, BUCKET_COL: 7},
               {"K": "b", "N": 5, "BIG": None, "D": None, "DAY": None, "S": None, BUCKET_COL: 9},
               {"K": "c", "N": 6, "BIG": -1, "D": decimal.Decimal("-0.01"), "DAY": datetime.date(1970, 1, 1),
                "S": {"X": None, "Y": []}, BUCKET_COL: 7}]
    schema = pa.schema([("K", pa.string()), ("N", pa.int64()), ("BIG", pa.int64()), ("D", pa.decimal128(4, 2)),
                        ("DAY", pa.date32()), ("S", pa.struct([("X", pa.int32()), ("Y", pa.list_(pa.int32()))])),
                        (BUCKET_COL, pa.int64())])
    batch = pa.RecordBatch.from_pylist(rows_in, schema=schema)
    [packed] = list(agg.pack(iter([batch, batch.slice(0, 0)])))  # an empty batch yields nothing
    assert packed.schema.names == [BUCKET_COL, agg.ROW_COL]
    by_bucket = {b: agg.unpack_rows(blob) for b, blob in zip(packed.column(0).to_pylist(), packed.column(1).to_pylist())}
    strip = [{k: v for k, v in r.items() if k != BUCKET_COL} for r in rows_in]
    assert by_bucket == {7: [strip[0], strip[2]], 9: [strip[1]]}
    assert type(by_bucket[7][0]["BIG"]) is int and by_bucket[9][0]["N"] == 5


def test_collapse_of_unhashable_keys() -> None:
    updates = [Update(([1, 2],), (None, None), [1], 10), Update(([1, 2],), (None, None), [2], 11, had=True,
                                                                  previous=[1])]
    assert [(u.key, u.results, u.had) for u in collapse(updates)] == [(([1, 2],), [2], False)]


class _Conf:
    def __init__(self) -> None:
        self.values = {"spark.sql.streaming.statefulOperator.allowMultiple": "true"}

    def set(self, key: str, value: str) -> None:
        self.values[key] = value

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)


class _Session:
    def __init__(self) -> None:
        self.conf = _Conf()


class _SnapshottingWriter:
    """Stands in for a DataStreamWriter: start() snapshots the session conf, as Spark's
    StreamExecution clones the session, and takes a while, as a real start does."""

    def __init__(self, spark: _Session) -> None:
        self.spark = spark
        self.seen: str | None = None

    def start(self) -> None:
        time.sleep(0.05)
        self.seen = self.spark.conf.get("spark.sql.streaming.statefulOperator.allowMultiple")


def test_concurrent_starts_each_snapshot_their_own_allow_multiple() -> None:
    """Spark's aggregation starts with allowMultiple=false; a query started beside it on another
    thread must not snapshot that, nor may the aggregation snapshot another start's restored
    ``true`` (the test runner starts three queries at once: a flaky tumbling-window case)."""
    spark = _Session()
    plain = [_SnapshottingWriter(spark) for _ in range(3)]
    aggs = [_SnapshottingWriter(spark) for _ in range(3)]
    threads = [threading.Thread(target=start_writer, args=(spark, w, False)) for w in plain]
    threads += [threading.Thread(target=start_writer, args=(spark, w, True)) for w in aggs]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert [w.seen for w in plain] == ["true"] * 3
    assert [w.seen for w in aggs] == ["false"] * 3
    assert spark.conf.get("spark.sql.streaming.statefulOperator.allowMultiple") == "true"


def test_a_join_checkpoint_in_another_layout_or_bucket_count_is_refused(tmp_path: Path) -> None:
    """Joins keep their state per bucket in transformWithState (physical/joins.py): a join query's
    checkpoint written by an earlier operator (applyInPandasWithState, or one value per join
    key), or over another number of buckets, cannot be resumed; a new one records the layout
    next to any other."""
    from streamsql.physical.joins import JOIN_STATE

    old = tmp_path / "old"
    (old / "commits").mkdir(parents=True)
    (old / "commits" / "0").write_text("v1")
    with pytest.raises(CheckpointError, match="join state written by an earlier streamsql.*delete that directory"):
        check_join_checkpoint(old, 1)
    (old / CHECKPOINT_META).write_text(json.dumps({"join_state": "transformWithState-value-1"}))
    with pytest.raises(CheckpointError, match="layout transformWithState-value-1"):
        check_join_checkpoint(old, 1)
    new = tmp_path / "new"
    new.mkdir()
    (new / CHECKPOINT_META).write_text(json.dumps({"state_format": STATE_FORMAT, "buckets": 1}))
    check_join_checkpoint(new, 2)
    assert json.loads((new / CHECKPOINT_META).read_text()) == {
        "state_format": STATE_FORMAT, "buckets": 1, "join_state": JOIN_STATE, "join_buckets": 2}
    (new / "commits").mkdir()
    (new / "commits" / "0").write_text("v1")
    check_join_checkpoint(new, 2)  # resumed
    with pytest.raises(CheckpointError, match="in 2 bucket.*now has 3"):
        check_join_checkpoint(new, 3)
