"""Which WHERE conjuncts a stream's reader applies before Spark (planner/pushdown.py), and that
the reader's pyarrow expression keeps every row the WHERE keeps (kafka/filters.compile_filter)."""

from __future__ import annotations

import json
import math

import pyarrow as pa
import pytest

from streamsql import types as t
from streamsql.catalog import Catalog, Source
from streamsql.functions.catalog import builtin_registry
from streamsql.kafka.filters import compile_filter
from streamsql.planner.planner import Planner
from streamsql.planner.pushdown import filter_text
from streamsql.sql import parse
from streamsql.types import TOMBSTONE_COL


@pytest.fixture
def catalog() -> Catalog:
    c = Catalog()
    columns = [t.Column("ID", t.STRING, "key"), t.Column("AMOUNT", t.DOUBLE), t.Column("N", t.INTEGER),
               t.Column("BIG", t.BIGINT), t.Column("NAME", t.STRING), t.Column("OK", t.BOOLEAN),
               t.Column("TAGS", t.Array(t.STRING))]
    c.add(Source("PAY", "STREAM", columns, topic="pay", key_format="KAFKA", value_format="JSON"))
    c.add(Source("PAYT", "TABLE", [t.Column("ID", t.STRING, "primary_key"), *columns[1:]], topic="payt",
                 key_format="KAFKA", value_format="JSON"))
    c.add(Source("TEXT_TIMED", "STREAM", [t.Column("TS", t.STRING), t.Column("BIG", t.BIGINT)], topic="tt",
                 key_format="KAFKA", value_format="JSON", timestamp_column="TS", timestamp_format="yyyy"))
    return c


def pushed(catalog: Catalog, where: str, source: str = "PAY") -> object:
    [stmt] = parse(f"CREATE STREAM o AS SELECT * FROM {source} WHERE {where};")
    text = Planner(catalog, builtin_registry()).plan_query(stmt.query, persistent=True, sink_name="O").source_filter
    return None if text is None else json.loads(text)


def test_simple_comparisons_are_pushed_and_the_rest_stays_in_spark(catalog: Catalog) -> None:
    assert pushed(catalog, "amount > 0.8") == {
        "op": "greater", "args": [{"column": "AMOUNT"}, {"value": 0.8}], "nan_kept": True}
    assert pushed(catalog, "big % 123 = 0") == {"op": "equal", "args": [
        {"op": "java_remainder", "args": [{"column": "BIG"}, {"value": 123}]}, {"value": 0}], "nan_kept": False}
    assert pushed(catalog, "5 < n") == {"op": "greater", "args": [{"column": "N"}, {"value": 5}], "nan_kept": False}
    # of an AND, each side on its own; of an OR, both sides or nothing
    assert pushed(catalog, "name = 'x' AND UCASE(name) = 'X'") == {
        "op": "equal", "args": [{"column": "NAME"}, {"value": "x"}], "nan_kept": False}
    assert pushed(catalog, "name = 'x' OR UCASE(name) = 'X'") is None
    assert pushed(catalog, "(ok = true OR big IS NULL) AND id IS NOT NULL") == {"op": "and", "args": [
        {"op": "or", "args": [{"op": "equal", "args": [{"column": "OK"}, {"value": True}], "nan_kept": False},
                              {"op": "is_null", "args": [{"column": "BIG"}]}]},
        {"op": "is_valid", "args": [{"column": "ID"}]}]}


def test_an_in_list_is_the_or_of_its_equalities(catalog: Catalog) -> None:
    """Spark's ``x IN (a, b)`` is ``x = a OR x = b`` in three-valued logic: pushed, exact, and
    evaluated so (a null ``x`` drops the row, NaN matches no number)."""
    from streamsql.kafka.filters import filter_expression, filter_mask

    equal = {"op": "equal", "args": [{"column": "N"}, {"value": 1}], "nan_kept": False}
    assert pushed(catalog, "n IN (1)") == equal
    assert pushed(catalog, "n IN (1, -2) AND name = 'x'") == {"op": "and", "args": [
        {"op": "or", "args": [equal, {"op": "equal", "args": [{"column": "N"}, {"value": -2}], "nan_kept": False}]},
        {"op": "equal", "args": [{"column": "NAME"}, {"value": "x"}], "nan_kept": False}]}
    assert pushed(catalog, "n IN (1, 2.5)") is None  # an integer column against a decimal
    assert pushed(catalog, "name IN ('x', NULL)") is None
    assert pushed(catalog, "name IN ('x', UCASE(name))") is None
    [stmt] = parse("SELECT * FROM pay WHERE amount IN (0.5, 2) AND name IN ('a', 'ÿ') EMIT CHANGES;")
    tree = Planner(catalog, builtin_registry()).plan_query(stmt.query, persistent=False).exact_filter
    assert tree is not None
    batch = pa.RecordBatch.from_pydict({"I": pa.array(range(5), pa.int64()),
                                        "AMOUNT": pa.array([0.5, math.nan, None, 2.0, 2.0], pa.float64()),
                                        "NAME": pa.array(["a", "a", "a", "ÿ", "b"], pa.string())})
    assert batch.filter(filter_expression(tree)).column("I").to_pylist() == [0, 3]
    assert batch.filter(filter_mask(tree, batch)).column("I").to_pylist() == [0, 3]


@pytest.mark.parametrize("where", [
    "n > 0.5",              # an integer column against a decimal: Spark compares decimals
    "amount * 2 > 1",       # arithmetic besides %
    "big % -3 = 0",         # a negative divisor
    "big % 0 = 0",
    "NOT (big > 1)",        # NOT: ksqlDB's comparison with null is false, NOT of it true
    "ROWTIME > 5",          # pseudo columns
    "ARRAY_LENGTH(tags) > 1",
    "big = n",              # column against column
])
def test_conjuncts_that_could_evaluate_otherwise_are_not_pushed(catalog: Catalog, where: str) -> None:
    assert pushed(catalog, where) is None


def test_tables_and_text_timestamps_are_not_filtered_by_the_reader(catalog: Catalog) -> None:
    assert pushed(catalog, "big > 1", "PAYT") is None  # a table's reader passes every change
    assert pushed(catalog, "big > 1", "TEXT_TIMED") is None  # rows get their time after the reader


def keeps(tree: dict[str, object], columns: dict[str, list[object]], types: dict[str, pa.DataType]) -> list[bool]:
    n = len(next(iter(columns.values())))
    data = {name: pa.array(values, types[name]) for name, values in columns.items() if name != TOMBSTONE_COL}
    data[TOMBSTONE_COL] = pa.array(columns.get(TOMBSTONE_COL, [False] * n), pa.bool_())
    batch = pa.RecordBatch.from_pydict(data)
    kept = batch.filter(compile_filter(json.dumps(tree)))
    return [i in set(kept.column("I").to_pylist()) for i in range(n)]


def test_the_readers_filter_keeps_what_spark_keeps() -> None:
    # Java's remainder (the dividend's sign) where pyarrow's modulo floors
    remainder = {"op": "equal", "args": [{"op": "java_remainder", "args": [{"column": "B"}, {"value": 123}]},
                                         {"value": -7}], "nan_kept": False}
    b = [-7, 116, -130, None, 7]
    assert keeps(remainder, {"I": list(range(5)), "B": b}, {"I": pa.int64(), "B": pa.int64()}) == [
        x is not None and int(math.fmod(x, 123)) == -7 for x in b]
    # NaN is above every number in Spark: kept by >, and by < too (the WHERE drops it there)
    greater = {"op": "greater", "args": [{"column": "D"}, {"value": 0.8}], "nan_kept": True}
    d = [0.9, 0.1, math.nan, None, 0.8]
    assert keeps(greater, {"I": list(range(5)), "D": d}, {"I": pa.int64(), "D": pa.float64()}) == [
        True, False, True, False, False]
    # a tombstone always passes (the query decides what a null value means)
    assert keeps(greater, {"I": [0, 1], "D": [None, 0.1], TOMBSTONE_COL: [True, False]},
                 {"I": pa.int64(), "D": pa.float64()}) == [True, False]


def test_an_exact_filter_is_the_whole_where_and_keeps_nan_where_spark_does(catalog: Catalog) -> None:
    """``exact_filter`` (the reader runs the whole step, kafka/pipe.py): every conjunct or none,
    and a DOUBLE comparison true for NaN exactly where Spark's is (NaN is above every number)."""
    from streamsql.kafka.filters import filter_expression

    def exact(where: str) -> object:
        [stmt] = parse(f"SELECT * FROM pay WHERE {where} EMIT CHANGES;")
        p = Planner(catalog, builtin_registry()).plan_query(stmt.query, persistent=False)
        return json.loads(p.exact_filter) if p.exact_filter else None

    assert exact("amount > 0.8 AND LCASE(name) = 'x'") is None  # one conjunct stays in Spark
    assert exact("(n = 1 AND LCASE(name) = 'x') OR n = 2") is None
    assert exact("n = 1 AND big % 10 = 0") is not None
    d = [0.9, 0.1, math.nan, None, 0.8]
    batch = pa.RecordBatch.from_pydict({"I": pa.array(range(5), pa.int64()), "AMOUNT": pa.array(d, pa.float64())})
    spark = {">": [True, False, True, None, False], ">=": [True, False, True, None, True],
             "<>": [True, True, True, None, False], "<": [False, True, False, None, False],
             "<=": [False, True, False, None, True], "=": [False, False, False, None, True]}
    for op, expected in spark.items():
        tree = exact(f"amount {op} 0.8")
        assert tree is not None, op
        kept = batch.filter(filter_expression(json.dumps(tree))).column("I").to_pylist()
        assert kept == [i for i, keep in enumerate(expected) if keep], op


def test_a_pushed_filter_reads_as_sql_in_explain_and_topology(catalog: Catalog) -> None:
    def text(where: str) -> str:
        [stmt] = parse(f"CREATE STREAM o AS SELECT * FROM PAY WHERE {where};")
        tree = Planner(catalog, builtin_registry()).plan_query(stmt.query, persistent=True, sink_name="O").source_filter
        assert tree is not None
        return filter_text(tree)

    assert text("amount > 0.8") == "AMOUNT > 0.8"
    assert text("(ok = true OR big IS NULL) AND id IS NOT NULL AND name = 'o''k'") == (
        "(OK = TRUE OR BIG IS NULL) AND ID IS NOT NULL AND NAME = 'o''k'")
    assert text("big % 123 <> -7 AND n IN (1, 2)") == "BIG % 123 <> -7 AND (N = 1 OR N = 2)"
