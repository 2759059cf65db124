"""Python ports of the test functions ksqlDB's conformance tests call (TEST_UDTF, THROWING_UDTF,
BAD_UDF). ksqlDB's QTT runner has its Java test UDFs on the classpath; ``streamsql test`` loads
this directory as its extension directory for the same reason. Written from the expected
outputs in the QTT files, not from ksqlDB's code."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from streamsql.udf import udf, udtf


def java_string(v: Any) -> str:
    """The text Java's toString gives the values the tests pass (ksqlDB's TestUdtf stringifies)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, Decimal):
        return format(v, "f")
    if hasattr(v, "asDict"):
        return "Struct{" + ",".join(f"{k}={java_string(x)}" for k, x in v.asDict().items()) + "}"
    if isinstance(v, dict):
        return "Struct{" + ",".join(f"{k}={java_string(x)}" for k, x in v.items()) + "}"
    return str(v)


_SCALARS = ["INT", "BIGINT", "DOUBLE", "BOOLEAN", "VARCHAR", "DECIMAL(20, 10)", "STRUCT<A VARCHAR>"]


@udtf(name="TEST_UDTF", returns="INT", params=["INT"], description="ksqlDB test function: returns its argument.")
def test_udtf_int(x: int | None) -> list:
    return [x]


@udtf(name="TEST_UDTF", returns="VARCHAR", params=_SCALARS,
      description="ksqlDB test function: one row per argument, as text.")
def test_udtf_scalars(*args: Any) -> list:
    return [java_string(a) for a in args]


@udtf(name="TEST_UDTF", returns="VARCHAR", params=[f"ARRAY<{p}>" for p in _SCALARS],
      description="ksqlDB test function: one row per array element, as text.")
def test_udtf_arrays(*arrays: Any) -> list:
    return [java_string(x) for a in arrays for x in (a or [])]


@udtf(name="TEST_UDTF", returns="VARCHAR", params=[f"MAP<VARCHAR, {p}>" for p in _SCALARS],
      description="ksqlDB test function: one row per map value, as text.")
def test_udtf_maps(*maps: Any) -> list:
    return [java_string(x) for m in maps for x in (m or {}).values()]


@udtf(name="THROWING_UDTF", returns="BOOLEAN", params=["BOOLEAN"],
      description="ksqlDB test function: raises when its argument is true.")
def throwing_udtf(should_throw: bool | None) -> list:
    if should_throw:
        raise RuntimeError("You asked me to throw...")
    return [should_throw]


@udf(name="BAD_UDF", returns="INT", params=["BOOLEAN"], description="ksqlDB test function: raises when true.")
def bad_udf(should_throw: bool | None) -> int:
    if should_throw:
        raise RuntimeError("You asked me to throw...")
    return 0
