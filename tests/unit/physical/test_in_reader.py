"""Which compiled Spark SQL the reader's tasks evaluate (physical/in_reader.py), with Spark's
types, and what pyarrow computes for them (kafka/pipe.py). No Spark: the types asserted are
Spark's documented coercion, checked against Spark end to end in tests/integration/test_engine.py."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest

from streamsql.kafka.pipe import arrow_type, evaluate
from streamsql.physical.in_reader import column_program

TYPES = {"PRICE": "int64", "N": "int32", "AMOUNT": "float64", "NAME": "other", "ROWTIME": "int64"}


@pytest.mark.parametrize(("sql", "result"), [
    ("`PRICE`", "int64"),
    ("`NAME`", "other"),
    ("(CAST(0.908 AS DECIMAL(3,3)) * `PRICE`)", "decimal(24,3)"),
    ("(CAST(0.908 AS DECIMAL(3,3)) * `N`)", "decimal(14,3)"),
    ("(`N` + 1)", "int32"),
    ("(`N` * `PRICE`)", "int64"),
    ("(`N` + 3000000000)", "int64"),
    ("(`AMOUNT` * 2)", "float64"),
    ("(`AMOUNT` - CAST(1.5 AS DECIMAL(2,1)))", "float64"),
    ("(CAST(1.5 AS DECIMAL(2,1)) + 2)", "decimal(3,1)"),  # the literal 2 is DECIMAL(1,0) beside a decimal
    ("((`PRICE` * 2) - `N`)", "int64"),
])
def test_translated_expressions_have_spark_types(sql: str, result: str) -> None:
    program = column_program(sql, TYPES)
    assert program is not None and program["type"] == result


@pytest.mark.parametrize("sql", [
    "(`NAME` + 1)",  # not numeric
    "lcase(`NAME`)",  # functions stay in Spark
    "(`PRICE` / 2)",  # division: Spark's result is a double or a decimal by rules not translated
    "CAST(`PRICE` AS DOUBLE)",
    "`OTHER`",  # not a decoded column
    "(CAST(0.5 AS DECIMAL(30,1)) * CAST(0.5 AS DECIMAL(30,1)))",  # past 38 digits: Spark reduces the scale
    "'text'",
])
def test_what_stays_in_spark(sql: str) -> None:
    assert column_program(sql, TYPES) is None


def test_pyarrow_computes_what_spark_does() -> None:
    batch = pa.RecordBatch.from_pydict({
        "PRICE": pa.array([1234, None, -7, 2**62], pa.int64()),
        "N": pa.array([2**30, 1, None, -3], pa.int32()),
        "AMOUNT": pa.array([2.5, float("nan"), None, -0.1], pa.float64()),
    })

    def run(sql: str) -> pa.Array:
        program = column_program(sql, TYPES)
        assert program is not None
        out = evaluate(program, batch)
        assert out.type == arrow_type(program["type"])
        return out

    assert run("(CAST(0.908 AS DECIMAL(3,3)) * `PRICE`)").to_pylist() == [
        Decimal("1120.472"), None, Decimal("-6.356"), Decimal(2**62) * Decimal("0.908")]
    assert run("(`N` * 4)").to_pylist() == [0, 4, None, -12]  # Java's int overflow wraps, as Spark's
    assert run("(`PRICE` * 4)").to_pylist()[3] == 0
    doubled = run("(`AMOUNT` * 2)").to_pylist()
    assert doubled[0] == 5.0 and doubled[1] != doubled[1] and doubled[2] is None and doubled[3] == -0.2
    assert run("(CAST(1.5 AS DECIMAL(2,1)) + 2)").to_pylist() == [Decimal("3.5")] * 4
