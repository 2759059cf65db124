"""A statement of 1,500-term expressions runs in a real SparkSession (issue #52): the parser and
the planner loop over operator chains, and the planner writes a long chain as a fold Spark can
parse (planner/expressions.py ``_FOLD_FROM``); the answers are the left-to-right ones."""

from __future__ import annotations

import functools

import pytest

pytestmark = pytest.mark.integration

TERMS = 1500


def test_a_1500_term_where_and_select_answer_correctly(engine, topic_name):  # type: ignore[no-untyped-def]
    src = topic_name("chain")
    engine.execute(f"""
        CREATE STREAM chain (k VARCHAR KEY, n INT, d DOUBLE, s VARCHAR)
            WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);
        INSERT INTO chain (k, n, d, s, ROWTIME) VALUES ('a', 1, 0.1, 'x', 0);
        INSERT INTO chain (k, n, d, s, ROWTIME) VALUES ('b', 2, 0.7, 'y', 1);
        INSERT INTO chain (k, n, d, s, ROWTIME) VALUES ('c', 3, 0.3, 'z', 2);
    """)
    int_sum = " + ".join(["n"] * TERMS)
    double_sum = " + ".join(["d"] * TERMS)
    conjunction = " AND ".join(["n > 1"] * TERMS)
    disjunction = " OR ".join(["n = 2"] * TERMS)
    concatenation = " + ".join(["s"] * TERMS)
    [pull] = engine.execute(
        f"SELECT k, {int_sum} AS total, {double_sum} AS dsum, {concatenation} AS text FROM chain "
        f"WHERE {conjunction} AND ({disjunction}) AND {int_sum} > {TERMS};")
    rows = list(pull.rows(timeout=120))
    assert [row[:2] for row in rows] == [["b", 2 * TERMS]]
    # DOUBLE addition is not associative: the fold adds left to right, as the chain is written
    assert rows[0][2] == functools.reduce(lambda acc, x: acc + x, [0.7] * TERMS)
    assert rows[0][3] == "y" * TERMS
