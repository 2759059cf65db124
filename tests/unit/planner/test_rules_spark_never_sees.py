"""Statements the engine used to pass on to Spark, whose analyser then rejected them with its own
text ([DATATYPE_MISMATCH…], [PARSE_SYNTAX_ERROR…]): found by a fuzz of the corpus's statements
through the engine with Spark's analysis (issue #57 item 7). Each is now ksqlDB's error for the
situation, by ksqlDB's rule (the source file named per test)."""

from __future__ import annotations

import pytest

from streamsql import types as t
from streamsql.errors import AnalysisError, ParseError
from streamsql.functions.catalog import builtin_registry
from streamsql.planner.expressions import ExpressionCompiler, Scope, ScopeColumn
from streamsql.sql import parse, parse_expression

COLUMNS = Scope([ScopeColumn("S", t.Struct((t.StructField("A", t.INTEGER),)), "s"),
                 ScopeColumn("I", t.INTEGER, "i")])


def _compile_error(text: str) -> str:
    with pytest.raises(AnalysisError) as e:
        ExpressionCompiler(COLUMNS, builtin_registry()).compile(parse_expression(text))
    return str(e.value)


def test_is_takes_null_or_distinct_from_only() -> None:
    # ksqlDB's SqlBase.g4: IS NOT? NULL, IS NOT? DISTINCT FROM
    with pytest.raises(ParseError) as e:
        parse("SELECT * FROM T WHERE I IS NOT 'x' EMIT CHANGES;")
    assert str(e.value) == "line 1:32: Syntax Error\nExpecting {'NULL', 'DISTINCT'}"
    assert parse("SELECT * FROM T WHERE I IS NOT NULL AND I IS NOT DISTINCT FROM 1 EMIT CHANGES;")


@pytest.mark.parametrize(("text", "message"), [
    ("NULL[1]", "Subscript expression (NULL[1]) do not apply to null."),
    ("I[2]", "Subscript expression (I[2]) do not apply to INTEGER."),
    ("S[1]", "Subscript expression (S[1]) do not apply to STRUCT<`A` INTEGER>. Use the dereference operator "
             "for STRUCTS: S->1"),
])
def test_only_arrays_and_maps_are_subscripted(text: str, message: str) -> None:
    # ksqldb-execution/.../util/ExpressionTypeManager.java, visitSubscriptExpression
    assert _compile_error(text) == message


def test_nullif_takes_two_values_of_one_type() -> None:
    # ksqldb-engine/.../function/udf/nulls/NullIf.java: nullIf(T expr1, T expr2)
    assert _compile_error("NULLIF(1, STRUCT(A := 1))") == (
        "Function 'nullif' does not accept parameters (INTEGER, STRUCT<`A` INTEGER>).")


def test_struct_fields_are_named_as_ksqldb_names_them() -> None:
    # ksqldb-execution/.../schema/ksql/ColumnNames.java, StructFieldAliasGenerator: a field's
    # name, then _1, _2…, skipping the numbers the sources' columns use (simple-struct.json,
    # "clashing field name": B, A->B, C->B are B, B_1, B_2)
    from streamsql.planner.expressions import FieldAliases

    names = FieldAliases(["ROWKEY", "B", "A", "C"])
    assert [names.name("B"), names.name("B")] == ["B_1", "B_2"]
    names = FieldAliases(["X", "F_1"])
    assert [names.name("F"), names.name("F"), names.name("G")] == ["F", "F_2", "G"]
