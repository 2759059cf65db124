"""Statement rules the engine checks before anything runs, without Spark or Kafka."""

from __future__ import annotations

import pytest

from streamsql.errors import AnalysisError
from streamsql.functions.catalog import builtin_registry
from streamsql.planner.ddl import check_header_type
from streamsql.sql import parse


def columns(ddl: str):  # type: ignore[no-untyped-def]
    [stmt] = parse(ddl)
    return stmt.columns  # type: ignore[attr-defined]


def test_header_columns_have_the_types_kafka_headers_have() -> None:
    """ksqlDB's headers case: HEADER('key') must be BYTES, HEADERS the array of key/value structs
    (field names in any case)."""
    k, h1, v = columns("CREATE STREAM S (K STRING KEY, H1 INT HEADER('key'), V BIGINT) "
                       "WITH (kafka_topic='s', value_format='json');")
    with pytest.raises(AnalysisError, match=r"^Invalid type for HEADER\('key'\) column: expected BYTES, got INTEGER$"):
        check_header_type(h1)
    check_header_type(k)
    check_header_type(v)
    [_, ok, bad] = columns("CREATE STREAM S (K STRING KEY, H ARRAY<STRUCT<key STRING, value BYTES>> HEADERS, "
                           "B ARRAY<STRING> HEADERS) WITH (kafka_topic='s', value_format='json');")
    check_header_type(ok)
    [quoted] = columns("CREATE STREAM S (H ARRAY<STRUCT<`key` STRING, `VALUE` BYTES>> HEADERS) "
                       "WITH (kafka_topic='s', value_format='json');")
    with pytest.raises(AnalysisError, match=r"got ARRAY<STRUCT<`key` STRING, `VALUE` BYTES>>$"):
        check_header_type(quoted)  # a quoted lower-case field name is another field
    with pytest.raises(AnalysisError, match=r"^Invalid type for HEADERS column: expected "
                                            r"ARRAY<STRUCT<`KEY` STRING, `VALUE` BYTES>>, got ARRAY<STRING>$"):
        check_header_type(bad)


@pytest.mark.parametrize("props, message", [
    ({"VALUE_DELIMITER": "<~>"}, "Failed to prepare statement: Configuration VALUE_DELIMITER is invalid: Invalid "
                                 "delimiter value: '<~>'. Delimiter must be a single character or TAB,SPACE\n"
                                 "Example valid value: ';'"),
    ({"VALUE_DELIMITER": " "}, "Failed to prepare statement: Configuration VALUE_DELIMITER is invalid: Delimiter "
                               "cannot be empty, if you meant to have a tab or space for delimiter, please use the "
                               "special values 'TAB' or 'SPACE'\nExample valid value: ';'"),
    ({"KEY_DELIMITER": "|"}, "KAFKA does not support the following configs: [delimiter]"),
])
def test_delimiters_are_one_character_of_a_delimited_format(props: dict[str, str], message: str) -> None:
    from streamsql.errors import ConfigError
    from streamsql.planner.ddl import check_delimiters

    with pytest.raises(ConfigError) as err:
        check_delimiters(props, "KAFKA", "DELIMITED")
    assert str(err.value) == message
    check_delimiters({"VALUE_DELIMITER": "TAB", "KEY_DELIMITER": ";"}, "DELIMITED", "DELIMITED")


def test_wrap_single_value_true_needs_a_format_that_wraps() -> None:
    from streamsql import types as t
    from streamsql.errors import ConfigError
    from streamsql.planner.ddl import SourceDefinitions

    one = [t.Column("K", t.STRING, "key"), t.Column("FOO", t.INTEGER)]
    definitions = SourceDefinitions(lambda name: "")
    with pytest.raises(ConfigError, match=r"^Format 'DELIMITED' does not support 'WRAP_SINGLE_VALUE' set to 'true'\.$"):
        definitions.wrap_single_value({"WRAP_SINGLE_VALUE": True}, one, "DELIMITED")
    assert definitions.wrap_single_value({"WRAP_SINGLE_VALUE": "false"}, one, "KAFKA") is False
    assert definitions.wrap_single_value({"WRAP_SINGLE_VALUE": True}, one, "JSON") is True


def test_wrap_single_value_defaults_to_the_persistence_property() -> None:
    """``ksql.persistence.wrap.single.values`` applies where the statement does not say, for the
    formats that can do both; KAFKA and DELIMITED values are bare anyway."""
    from streamsql import types as t
    from streamsql.planner.ddl import SourceDefinitions

    one = [t.Column("K", t.STRING, "key"), t.Column("FOO", t.INTEGER)]
    unwrapped = SourceDefinitions(lambda name: "false" if name == "ksql.persistence.wrap.single.values" else "")
    assert unwrapped.wrap_single_value({}, one, "JSON") is False
    assert unwrapped.wrap_single_value({}, one, "AVRO") is False
    assert unwrapped.wrap_single_value({"WRAP_SINGLE_VALUE": True}, one, "JSON") is True
    assert unwrapped.wrap_single_value({}, one, "DELIMITED") is True
    assert SourceDefinitions(lambda name: "true").wrap_single_value({}, one, "JSON") is True


def test_a_table_of_aggregates_needs_a_group_by() -> None:
    from streamsql.planner.ddl import check_table_is_grouped

    [stmt] = parse("CREATE TABLE OUTPUT AS SELECT COUNT(*), SUM(x) FROM TEST;")
    with pytest.raises(AnalysisError, match=r"^CREATE TABLE AS SELECT statement does not support aggregate function "
                                            r"\[COUNT\(ROWTIME\), SUM\(X\)\] without a GROUP BY clause\.$"):
        check_table_is_grouped(stmt, builtin_registry())  # type: ignore[arg-type]


def test_partition_by_needs_an_expression() -> None:
    from streamsql.errors import ParseError

    with pytest.raises(ParseError, match=r"^line 2:59: PARTITION BY requires at least one expression$"):
        parse("SHOW STREAMS;\nCREATE STREAM OUTPUT AS SELECT ID FROM INPUT PARTITION BY ();")


def test_insert_values_into_a_missing_source_hints_at_its_case() -> None:
    from streamsql.runtime.executors.inserts import unknown_insert_target

    assert unknown_insert_target("INPUT", ["input"]) == (
        'Cannot insert values into an unknown stream/table: `INPUT`\nDid you mean "input"? Hint: wrap the source '
        "name in double quotes to make it case-sensitive.")
    assert unknown_insert_target("input", ["INPUT"]) == (
        "Cannot insert values into an unknown stream/table: `input`\nDid you mean INPUT? Hint: try removing double "
        "quotes from the source name.")
    assert unknown_insert_target("NOPE", ["INPUT"]) == "Cannot insert values into an unknown stream/table: `NOPE`"


def test_insert_into_records_where_its_target_is() -> None:
    """For ksqlDB's 'Line: 2, Col: 13: Source `UNKNOWN` does not exist.'"""
    [_, stmt] = parse("SHOW STREAMS;\nINSERT INTO UNKNOWN SELECT d1, COUNT() FROM SOURCE GROUP BY d1;")
    assert stmt.target_position == (2, 13)  # type: ignore[attr-defined]


def test_insert_into_casts_numbers_up_to_the_sinks_types() -> None:
    """ksqlDB's 'implicitly casts' case: INTEGER and DECIMAL(2,1) results into DECIMAL(5,2)."""
    from streamsql import types as t
    from streamsql.catalog import Source
    from streamsql.planner.planner import OutputColumn, QueryPlan
    from streamsql.runtime.executors.persistent import widened

    source = Source("S", "STREAM", [t.Column("IGNORED", t.STRING)], topic="s", key_format="NONE",
                    value_format="JSON")
    plan = QueryPlan(source, "S", None, [OutputColumn("C1", "1", t.INTEGER),
                                         OutputColumn("C2", "2.0BD", t.Decimal(2, 1))])
    target = [t.Column("C1", t.Decimal(5, 2)), t.Column("C2", t.Decimal(5, 2))]
    produced = [t.Column("C1", t.INTEGER), t.Column("C2", t.Decimal(2, 1))]
    assert widened(plan, produced, target)
    assert [str(c.type) for c in plan.columns] == ["DECIMAL(5, 2)", "DECIMAL(5, 2)"]
    assert not widened(plan, [t.Column("C1", t.DOUBLE), t.Column("C2", t.Decimal(2, 1))], target)  # no narrowing
