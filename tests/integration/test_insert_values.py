"""INSERT VALUES' plain literals skip Spark: the value they give is the one Spark's CAST gives."""

from __future__ import annotations

from streamsql import types as t
from streamsql.functions.catalog import builtin_registry
from streamsql.planner.planner import compile_constant
from streamsql.runtime.executors.inserts import _NOT_PLAIN, plain_literal
from streamsql.sql.parser import parse

LITERALS = ["'k0'", "''", "'it''s'", "'日本 ☃'", "'  spaced '", "'\\n'", "0", "1", "-1", "007", "-0", "2147483647",
            "2147483648", "-2147483648", "-2147483649", "9223372036854775807", "-9223372036854775808",
            "1.5", "-1.5", "1e3", "true", "false", "null", "'true'", "'1'", "1 + 1",
            "CAST(1 AS BIGINT)", "-'a'"]
TYPES = [t.STRING, t.INTEGER, t.BIGINT, t.BOOLEAN, t.DOUBLE]


def test_plain_literals_give_what_spark_gives(spark) -> None:  # type: ignore[no-untyped-def]
    checked = 0
    for literal in LITERALS:
        node = parse(f"INSERT INTO X (A) VALUES ({literal});")[0].values[0]  # type: ignore[attr-defined]
        for ty in TYPES:
            plain = plain_literal(node, ty)
            if plain is _NOT_PLAIN:
                continue
            sql = compile_constant(node, builtin_registry()).sql
            row = spark.sql(f"SELECT CAST({sql} AS {t.to_spark(ty).simpleString()}) AS v").collect()[0]
            assert row["v"] == plain and type(row["v"]) is type(plain), (literal, ty, plain, row["v"])
            checked += 1
    assert checked >= 20, checked


def test_only_plain_literals_skip_spark() -> None:
    def plain(literal: str, ty: t.SqlType) -> object:
        return plain_literal(parse(f"INSERT INTO X (A) VALUES ({literal});")[0].values[0], ty)  # type: ignore[attr-defined]

    assert plain("'k0'", t.STRING) == "k0"
    assert plain("-7", t.BIGINT) == -7
    assert plain("null", t.DOUBLE) is None
    for literal, ty in [("2147483648", t.INTEGER), ("1", t.DOUBLE), ("1.5", t.INTEGER), ("'1'", t.INTEGER),
                        ("1", t.STRING), ("true", t.STRING), ("1 + 1", t.INTEGER), ("-'a'", t.STRING)]:
        assert plain(literal, ty) is _NOT_PLAIN, (literal, ty)
