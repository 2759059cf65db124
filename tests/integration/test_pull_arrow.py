"""Pull queries over tables answered without Spark (``runtime/pull.py`` ``ArrowPull``): the same
rows, values and column types as the Spark path for many column types and WHEREs, and which
queries take which path."""

from __future__ import annotations

import math
from typing import Any

import pytest

from tests.integration.test_engine import produce

pytestmark = pytest.mark.integration

TYPED_ROWS = [
    ("a", '{"I": 1, "B": 10000000000, "D": 1.5, "DEC": 12.3, "S": "x", "BO": true, "BY": "AQID", '
          '"DT": 19000, "TM": 3600000, "TS": 1600000000123, "ARR": [1, null, 3], "MP": {"p": 1, "q": null}, '
          '"ST": {"A": 7, "B": "in"}, "DA": [1.25]}'),
    ("b", '{"I": -5, "B": -1, "D": -0.0, "DEC": -0.5, "S": "ÿ", "BO": false, "BY": "", "DT": 0, "TM": 0, '
          '"TS": 0, "ARR": [], "MP": {}, "ST": {"A": null, "B": null}, "DA": []}'),
    ("c", '{"I": 2147483647, "B": 9223372036854775807, "D": "NaN", "DEC": 9999.99, "S": "", "BO": null}'),
    ("d", '{}'),
    ("e", '{"I": 3, "B": 3, "D": 1e300, "DEC": 0, "S": "e", "BO": true, "ARR": [null], "ST": {"A": 1}}'),
]

#: (query, whether the Arrow path answers it)
TYPED_QUERIES = [
    ("SELECT * FROM typed_mat WHERE id = 'a';", True),
    ("SELECT * FROM typed_mat;", True),
    ("SELECT * FROM typed_mat WHERE id IN ('a', 'c', 'zz');", True),
    ("SELECT id, i FROM typed_mat WHERE id IN ('a', 'b', 'c') AND i IN (1, 2147483647, 5);", True),
    ("SELECT id, i, b, d, dec, s, bo, by, dt, tm, ts, arr, mp, st, da FROM typed_mat WHERE id >= 'b';", True),
    ("SELECT id, i + 1 AS i1, b * 2 AS b2, d * 2 AS d2, i * 0.5 AS half, b * 1.25 AS quarter, i - b AS diff "
     "FROM typed_mat WHERE id < 'e';", True),
    ("SELECT id, dec + 1 AS dec1 FROM typed_mat WHERE id = 'a';", False),  # a DECIMAL column: Spark's plan
    ("SELECT id, i * 2147483647 AS wraps, b + 1 AS wraps_too FROM typed_mat WHERE id = 'c';", True),
    ("SELECT id, ROWTIME AS rt, i FROM typed_mat WHERE i > 0 AND ROWTIME >= 2;", True),
    ("SELECT id, d FROM typed_mat WHERE d > 0 OR d IS NULL;", True),
    ("SELECT id, d FROM typed_mat WHERE d <> 1.5;", True),
    ("SELECT id, d FROM typed_mat WHERE d < 2;", True),
    ("SELECT id FROM typed_mat WHERE bo = true OR s = 'ÿ';", True),
    ("SELECT id, i FROM typed_mat WHERE i % 2 = 1 AND i IS NOT NULL;", True),
    ("SELECT id, UCASE(s) AS u FROM typed_mat WHERE id = 'a';", False),
    ("SELECT id, st->a AS a FROM typed_mat WHERE id = 'a';", False),
    ("SELECT id FROM typed_mat WHERE s LIKE 'x%';", False),
    ("SELECT id, i FROM typed_mat WHERE id = 'a' LIMIT 1;", True),
    ("SELECT * FROM typed_mat WHERE id = 'nope';", True),
]


def _comparable(value: Any) -> Any:
    """NaN as text: two NaN floats are never equal."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, (list, tuple)):
        return [_comparable(v) for v in value]
    if isinstance(value, dict):
        return {k: _comparable(v) for k, v in value.items()}
    return value


def _both_paths(engine: Any, sql: str) -> tuple[tuple[Any, Any], tuple[Any, Any], bool]:
    """(columns, rows) by the Arrow path where it applies and by Spark's, and whether the Arrow
    path answered."""
    transient = engine.transient
    before = transient.pull_paths["arrow"]
    [fast] = engine.execute(sql)
    fast_rows = list(fast.rows(timeout=60))
    took_arrow = transient.pull_paths["arrow"] == before + 1
    transient.arrow_pulls = False
    try:
        [slow] = engine.execute(sql)
        slow_rows = list(slow.rows(timeout=60))
    finally:
        transient.arrow_pulls = True
    return (fast.columns, fast_rows), (slow.columns, slow_rows), took_arrow


@pytest.fixture
def typed_table(engine, topic_name):  # type: ignore[no-untyped-def]
    src = topic_name("typed")
    engine.execute(f"""
        SET 'ksql.query.pull.table.scan.enabled'='true';
        CREATE TABLE typed_src (id STRING PRIMARY KEY, i INT, b BIGINT, d DOUBLE, dec DECIMAL(6, 2), s STRING,
            bo BOOLEAN, by BYTES, dt DATE, tm TIME, ts TIMESTAMP, arr ARRAY<INT>, mp MAP<STRING, INT>,
            st STRUCT<A INT, B STRING>, da ARRAY<DECIMAL(4, 2)>)
            WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);
        CREATE TABLE typed_mat AS SELECT * FROM typed_src;
    """)
    produce(engine.admin, src, [(k, v, n + 1) for n, (k, v) in enumerate(TYPED_ROWS)])
    engine.wait_until_idle()
    return engine


def test_arrow_path_matches_spark_for_every_column_type(typed_table):  # type: ignore[no-untyped-def]
    """One table, many queries (a table per query would cost a minute each)."""
    differences = []
    for sql, arrow in TYPED_QUERIES:
        fast, slow, took_arrow = _both_paths(typed_table, sql)
        if took_arrow != arrow or _comparable(fast) != _comparable(slow) or not (fast[1] or "nope" in sql):
            differences.append((sql, took_arrow, fast, slow))
    assert not differences


def test_typed_values_arrive_as_the_spark_path_shapes_them(typed_table):  # type: ignore[no-untyped-def]
    """The shapes themselves (not only their agreement): bytes as base64, decimals at their
    scale, maps and structs as dicts, TIME as milliseconds."""
    [pull] = typed_table.execute("SELECT by, dec, mp, st, tm, da FROM typed_mat WHERE id = 'a';")
    [[by, dec, mp, st, tm, da]] = list(pull.rows(timeout=60))
    assert by == "AQID" and str(dec) == "12.30" and mp == {"p": 1, "q": None}
    assert st == {"A": 7, "B": "in"} and tm == 3600000 and [str(x) for x in da] == ["1.25"]
    assert typed_table.transient.pull_paths["arrow"] >= 1


def test_aggregated_and_windowed_tables(engine, topic_name):  # type: ignore[no-untyped-def]
    src = topic_name("win")
    engine.execute(f"""
        SET 'ksql.query.pull.table.scan.enabled'='true';
        CREATE STREAM win_s (k STRING KEY, v INT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=2);
        CREATE TABLE win_counts AS SELECT k, COUNT(*) AS n, SUM(v) AS total FROM win_s
            WINDOW TUMBLING (SIZE 10 SECONDS) GROUP BY k;
        CREATE TABLE counts AS SELECT k, COUNT(*) AS n FROM win_s GROUP BY k;
    """)
    produce(engine.admin, src, [(f"k{i % 3}", f'{{"v": {i}}}', i * 4000) for i in range(12)])
    engine.wait_until_idle()
    queries = [
        "SELECT * FROM counts WHERE k = 'k1';",
        "SELECT k, n * 10 AS tens FROM counts WHERE k = 'k2';",
        "SELECT * FROM win_counts WHERE k = 'k0';",
        "SELECT * FROM win_counts WHERE k = 'k0' AND WINDOWSTART >= 10000 AND WINDOWSTART < 30000;",
        "SELECT k, WINDOWSTART, WINDOWEND, total FROM win_counts WHERE WINDOWEND > 20000;",
        "SELECT * FROM win_counts WHERE k = 'k1' AND WINDOWSTART = 20000;",
    ]
    for sql in queries:
        fast, slow, took_arrow = _both_paths(engine, sql)
        assert took_arrow, sql
        assert _comparable(fast) == _comparable(slow), sql
        assert fast[1], sql
    [pull] = engine.execute("SELECT * FROM counts WHERE k = 'k1';")
    assert list(pull.rows(timeout=60)) == [["k1", 4]]


def test_a_pull_querys_plan_is_reused_until_its_table_is_replaced(engine, topic_name):  # type: ignore[no-untyped-def]
    """The same pull query sent again is not planned again; a table dropped and created again
    under its name (other columns) is planned anew, never answered by the old plan."""
    src = topic_name("replan")
    create = (f"CREATE TABLE replan_t (id STRING PRIMARY KEY, {{cols}}) WITH (KAFKA_TOPIC='{src}', "
              f"VALUE_FORMAT='JSON', PARTITIONS=1); CREATE TABLE replan_m AS SELECT * FROM replan_t;")
    engine.execute(create.format(cols="a INT"))
    produce(engine.admin, src, [("k", '{"A": 1, "B": "two"}', 1)])
    engine.wait_until_idle()
    planned = []
    planner = engine.planner
    original = planner.plan_query

    def counting(query, **kw):  # type: ignore[no-untyped-def]
        if query.source.name == "REPLAN_M":  # the pull queries (the CTAS plans over REPLAN_T)
            planned.append(query)
        return original(query, **kw)

    planner.plan_query = counting
    try:
        for _ in range(3):
            [pull] = engine.execute("SELECT * FROM replan_m WHERE id = 'k';")
            assert list(pull.rows(timeout=60)) == [["k", 1]]
        assert len(planned) == 1
        engine.execute("DROP TABLE replan_m DELETE TOPIC; DROP TABLE replan_t;")
        engine.execute(create.format(cols="b STRING"))
        engine.wait_until_idle()
        [pull] = engine.execute("SELECT * FROM replan_m WHERE id = 'k';")
        assert pull.columns == [("ID", "STRING"), ("B", "STRING")]
        assert list(pull.rows(timeout=60)) == [["k", "two"]]
        assert len(planned) == 2
    finally:
        planner.plan_query = original
