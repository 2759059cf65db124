"""Compilation of built-in function calls (no Spark): arity/type errors, types, listing."""

from __future__ import annotations

import pytest

from streamsql import types as t
from streamsql.errors import AnalysisError
from streamsql.planner.expressions import ExpressionCompiler, Scope, ScopeColumn
from streamsql.planner.functions import REGISTRY
from streamsql.sql import parse_expression


def compile_expr(text: str, **cols: t.SqlType):
    scope = Scope([ScopeColumn(n, ty, f"`{n}`") for n, ty in cols.items()])
    return ExpressionCompiler(scope).compile(parse_expression(text))


def test_catalog_lists_scalars_and_keeps_aggregates() -> None:
    names = {f.name for f in REGISTRY.all()}
    assert {"SUBSTRING", "ROUND", "TRANSFORM", "EXTRACTJSONFIELD", "URL_EXTRACT_HOST", "PARSE_DATE"} <= names
    assert {"COUNT", "SUM", "MIN", "MAX", "AVG"} <= names
    assert REGISTRY.is_aggregate("count") and not REGISTRY.is_aggregate("ucase")
    assert "MAP" not in names and "STRUCT" not in names  # syntax, not listed by SHOW FUNCTIONS
    assert all(f.description and f.category for f in REGISTRY.all())


def test_wrong_types_use_ksqldb_message() -> None:
    with pytest.raises(AnalysisError, match=r"Function 'greatest' does not accept parameters \(STRING, INTEGER\)\."):
        compile_expr("GREATEST(ID, NUM)", ID=t.STRING, NUM=t.INTEGER)
    with pytest.raises(AnalysisError, match=r"Function 'ucase' does not accept parameters \(INTEGER\)\."):
        compile_expr("UCASE(N)", N=t.INTEGER)
    with pytest.raises(AnalysisError, match=r"Function 'substring' does not accept parameters \(STRING\)\."):
        compile_expr("SUBSTRING(S)", S=t.STRING)


def test_result_types() -> None:
    assert compile_expr("ROUND(D)", D=t.DOUBLE).type == t.BIGINT
    assert compile_expr("ROUND(D, 2)", D=t.DOUBLE).type == t.DOUBLE
    assert compile_expr("LEN(S)", S=t.STRING).type == t.INTEGER
    assert compile_expr("SPLIT(S, ',')", S=t.STRING).type == t.Array(t.STRING)
    assert compile_expr("TRANSFORM(A, x => x > 1)", A=t.Array(t.INTEGER)).type == t.Array(t.BOOLEAN)
    assert compile_expr("PARSE_TIMESTAMP(S, 'yyyy')", S=t.STRING).type == t.TIMESTAMP


def test_map_and_struct_constructors() -> None:
    m = compile_expr("MAP('a' := 1)")
    assert m.type == t.Map(t.STRING, t.INTEGER)
    s = compile_expr("STRUCT(A := 1, `b` := 'x')")
    assert s.type == t.Struct((t.StructField("A", t.INTEGER), t.StructField("b", t.STRING)))
    with pytest.raises(AnalysisError, match="Duplicate field names found in STRUCT"):
        compile_expr("STRUCT(foo := 1, foo := 2)")
    with pytest.raises(AnalysisError, match="Cannot construct a map with all NULL values"):
        compile_expr("MAP('a' := NULL)")


def test_time_units_are_read_from_the_call() -> None:
    sql = compile_expr("TIMESTAMPADD(SECONDS, 5, TS)", TS=t.TIMESTAMP).sql
    assert sql.startswith("timestampadd(SECOND,")
    with pytest.raises(AnalysisError, match="unknown time unit"):
        compile_expr("TIMESTAMPADD(WEEKS, 5, TS)", TS=t.TIMESTAMP)
