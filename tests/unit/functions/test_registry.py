"""Compilation of built-in function calls (no Spark): arity/type errors, types, listing."""

from __future__ import annotations

import pytest

from streamsql import types as t
from streamsql.errors import AnalysisError
from streamsql.functions.catalog import builtin_registry
from streamsql.planner.expressions import ExpressionCompiler, Scope, ScopeColumn
from streamsql.sql import parse_expression


def compile_expr(text: str, **cols: t.SqlType):
    scope = Scope([ScopeColumn(n, ty, f"`{n}`") for n, ty in cols.items()])
    return ExpressionCompiler(scope, builtin_registry()).compile(parse_expression(text))


def test_catalog_lists_scalars_and_keeps_aggregates() -> None:
    names = {f.name for f in builtin_registry().all()}
    assert {"SUBSTRING", "ROUND", "TRANSFORM", "EXTRACTJSONFIELD", "URL_EXTRACT_HOST", "PARSE_DATE"} <= names
    assert {"COUNT", "SUM", "MIN", "MAX", "AVG"} <= names
    assert {"JSON_CONCAT", "JSON_ITEMS", "JSON_RECORDS", "JSON_ARRAY_CONTAINS"} <= names
    assert builtin_registry().is_aggregate("count") and not builtin_registry().is_aggregate("ucase")
    assert "MAP" not in names and "STRUCT" not in names  # syntax, not listed by SHOW FUNCTIONS
    assert all(f.description and f.category for f in builtin_registry().all())


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


# --- DESCRIBE FUNCTION: variants -------------------------------------------------------------


def _variants(name: str) -> list[str]:
    from streamsql.functions.signatures import variants

    fn = builtin_registry().get(name)
    assert fn is not None
    return [f"{v.text(fn.name)} -> {v.returns}" for v in variants(fn)]


def test_every_listed_function_has_variants() -> None:
    from streamsql.functions.signatures import variants

    assert [f.name for f in builtin_registry().all() if not variants(f)] == []


def test_variants_show_parameter_and_return_types() -> None:
    assert _variants("SUBSTRING") == [
        "SUBSTRING(STRING, INTEGER) -> STRING", "SUBSTRING(BYTES, INTEGER) -> BYTES",
        "SUBSTRING(STRING, INTEGER, INTEGER) -> STRING", "SUBSTRING(BYTES, INTEGER, INTEGER) -> BYTES"]
    assert "ABS(DECIMAL) -> DECIMAL" in _variants("ABS") and "ABS(BIGINT) -> BIGINT" in _variants("ABS")
    assert "ROUND(DOUBLE) -> BIGINT" in _variants("ROUND")
    assert _variants("CONCAT") == ["CONCAT(STRING...) -> STRING", "CONCAT(BYTES...) -> BYTES"]
    assert _variants("ARRAY_MAX") == ["ARRAY_MAX(ARRAY<T>) -> T"]
    assert _variants("TRANSFORM")[0] == "TRANSFORM(ARRAY<T>, LAMBDA (T) => U) -> ARRAY<U>"


def test_describe_function_renders_variations() -> None:
    from streamsql.runtime import results as r
    from streamsql.surfaces.render import render

    text = render(r.FunctionDescription("DESCRIBE FUNCTION len;", r.FunctionInfo("LEN", "SCALAR", "STRING", "Length."),
                                        [r.FunctionVariant(["STRING"], "INTEGER")]))
    assert "Name        : LEN" in text and "Variation   : LEN(STRING)" in text and "Returns     : INTEGER" in text


# --- IN, GREATEST/LEAST, constructors, CASE: ksqlDB's typing (QTT in/greatest/least/create_*.json) ---


def test_in_converts_literals_to_the_value_type() -> None:
    assert compile_expr("B IN (true, 'TrUe', 'Y')", B=t.BOOLEAN).sql == "(`B` IN (TRUE, TRUE, TRUE))"
    assert "CAST('4.000' AS DOUBLE)" in compile_expr("D IN (1, '4.000')", D=t.DOUBLE).sql
    assert compile_expr("S IN (true, 10.30)", S=t.STRING).sql == "(`S` IN ('true', '10.30'))"
    with pytest.raises(AnalysisError, match='invalid input syntax for type BOOLEAN: "Not a boolean"'):
        compile_expr("B IN (true, 'Not a boolean')", B=t.BOOLEAN)
    with pytest.raises(AnalysisError, match=r"operator does not exist: DECIMAL\(12, 2\) = STRING \(V\)"):
        compile_expr("D IN (10, V)", D=t.Decimal(4, 2), V=t.STRING)
    with pytest.raises(AnalysisError, match=r"operator does not exist: ARRAY<BIGINT> = ARRAY<BOOLEAN> \(ARRAY\[B\]\)"):
        compile_expr("A IN (A, ARRAY[B])", A=t.Array(t.BIGINT), B=t.BOOLEAN)


def test_in_struct_constructors_compare_by_field_name() -> None:
    st = t.Struct((t.StructField("A", t.BIGINT), t.StructField("B", t.BIGINT)))
    sql = compile_expr("S IN (STRUCT(B:=2, A:='4'), STRUCT(A:=3, C:=4))", S=st).sql
    assert "named_struct('A', CAST(4 AS bigint), 'B', CAST(2 AS bigint))" in sql
    assert "'C'" not in sql  # a field S lacks: can never match, left out


def test_greatest_resolution() -> None:
    assert compile_expr("GREATEST(I, L, D)", I=t.INTEGER, L=t.BIGINT, D=t.DOUBLE).type == t.DOUBLE
    assert compile_expr("GREATEST(A, B)", A=t.Decimal(9, 2), B=t.Decimal(7, 6)).type == t.Decimal(13, 6)
    with pytest.raises(AnalysisError, match=r"ambiguous method parameters \(INTEGER, BIGINT\)"):
        compile_expr("GREATEST(I, L)", I=t.INTEGER, L=t.BIGINT)
    with pytest.raises(AnalysisError, match=r"ambiguous method parameters \(null, null\)"):
        compile_expr("LEAST(NULL, NULL)")
    assert compile_expr("LEAST(T, '09:16:00')", T=t.TIME).type == t.TIME


def test_constructors_adapt_literals_and_reject_all_nulls() -> None:
    arr = compile_expr("ARRAY[NULL, 10, '2e1', A, B]", A=t.INTEGER, B=t.BIGINT)
    # create_array.json "compatible mismatching elements": a number spelled as text ('2e1') is a
    # DECIMAL, so INT, BIGINT and it meet in DECIMAL(19, 0)
    assert arr.type == t.Array(t.Decimal(19, 0)) and "CAST('2e1' AS decimal(19,0))" in arr.sql
    assert compile_expr("ARRAY[1, '2', A]", A=t.BIGINT).type == t.Array(t.BIGINT)
    structs = compile_expr("ARRAY[STRUCT(X := A), STRUCT(Y := A)]", A=t.INTEGER)
    assert structs.type == t.Array(t.Struct((t.StructField("X", t.INTEGER), t.StructField("Y", t.INTEGER))))
    with pytest.raises(AnalysisError, match="Cannot construct an array with all NULL elements"):
        compile_expr("ARRAY[NULL]")
    with pytest.raises(AnalysisError, match="All case branches have NULL type"):
        compile_expr("CASE WHEN A < 2 THEN NULL ELSE NULL END", A=t.INTEGER)


def test_casts_follow_ksqldb() -> None:
    with pytest.raises(AnalysisError, match=r"Cast of STRING to ARRAY<INTEGER> is not supported"):
        compile_expr("CAST(S AS ARRAY<INTEGER>)", S=t.STRING)
    src = t.Struct((t.StructField("F0", t.BIGINT), t.StructField("F1", t.STRING)))
    sql = compile_expr("CAST(S AS STRUCT<F0 STRING, F3 STRING>)", S=src).sql
    assert "'F3', CAST(NULL AS string)" in sql and "CAST((`S`).`F0` AS string)" in sql  # by name


def test_stddev_samp_and_stddev_sample_are_the_sample_standard_deviation() -> None:
    """Both as ksqlDB documents them (its STDDEV_SAMP UDAF returns the variance: docs/differences.md),
    0.0 below two values; both keep a STRUCT state, which a DELIMITED aggregation cannot hold."""

    for name, expected in (("STDDEV_SAMP", 50.0 ** 0.5), ("STDDEV_SAMPLE", 50.0 ** 0.5)):
        function = builtin_registry().aggregate(name)
        assert function is not None
        bound = function.bind([t.INTEGER], [])
        acc = bound.create()
        acc.add([10])
        assert acc.result() == 0.0
        acc.add([20])
        acc.add([None])
        assert acc.result() == pytest.approx(expected)
        assert bound.complex_state
    assert not builtin_registry().aggregate("SUM").bind([t.INTEGER], []).complex_state
    assert builtin_registry().aggregate("AVG").bind([t.INTEGER], []).complex_state


def test_int_from_boolean_takes_a_boolean_and_gives_an_integer() -> None:
    """ksqlDB's INT_FROM_BOOLEAN (its ``IntFromBoolean`` UDF): BOOLEAN -> INT; Spark's cast of a
    boolean to INT gives the same 1 / 0 / null (the Spark test evaluates it)."""
    compiled = compile_expr("INT_FROM_BOOLEAN(B)", B=t.BOOLEAN)
    assert compiled.type == t.INTEGER and builtin_registry().get("INT_FROM_BOOLEAN").category == "CONVERSIONS"
    assert _variants("INT_FROM_BOOLEAN") == ["INT_FROM_BOOLEAN(BOOLEAN) -> INTEGER"]
    with pytest.raises(AnalysisError, match=r"Function 'int_from_boolean' does not accept parameters \(INTEGER\)\."):
        compile_expr("INT_FROM_BOOLEAN(N)", N=t.INTEGER)
