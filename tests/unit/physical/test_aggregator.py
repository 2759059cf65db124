"""The aggregation processor and the aggregate functions, record by record (no Spark, no Kafka):
rows are given as the pre-aggregation stage would produce them."""

from __future__ import annotations

from typing import Any

import pytest

from streamsql import types as t
from streamsql.catalog import Catalog, Source
from streamsql.errors import AnalysisError
from streamsql.functions.catalog import builtin_registry
from streamsql.functions.registry import FunctionRegistry
from streamsql.physical.aggregator import AggregationProcessor, MemoryState
from streamsql.planner.aggregation import MATCH_COL, AggregatePlan
from streamsql.planner.planner import Planner
from streamsql.sql import parse


@pytest.fixture
def catalog() -> Catalog:
    c = Catalog()
    c.add(Source("S", "STREAM", [t.Column("ID", t.BIGINT, "key"), t.Column("V", t.INTEGER), t.Column("NAME", t.STRING)],
                 topic="s", key_format="KAFKA", value_format="JSON"))
    c.add(Source("T", "TABLE", [t.Column("K", t.STRING, "key"), t.Column("REGION", t.STRING), t.Column("V", t.INTEGER)],
                 topic="t", key_format="KAFKA", value_format="JSON"))
    return c


def plan(catalog: Catalog, sql: str, functions: FunctionRegistry | None = None) -> AggregatePlan:
    [stmt] = parse(sql)
    result = Planner(catalog, functions or builtin_registry()).plan_query(stmt.query, persistent=True, sink_name=stmt.name)
    assert isinstance(result, AggregatePlan)
    return result


def feed(p: AggregatePlan, records: list[dict[str, Any]], processor: AggregationProcessor | None = None,
         ) -> list[tuple[Any, ...]]:
    """Records as {key/arg values by source column, ts}; returns (key, window, results or None)."""
    proc = processor or AggregationProcessor(p, MemoryState())
    rows = []
    for offset, rec in enumerate(records):
        row: dict[str, Any] = {t.ROWTIME: rec["ts"], t.ROWPARTITION: 0, t.ROWOFFSET: offset}
        for name, _, _ in p.keys:
            row[name] = rec.get("key")
        for call in p.calls:
            for j, col in enumerate(call.arg_columns):
                row[col] = rec.get("args", {}).get(call.name, [None])[j] if call.name in rec.get("args", {}) \
                    else rec.get("v")
        if p.over_table:
            row[MATCH_COL] = rec.get("v") is not None or rec.get("match", False)
            row[p.source_key_columns[0]] = rec["sk"]
        rows.append(row)
    return [(u.key[0] if len(u.key) == 1 else u.key, u.window if u.window != (None, None) else None,
             None if u.removed else (u.results[0] if len(u.results) == 1 else u.results)) for u in proc.process(rows)]


def test_one_update_per_record_and_null_keys_dropped(catalog: Catalog) -> None:
    p = plan(catalog, "CREATE TABLE o AS SELECT id, SUM(v) AS s FROM s GROUP BY id;")
    out = feed(p, [{"key": 1, "v": 5, "ts": 1}, {"key": None, "v": 1, "ts": 2}, {"key": 1, "v": None, "ts": 3},
                   {"key": 2, "v": 7, "ts": 4}])
    assert out == [(1, None, 5), (1, None, 5), (2, None, 7)]


def test_table_aggregation_retracts_the_previous_value(catalog: Catalog) -> None:
    p = plan(catalog, "CREATE TABLE o AS SELECT region, COUNT(*) AS n, SUM(v) AS total FROM t GROUP BY region;")
    out = feed(p, [
        {"sk": "a", "key": "east", "v": 1, "ts": 1},
        {"sk": "b", "key": "east", "v": 2, "ts": 2},
        {"sk": "a", "key": "east", "v": 10, "ts": 3},  # same group: one update
        {"sk": "b", "key": "west", "v": 2, "ts": 4},   # moves: retract from east, then add to west
        {"sk": "a", "key": None, "v": None, "ts": 5},  # tombstone: retract only
    ])
    assert out == [("east", None, [1, 1]), ("east", None, [2, 3]), ("east", None, [2, 12]),
                   ("east", None, [1, 10]), ("west", None, [1, 2]), ("east", None, [0, 0])]


def test_functions_that_cannot_retract_are_rejected_over_tables(catalog: Catalog) -> None:
    with pytest.raises(AnalysisError, match="function MAX cannot be applied to a table"):
        plan(catalog, "CREATE TABLE o AS SELECT region, MAX(v) AS m FROM t GROUP BY region;")


def test_tumbling_window_drops_late_records_against_stream_time(catalog: Catalog) -> None:
    p = plan(catalog, "CREATE TABLE o AS SELECT id, COUNT(*) AS n FROM s "
                      "WINDOW TUMBLING (SIZE 10 SECONDS, GRACE PERIOD 5 SECONDS) GROUP BY id;")
    proc = AggregationProcessor(p, MemoryState())
    out = feed(p, [{"key": 1, "ts": 1000}, {"key": 1, "ts": 16000}, {"key": 1, "ts": 9000}, {"key": 1, "ts": 12000}],
               proc)
    assert out == [(1, (0, 10000), 1), (1, (10000, 20000), 1), (1, (10000, 20000), 2)]
    assert proc.dropped == 1


def test_hopping_windows_each_get_the_record(catalog: Catalog) -> None:
    p = plan(catalog, "CREATE TABLE o AS SELECT id, COUNT(*) AS n FROM s "
                      "WINDOW HOPPING (SIZE 10 SECONDS, ADVANCE BY 5 SECONDS) GROUP BY id;")
    assert feed(p, [{"key": 1, "ts": 7000}]) == [(1, (0, 10000), 1), (1, (5000, 15000), 1)]


def test_session_windows_merge_and_tombstone_the_merged_sessions(catalog: Catalog) -> None:
    p = plan(catalog, "CREATE TABLE o AS SELECT id, COUNT(*) AS n FROM s WINDOW SESSION (30 SECONDS) GROUP BY id;")
    out = feed(p, [{"key": 0, "ts": 0}, {"key": 0, "ts": 70010}, {"key": 0, "ts": 10009}])
    assert out == [(0, (0, 0), 1), (0, (70010, 70010), 1), (0, (0, 0), None), (0, (0, 10009), 2)]


def test_emit_final_holds_windows_until_they_close(catalog: Catalog) -> None:
    p = plan(catalog, "CREATE TABLE o AS SELECT id, COUNT(*) AS n FROM s "
                      "WINDOW TUMBLING (SIZE 2 MILLISECONDS, GRACE PERIOD 1 MILLISECONDS) GROUP BY id EMIT FINAL;")
    out = feed(p, [{"key": 1, "ts": 0}, {"key": 1, "ts": 1}, {"key": 2, "ts": 2}, {"key": 1, "ts": 3}])
    assert out == [(1, (0, 2), 2)]


def test_collection_and_offset_functions(catalog: Catalog) -> None:
    p = plan(catalog, "CREATE TABLE o AS SELECT id, TOPK(v, name, 2) AS top, EARLIEST_BY_OFFSET(v, 2, false) AS e, "
                      "LATEST_BY_OFFSET(v) AS l, COLLECT_SET(name) AS names, HISTOGRAM(name) AS h, "
                      "COUNT_DISTINCT(name) AS d FROM s GROUP BY id;")
    args = [("a", None), ("b", 3), ("a", 5)]
    rows = [{"key": 1, "ts": i, "args": {c.name: ([v, n] if c.function.name == "TOPK" else
                                                  [n] if c.function.name in ("COLLECT_SET", "HISTOGRAM", "COUNT_DISTINCT")
                                                  else [v]) for c in p.calls}} for i, (n, v) in enumerate(args)]
    out = feed(p, rows)
    assert out[-1][2] == [[{"sort_col": 5, "col0": "a"}, {"sort_col": 3, "col0": "b"}], [None, 3], 5, ["a", "b"],
                          {"a": 2, "b": 1}, 2]


def test_emit_final_follows_emit_on_window_close(catalog: Catalog) -> None:
    """ksqlDB's suppress QTT cases: default grace 0 for EMIT FINAL; windows whose store segment
    expired (Kafka Streams' segments of retention/2) are never emitted."""
    no_grace = plan(catalog, "CREATE TABLE o AS SELECT id, COUNT(*) AS n FROM s "
                             "WINDOW TUMBLING (SIZE 2 MILLISECONDS) GROUP BY id EMIT FINAL;")
    assert feed(no_grace, [{"key": 1, "ts": 0}, {"key": 1, "ts": 1}, {"key": 1, "ts": 2}]) == [(1, (0, 2), 2)]
    grace = plan(catalog, "CREATE TABLE o AS SELECT id, COUNT(*) AS n FROM s "
                          "WINDOW TUMBLING (SIZE 2 MILLISECONDS, GRACE PERIOD 1 MILLISECONDS) GROUP BY id EMIT FINAL;")
    out = feed(grace, [{"key": 1, "ts": ts} for ts in (0, 1, 2, 1, 0, 5, 0)])
    assert out == [(1, (2, 4), 1)]
    jump = plan(catalog, "CREATE TABLE o AS SELECT id, COUNT(*) AS n FROM s "
                         "WINDOW TUMBLING (SIZE 2 MILLISECONDS, GRACE PERIOD 2 MILLISECONDS) GROUP BY id EMIT FINAL;")
    assert feed(jump, [{"key": 1, "ts": ts} for ts in (0, 1, 2, 0, 3, 0, 10, 0, 30)]) == []
    session = plan(catalog, "CREATE TABLE o AS SELECT id, COUNT(*) AS n FROM s "
                            "WINDOW SESSION (5 MILLISECONDS, GRACE PERIOD 6 MILLISECONDS) GROUP BY id EMIT FINAL;")
    out = feed(session, [{"key": 1, "ts": ts} for ts in (0, 4, 8, 12, 14, 30, 29, 17, 42)])
    assert out == [(1, (0, 14), 5), (1, (29, 30), 2)]


def test_sum_list_adds_every_element(catalog: Catalog) -> None:
    catalog.add(Source("L", "STREAM", [t.Column("ID", t.STRING, "key"), t.Column("XS", t.Array(t.INTEGER))],
                       topic="l", key_format="KAFKA", value_format="JSON"))
    p = plan(catalog, "CREATE TABLE o AS SELECT id, SUM_LIST(xs) AS total FROM l GROUP BY id;")
    assert p.columns[-1].type == t.INTEGER
    out = feed(p, [{"key": "a", "v": [1, 1], "ts": 1}, {"key": "a", "v": [2, None, 2], "ts": 2},
                   {"key": "a", "v": None, "ts": 3}])
    assert out == [("a", None, 2), ("a", None, 6), ("a", None, 6)]
    with pytest.raises(AnalysisError, match="sum_list"):
        plan(catalog, "CREATE TABLE o2 AS SELECT id, SUM_LIST(id) AS total FROM l GROUP BY id;")


def test_attr_is_the_common_value_or_null_and_retracts() -> None:

    acc = builtin_registry().aggregate("ATTR").bind([t.STRING], []).create()
    acc.add(["1"])
    acc.add(["1"])
    assert acc.result() == "1"
    acc.add([None])  # null is a value of its own (ksqlDB's attr.json)
    assert acc.result() is None
    acc.remove([None])
    assert acc.result() == "1"
    acc.remove(["1"])
    acc.remove(["1"])
    acc.add(["2"])
    assert acc.result() == "2"


# --- the record cache: one update per key and window per batch, results computed once ----------

_COUNTED_UDAF = '''
from streamsql.udf import udaf

MAPPED = []

@udaf(name="LAST_SEEN", returns="VARCHAR", params=["VARCHAR"])
class LastSeen:
    def initialize(self):
        return ""
    def aggregate(self, value, acc):
        return value if value is not None else acc
    def merge(self, a, b):
        return b
    def map(self, acc):
        MAPPED.append(acc)
        if acc == "boom":
            raise ValueError("cannot map boom")
        return acc
'''


@pytest.fixture
def last_seen(tmp_path: Any) -> tuple[FunctionRegistry, list[str]]:
    """A Python UDAF that records every ``map`` call (and fails to map the value "boom"): the
    registry it is loaded into, and the calls."""
    from streamsql.functions.python.aggregate import _impl
    from streamsql.functions.python.library import PythonFunctions

    (tmp_path / "last_seen.py").write_text(_COUNTED_UDAF)
    functions = PythonFunctions(builtin_registry())
    assert functions.load(str(tmp_path)) == []
    return functions.registry, _impl("LAST_SEEN", 0, []).map.__globals__["MAPPED"]


def _rows(p: AggregatePlan, records: list[tuple[Any, Any, int]]) -> list[dict[str, Any]]:
    """(key, value, ts) records as pre-aggregation rows of a stream aggregation (every call's
    arguments take the value)."""
    return [{t.ROWTIME: ts, t.ROWPARTITION: 0, t.ROWOFFSET: i, p.keys[0][0]: key,
             **{col: value for call in p.calls for col in call.arg_columns}}
            for i, (key, value, ts) in enumerate(records)]


def test_the_record_cache_maps_each_changed_key_once_per_batch(
        catalog: Catalog, last_seen: tuple[FunctionRegistry, list[str]]) -> None:
    functions, mapped = last_seen
    p = plan(catalog, "CREATE TABLE o AS SELECT id, LAST_SEEN(name) AS n FROM s "
                      "WINDOW TUMBLING (SIZE 10 SECONDS) GROUP BY id;", functions)
    records = [(1, "a", 1000), (2, "b", 1500), (1, "c", 2000), (1, "d", 12000), (2, "e", 3000), (1, "f", 4000)]
    out = AggregationProcessor(p, MemoryState(), latest_only=True).process(_rows(p, records))
    assert [(u.key, u.window, u.results) for u in out] == [
        ((1,), (10000, 20000), ["d"]), ((2,), (0, 10000), ["e"]), ((1,), (0, 10000), ["f"])]
    assert sorted(mapped) == ["d", "e", "f"]  # once per key and window, not once per record
    mapped.clear()
    AggregationProcessor(p, MemoryState()).process(_rows(p, records))
    assert len(mapped) == len(records)  # the cache off: every update is written


@pytest.mark.parametrize("sql", [
    "CREATE TABLE o AS SELECT id, SUM(v) AS s, COUNT(*) AS n FROM s GROUP BY id HAVING SUM(v) > 3;",
    "CREATE TABLE o AS SELECT id, SUM(v) AS s FROM s WINDOW HOPPING (SIZE 10 SECONDS, ADVANCE BY 5 SECONDS, "
    "GRACE PERIOD 0 SECONDS) GROUP BY id;",
    "CREATE TABLE o AS SELECT id, COLLECT_LIST(v) AS l FROM s WINDOW SESSION (3 SECONDS) GROUP BY id;",
    "CREATE TABLE o AS SELECT id, COUNT(*) AS n FROM s WINDOW TUMBLING (SIZE 10 SECONDS) GROUP BY id EMIT FINAL;",
])
def test_the_record_cache_writes_what_collapsing_every_update_gives(catalog: Catalog, sql: str) -> None:
    from streamsql.physical.aggregator import collapse

    p = plan(catalog, sql)
    records = [(1, 2, 1000), (2, 5, 1500), (1, 3, 2000), (1, 4, 12000), (2, 1, 3000), (1, 7, 5500), (1, 1, 7000),
               (2, 2, 26000), (1, 5, 27000)]
    batches = [records[:4], records[4:]]

    def run(latest_only: bool) -> list[tuple[Any, ...]]:
        state = MemoryState()
        seen = []
        for batch in batches:
            proc = AggregationProcessor(p, state, latest_only=latest_only)
            updates = proc.process(_rows(p, batch))
            state.apply(proc.state_changes())
            seen += [(u.key, u.window, u.results, u.rowtime, u.had, u.previous, u.removed)
                     for u in (updates if latest_only else collapse(updates))]
        return seen

    assert run(latest_only=True) == run(latest_only=False)


def test_a_result_that_fails_under_the_record_cache_is_logged_with_its_key(
        catalog: Catalog, last_seen: tuple[FunctionRegistry, list[str]]) -> None:
    p = plan(catalog, "CREATE TABLE o AS SELECT id, LAST_SEEN(name) AS n FROM s GROUP BY id;", last_seen[0])
    reported: list[tuple[dict[str, Any], BaseException]] = []
    proc = AggregationProcessor(p, MemoryState(), on_error=lambda row, e: reported.append((row, e)), latest_only=True)
    out = proc.process(_rows(p, [(1, "a", 1), (2, "boom", 2), (3, "c", 3)]))
    assert [(u.key, u.results) for u in out] == [((1,), ["a"]), ((3,), ["c"])]  # the other keys are written
    assert proc.errors == 1 and "result of key [2]" in (proc.last_error or "")
    assert "cannot map boom" in str(reported[0][1]) and reported[0][0] == {p.keys[0][0]: 2}


def test_state_written_when_the_processor_lived_in_runtime_resumes(catalog: Catalog,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The processor's state pickles its groups and pending EMIT FINAL updates by class, and a
    query's state written before the module moved (``streamsql.runtime.aggregator``) names them
    there: it resumes as if written now."""
    import sys
    import types

    from streamsql.physical import aggregator

    p = plan(catalog, "CREATE TABLE o AS SELECT id, COUNT(*) AS n FROM s WINDOW TUMBLING (SIZE 10 SECONDS, "
                      "GRACE PERIOD 0 SECONDS) GROUP BY id EMIT FINAL;")
    first, second = [(1, 2, 1000), (2, 5, 1500), (1, 3, 12000), (1, 4, 13000)], [(2, 1, 21000)]

    def resumed(state: MemoryState) -> list[tuple[Any, ...]]:
        updates = AggregationProcessor(p, state).process(_rows(p, second))
        return [(u.key, u.window, u.results, u.rowtime) for u in updates]

    def first_batch() -> MemoryState:
        state = MemoryState()
        proc = AggregationProcessor(p, state)
        proc.process(_rows(p, first))
        state.apply(proc.state_changes())
        return state

    now = first_batch()
    with monkeypatch.context() as m:
        former = types.ModuleType("streamsql.runtime.aggregator")
        for cls in (aggregator.Group, aggregator.Update):
            setattr(former, cls.__name__, cls)
            m.setattr(cls, "__module__", former.__name__)
        m.setitem(sys.modules, former.__name__, former)
        before = first_batch()
    assert b"streamsql.runtime.aggregator" in b"".join(before._blobs.values())
    assert b"streamsql.runtime.aggregator" not in b"".join(now._blobs.values())
    expected = resumed(now)
    assert expected and resumed(before) == expected


def test_state_written_when_the_accumulators_lived_in_the_planner_resumes(catalog: Catalog,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The state pickles each group's accumulators by class: a query's state written while they
    lived in ``streamsql.planner.aggregates`` (before ``streamsql/functions/``) resumes."""
    import sys
    import types

    from streamsql.functions import aggregates

    p = plan(catalog, "CREATE TABLE o AS SELECT id, COUNT(*) AS n, SUM(v) AS s FROM s GROUP BY id;")
    first, second = [(1, 2, 1000), (2, 5, 1500), (1, 3, 2000)], [(1, 4, 3000)]

    def batch(state: MemoryState, rows: list[tuple[int, int, int]]) -> list[tuple[Any, ...]]:
        proc = AggregationProcessor(p, state)
        updates = proc.process(_rows(p, rows))
        state.apply(proc.state_changes())
        return [(u.key, u.results) for u in updates]

    now = MemoryState()
    batch(now, first)
    with monkeypatch.context() as m:
        former = types.ModuleType("streamsql.planner.aggregates")
        for cls in (aggregates.Count, aggregates.Sum):
            setattr(former, cls.__name__, cls)
            m.setattr(cls, "__module__", former.__name__)
        m.setitem(sys.modules, former.__name__, former)
        before = MemoryState()
        batch(before, first)
    assert b"streamsql.planner.aggregates" in b"".join(before._blobs.values())
    assert b"streamsql.planner.aggregates" not in b"".join(now._blobs.values())
    expected = batch(now, second)
    assert expected == [((1,), [3, 9])] and batch(before, second) == expected


def test_stddev_is_ksqldbs_youngs_cramer_to_the_last_bit() -> None:
    """STDDEV_SAMPLE computes as ksqlDB's StandardDeviationSampleUdaf (Youngs-Cramer): the sum of
    squares it used before gave 5325116385962.539 where ksqlDB gives 5325116385962.54
    (standarddeviation.json's values); a retraction and a merge as ksqlDB's undo and merge, and a
    state pickled with the sum of squares resumes."""
    import pickle

    from streamsql.functions.aggregates import StddevSamp
    from streamsql.functions.catalog import builtin_registry

    values = [9223372036854.775, 300.8, -200000.6, 0.0]  # a sum of squares: 4611686051710.688
    acc = builtin_registry().aggregate("STDDEV_SAMPLE").bind([t.DOUBLE], []).create()
    n, total, m2 = 0, 0.0, 0.0
    for v in values:
        acc.add([v])
        if n > 0:  # ksqlDB's aggregate(), written out
            delta = v * (n + 1) - (total + v)
            m2 = delta * delta / ((n + 1) * n) + m2
        n, total = n + 1, v + total
    assert acc.result() == (m2 / (n - 1)) ** 0.5 == 4611686051710.689
    ints = builtin_registry().aggregate("STDDEV_SAMPLE").bind([t.BIGINT], []).create()
    for v in (1, 2, 3, 4):
        ints.add([v])
    ints.remove([4])
    assert ints.result() == 1.0
    merged, other = StddevSamp(), StddevSamp()
    for v in (1, 2, 3):
        merged.add([v])
    for v in (10, 20):
        other.add([v])
    merged.merge(other)
    assert abs(merged.result() - 7.981227975693966) < 1e-12
    old = StddevSamp.__new__(StddevSamp)
    old.__dict__.update({"root": True, "n": 3, "total": 6.0, "squares": 14.0})
    resumed = pickle.loads(pickle.dumps(old))
    assert resumed.result() == 1.0
