"""Push queries over streams answered by the engine itself (``runtime/push.py`` ``ArrowPush``):
the same columns and rows as a Spark push query for many column types and WHEREs, which queries
take which path, rows that arrive after the query started, and bad records logged, not fatal."""

from __future__ import annotations

import math
import time
from typing import Any

import pytest

from tests.integration.test_engine import produce, read

pytestmark = pytest.mark.integration

ROWS = [
    ("a", '{"I": 1, "B": 10000000000, "D": 1.5, "DEC": 12.3, "S": "x", "BO": true, "BY": "AQID", "TS": 5}'),
    ("b", '{"I": -5, "B": -1, "D": -0.0, "DEC": -0.5, "S": "ÿ", "BO": false, "BY": ""}'),
    ("c", '{"I": 2147483647, "B": 9223372036854775807, "D": "NaN", "DEC": 9999.99, "S": "", "BO": null}'),
    (None, "not json"),  # the processing log's, between good rows
    ("d", "{}"),
    ("t", None),  # a null value is no row of a stream
    ("e", '{"I": 3, "B": 3, "D": 1e300, "DEC": 0, "S": "e", "BO": true}'),
]

#: (query, rows it answers, whether the engine answers it itself)
QUERIES = [
    ("SELECT * FROM push_s", 5, False),  # a TIMESTAMP column: Spark's plan
    ("SELECT id, i, b, d, dec, s, bo, by FROM push_s", 5, True),
    ("SELECT id, i + 1 AS i1, b * 2 AS b2, d * 2 AS d2, i * 0.5 AS half, i - b AS diff FROM push_s", 5, True),
    ("SELECT id, i * 2147483647 AS wraps FROM push_s WHERE id = 'c'", 1, True),
    ("SELECT id, ROWTIME AS rt, ROWPARTITION AS p, ROWOFFSET AS o FROM push_s WHERE i > 0", 3, True),
    ("SELECT id, d FROM push_s WHERE d > 0 OR d IS NULL", 4, True),
    ("SELECT id FROM push_s WHERE bo = true OR s = 'ÿ'", 3, True),
    ("SELECT id, i FROM push_s WHERE i % 2 = 1 AND i IS NOT NULL", 3, True),
    ("SELECT id, UCASE(s) AS u FROM push_s", 5, False),
    ("SELECT id FROM push_s WHERE s LIKE 'x%'", 1, False),
]


def _comparable(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, (list, tuple)):
        return [_comparable(v) for v in value]
    return value


@pytest.fixture
def typed_stream(engine, topic_name):  # type: ignore[no-untyped-def]
    src = topic_name("push")
    engine.execute(f"""
        SET 'auto.offset.reset'='earliest';
        CREATE STREAM push_s (id STRING KEY, i INT, b BIGINT, d DOUBLE, dec DECIMAL(6, 2), s STRING, bo BOOLEAN,
            by BYTES, ts TIMESTAMP) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=2);
    """)
    produce(engine.admin, src, [(k, v, n + 1) for n, (k, v) in enumerate(ROWS)])
    return engine


def _run(engine: Any, sql: str, limit: int) -> tuple[list[Any], list[Any], bool]:
    transient = engine.transient
    before = transient.push_paths["arrow"]
    [stream] = engine.execute(f"{sql} EMIT CHANGES LIMIT {limit};")
    rows = list(stream.rows(timeout=120))
    return stream.columns, rows, transient.push_paths["arrow"] == before + 1


def test_engine_push_matches_spark_push(typed_stream):  # type: ignore[no-untyped-def]
    engine = typed_stream
    differences = []
    for sql, count, arrow in QUERIES:
        fast = _run(engine, sql, count)
        engine.transient.arrow_pushes = False
        try:
            slow = _run(engine, sql, count)
        finally:
            engine.transient.arrow_pushes = True
        by_id = lambda rows: sorted(_comparable(rows), key=str)  # noqa: E731 - two partitions: any order
        if (fast[2] != arrow or fast[0] != slow[0] or by_id(fast[1]) != by_id(slow[1]) or slow[2]
                or len(fast[1]) != count):
            differences.append((sql, fast, slow))
    assert not differences, differences
    # the engine's own push query logs the undecodable record under its query id, as Spark's does
    [stream] = engine.execute("SELECT id FROM push_s EMIT CHANGES LIMIT 5;")
    assert len(list(stream.rows(timeout=120))) == 5 and engine.transient.push_paths["arrow"] >= 8
    deadline = time.monotonic() + 30
    while True:
        loggers = [v["logger"] for _, v, _ in read(engine.admin, engine.processing_log_topic)
                   if isinstance(v, dict) and (v.get("message") or {}).get("deserializationError")]
        if stream.query_id in loggers or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert stream.query_id in loggers, loggers


def test_engine_push_sees_rows_that_arrive_after_it_started(engine, topic_name):  # type: ignore[no-untyped-def]
    src = topic_name("later")
    engine.execute(f"CREATE STREAM later_s (k STRING KEY, v INT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', "
                   "PARTITIONS=1);")
    produce(engine.admin, src, [("old", '{"v": 0}', 1)])  # before the query: not seen (latest)
    [stream] = engine.execute("SELECT k, v * 10 AS v10 FROM later_s WHERE v > 1 EMIT CHANGES LIMIT 2;")
    assert engine.transient.push_paths["arrow"] >= 1
    assert stream.query_id in [q.id for q in engine.queries.push_queries()]  # SHOW QUERIES lists it
    time.sleep(0.5)
    produce(engine.admin, src, [("a", '{"v": 1}', 2), ("b", '{"v": 2}', 3), ("c", '{"v": 3}', 4)])
    assert list(stream.rows(timeout=60)) == [["b", 20], ["c", 30]]
    deadline = time.monotonic() + 10
    while stream.query_id in [q.id for q in engine.queries.push_queries()] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert stream.query_id not in [q.id for q in engine.queries.push_queries()]


def test_terminate_ends_an_engine_push(engine, topic_name):  # type: ignore[no-untyped-def]
    src = topic_name("term")
    engine.execute(f"CREATE STREAM term_s (k STRING KEY, v INT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', "
                   "PARTITIONS=1);")
    [stream] = engine.execute("SELECT * FROM term_s EMIT CHANGES;")
    produce(engine.admin, src, [("a", '{"v": 1}', 2)])
    assert stream.poll(60) == ["a", 1]
    engine.execute(f"TERMINATE {stream.query_id};")
    assert list(stream.rows(timeout=30)) == [] and stream.closed
