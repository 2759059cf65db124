"""Planner: statements analysed against a catalog into plans with the Spark SQL they will run.
No Spark and no Kafka: the plan is data."""

from __future__ import annotations

import re

import pytest

from streamsql import types as t
from streamsql.catalog import Catalog, Source
from streamsql.errors import AnalysisError, CatalogError
from streamsql.functions.catalog import builtin_registry
from streamsql.planner.expressions import ExpressionCompiler, iso_to_millis
from streamsql.planner.planner import Planner, source_scope
from streamsql.sql import parse, parse_expression


@pytest.fixture
def catalog() -> Catalog:
    c = Catalog()
    c.add(Source("PAY", "STREAM", [
        t.Column("ID", t.STRING, "key"),
        t.Column("AMOUNT", t.DOUBLE),
        t.Column("N", t.INTEGER),
        t.Column("BIG", t.BIGINT),
        t.Column("NAME", t.STRING),
        t.Column("ADDR", t.Struct((t.StructField("CITY", t.STRING),))),
        t.Column("TAGS", t.Array(t.STRING)),
        t.Column("ATTRS", t.Map(t.STRING, t.INTEGER)),
    ], topic="pay", key_format="KAFKA", value_format="JSON"))
    return c


def plan(catalog: Catalog, sql: str, persistent: bool = True):  # type: ignore[no-untyped-def]
    [stmt] = parse(sql)
    return Planner(catalog, builtin_registry()).plan_query(stmt.query, persistent=persistent,
                                                         sink_name=getattr(stmt, "name", None))


def compile_expr(catalog: Catalog, text: str):  # type: ignore[no-untyped-def]
    compiler = ExpressionCompiler(source_scope(catalog.get("PAY"), "PAY"), builtin_registry())
    return compiler.compile(parse_expression(text))


def test_filter_projection_plan(catalog: Catalog) -> None:
    p = plan(catalog, "CREATE STREAM o AS SELECT id, amount * 2 AS twice, name FROM pay WHERE amount > 10;")
    assert p.where == "coalesce((`AMOUNT` > 10), FALSE)"  # ksqlDB: comparing null is false
    assert [(c.name, c.sql, c.is_key) for c in p.columns] == [
        ("ID", "`ID`", True), ("TWICE", "(`AMOUNT` * 2)", False), ("NAME", "`NAME`", False)]
    assert [c.type for c in p.columns] == [t.STRING, t.DOUBLE, t.STRING]


def test_select_star_expands_key_then_value_columns(catalog: Catalog) -> None:
    p = plan(catalog, "CREATE STREAM o AS SELECT * FROM pay;")
    assert [c.name for c in p.columns][:3] == ["ID", "AMOUNT", "N"]
    assert p.columns[0].is_key and not p.columns[1].is_key


def test_generated_names_skip_source_column_names(catalog: Catalog) -> None:
    """elements.json "should handle sources with generated column names": KSQL_COL_n already used
    by a source column is skipped."""
    catalog.add(Source("G", "STREAM", [t.Column("KSQL_COL_3", t.INTEGER, "key"), t.Column("KSQL_COL_2", t.INTEGER),
                                       t.Column("KSQL_COL_4", t.INTEGER)], topic="g", key_format="KAFKA",
                       value_format="JSON"))
    p = plan(catalog, "CREATE STREAM o AS SELECT KSQL_COL_3, KSQL_COL_2, ABS(KSQL_COL_2), ABS(KSQL_COL_2), "
                      "ABS(KSQL_COL_2) FROM g;")
    assert [c.name for c in p.columns] == ["KSQL_COL_3", "KSQL_COL_2", "KSQL_COL_0", "KSQL_COL_1", "KSQL_COL_5"]


@pytest.mark.parametrize("sql, message", [
    ("SELECT COUNT(1) FROM pay WINDOW TUMBLING (SIZE 1 SECOND) WHERE windowstart > 1000 GROUP BY id EMIT CHANGES;",
     "Error in WHERE expression: Unknown column WINDOWSTART."),
    ("CREATE TABLE o AS SELECT id, WINDOWSTART, COUNT(*) AS c FROM pay GROUP BY WINDOWSTART;",
     "Reserved column name in select: `WINDOWSTART`. Please remove or alias the column."),
])
def test_window_bounds_misuse_messages(catalog: Catalog, sql: str, message: str) -> None:
    with pytest.raises(AnalysisError) as err:
        plan(catalog, sql)
    assert str(err.value) == message


def test_generated_names_and_struct_deref(catalog: Catalog) -> None:
    p = plan(catalog, "SELECT addr->city, n + 1, big FROM pay EMIT CHANGES;", persistent=False)
    assert [c.name for c in p.columns] == ["CITY", "KSQL_COL_0", "BIG"]
    assert p.columns[0].sql == "(`ADDR`).`CITY`"


def test_integer_division_is_integral(catalog: Catalog) -> None:
    c = compile_expr(catalog, "n / 2")
    assert c.type == t.INTEGER and "DIV" in c.sql
    assert compile_expr(catalog, "amount / 2").type == t.DOUBLE


def test_literal_typing_follows_ksqldb(catalog: Catalog) -> None:
    assert compile_expr(catalog, "1").type == t.INTEGER
    assert compile_expr(catalog, "10000000000").type == t.BIGINT
    assert compile_expr(catalog, "1.50").type == t.Decimal(3, 2)
    assert compile_expr(catalog, "1.5E3").type == t.DOUBLE


def test_string_literal_escapes_for_spark(catalog: Catalog) -> None:
    assert compile_expr(catalog, r"'it''s \n'").sql == r"'it\'s \\n'"


def test_array_subscript_is_one_based_and_null_safe(catalog: Catalog) -> None:
    c = compile_expr(catalog, "tags[1]")
    assert c.type == t.STRING and "element_at(`TAGS`, 1)" in c.sql and "IS NULL" in c.sql
    assert compile_expr(catalog, "attrs['a']").type == t.INTEGER


def test_rowtime_compares_with_iso_strings(catalog: Catalog) -> None:
    c = compile_expr(catalog, "ROWTIME >= '2020-01-01T00:00:01'")
    assert c.sql == f"coalesce((`ROWTIME` >= {iso_to_millis('2020-01-01T00:00:01')}L), FALSE)"
    assert iso_to_millis("1970-01-01T00:00:01") == 1000
    assert iso_to_millis("1970-01-01T01:00:00+01:00") == 0
    assert iso_to_millis("2020-02-24T24") == iso_to_millis("2020-02-25T00:00")  # hour 24: the next midnight
    with pytest.raises(AnalysisError, match="Failed to parse timestamp '2020-02-30'"):
        iso_to_millis("2020-02-30")


def test_comparisons_with_a_bare_null_are_rejected(catalog: Catalog) -> None:
    with pytest.raises(AnalysisError, match="Comparison with NULL not supported: NULL <> NULL"):
        compile_expr(catalog, "NULL <> NULL")


def test_collections_compare_for_equality_and_distinctness(catalog: Catalog) -> None:
    """ksqlDB's binary-comparison cases: arrays, maps and structs take =, <>, IS [NOT] DISTINCT
    FROM (not ordering); Spark cannot compare maps, so a map compares as its entries sorted by key."""
    assert compile_expr(catalog, "attrs = attrs").sql == (
        "coalesce((array_sort(map_entries(`ATTRS`)) = array_sort(map_entries(`ATTRS`))), FALSE)")
    assert compile_expr(catalog, "tags IS DISTINCT FROM tags").sql == "(NOT (`TAGS` <=> `TAGS`))"
    assert compile_expr(catalog, "addr IS NOT DISTINCT FROM addr").sql == "(`ADDR` <=> `ADDR`)"
    with pytest.raises(AnalysisError, match=r"Cannot compare TAGS \(ARRAY<STRING>\) to TAGS \(ARRAY<STRING>\) "
                                            r"with LESS_THAN\."):
        compile_expr(catalog, "tags < tags")


def test_type_errors_name_operands(catalog: Catalog) -> None:
    with pytest.raises(AnalysisError, match=r"Cannot compare N \(INTEGER\) to 'x' \(STRING\) with GREATER_THAN\."):
        compile_expr(catalog, "n > 'x'")
    with pytest.raises(AnalysisError, match="cannot be resolved"):
        compile_expr(catalog, "nope + 1")
    with pytest.raises(AnalysisError, match="Can't find any functions with the name 'NO_SUCH_FN'"):
        compile_expr(catalog, "no_such_fn(n)")


def test_a_typo_d_function_name_is_reported_where_it_is_called(catalog: Catalog) -> None:
    with pytest.raises(AnalysisError, match=r"^Line: 2, Col: 3: Can't find any functions with the name 'UCAS'$"):
        plan(catalog, "CREATE STREAM o AS SELECT id,\n  ucas(name) AS u FROM pay;")
    wanted = r"^Line: 1, Col: 32: Can't find any functions with the name 'WONT_FIND_ME'$"
    with pytest.raises(AnalysisError, match=wanted):
        plan(catalog, "CREATE TABLE o AS SELECT name, wont_find_me(id) FROM pay GROUP BY name;")


def test_persistent_query_rules(catalog: Catalog) -> None:
    with pytest.raises(AnalysisError, match="must include the key column ID"):
        plan(catalog, "CREATE STREAM o AS SELECT name FROM pay;")
    with pytest.raises(AnalysisError, match="Reserved column name in select: `ROWTIME`"):
        plan(catalog, "CREATE STREAM o AS SELECT id, ROWTIME FROM pay;")
    with pytest.raises(CatalogError, match="MISSING does not exist"):
        plan(catalog, "CREATE STREAM o AS SELECT * FROM missing;")
    with pytest.raises(AnalysisError, match="'X' is not a valid stream/table name or alias"):
        plan(catalog, "CREATE STREAM o AS SELECT x.id FROM pay;")


def test_partition_by_makes_new_key(catalog: Catalog) -> None:
    p = plan(catalog, "CREATE STREAM o AS SELECT name, id, amount FROM pay PARTITION BY name;")
    assert [(c.name, c.is_key) for c in p.columns] == [("NAME", True), ("ID", False), ("AMOUNT", False)]
    assert p.repartitioned


def test_explain_lists_the_steps(catalog: Catalog) -> None:
    text = plan(catalog, "CREATE STREAM o AS SELECT id, name FROM pay WHERE n = 1;").explain()
    assert "FILTER coalesce((`N` = 1), FALSE)" in text and "PROJECT `ID` AS ID KEY" in text


@pytest.mark.parametrize("select, message", [
    ("1 + NULL", "(1 + null). Arithmetic on types INTEGER and null are not supported."),
    ("Array[1,2,3] + NULL", "(ARRAY[1, 2, 3] + null). Arithmetic on types ARRAY<INTEGER> and null are not supported."),
    ("NULL * NULL", "(null * null). Arithmetic on types null and null are not supported."),
])
def test_arithmetic_with_a_bare_null_is_rejected_as_ksqldb_does(select: str, message: str) -> None:
    from streamsql import types as t
    from streamsql.catalog import Catalog, Source
    from streamsql.errors import AnalysisError
    from streamsql.planner.planner import Planner
    from streamsql.sql import parse

    catalog = Catalog()
    catalog.add(Source("INPUT", "STREAM", [t.Column("K", t.STRING, "key"), t.Column("V", t.INTEGER)], topic="i",
                       key_format="KAFKA", value_format="JSON"))
    [stmt] = parse(f"SELECT {select} FROM INPUT EMIT CHANGES;")
    with pytest.raises(AnalysisError) as err:
        Planner(catalog, builtin_registry()).plan_query(stmt.query, persistent=False)
    assert str(err.value) == f"Error processing expression: {message}"


# --- joins (planner/joins.py) ----------------------------------------------------------------------

@pytest.fixture
def join_catalog() -> Catalog:
    c = Catalog()
    c.add(Source("I1", "STREAM", [t.Column("K", t.STRING, "key"), t.Column("ID", t.INTEGER),
                                  t.Column("F0", t.INTEGER)], topic="a", key_format="KAFKA", value_format="JSON"))
    c.add(Source("I2", "STREAM", [t.Column("K", t.STRING, "key"), t.Column("ID", t.INTEGER),
                                  t.Column("F0", t.INTEGER)], topic="b", key_format="KAFKA", value_format="JSON"))
    c.add(Source("T", "TABLE", [t.Column("ID", t.INTEGER, "key"), t.Column("NAME", t.STRING)], topic="t",
                 key_format="KAFKA", value_format="JSON"))
    return c


def test_join_star_names_columns_alias_underscore_column_with_the_join_key_first(join_catalog: Catalog) -> None:
    p = plan(join_catalog, "SELECT *, I1.ROWTIME, I2.ROWTIME FROM I1 JOIN I2 WITHIN 60 SECONDS ON I1.K = I2.K "
                           "EMIT CHANGES;", persistent=False)
    assert [(c.name, c.is_key) for c in p.columns] == [
        ("I1_K", True), ("I1_ID", False), ("I1_F0", False), ("I2_K", False), ("I2_ID", False), ("I2_F0", False),
        ("I1_ROWTIME", False), ("I2_ROWTIME", False)]
    spec = p.source.join
    assert spec.kind == "INNER" and not spec.stream_table and spec.within_before_ms == 60_000


def test_a_join_runs_one_bucket_per_partition_of_its_first_source(join_catalog: Catalog) -> None:
    """A join's buckets are ksqlDB's tasks: one per partition of its first source. When both sides
    join on their key column (co-partitioned) a bucket is a partition; otherwise, as ksqlDB
    repartitions by the join key, a hash of the join key."""
    from dataclasses import replace

    from streamsql.physical.joins import by_partition, join_buckets

    for name in ("I1", "I2"):
        join_catalog.sources[name] = replace(join_catalog.get(name), partitions=2)
    on_keys = plan(join_catalog, "CREATE STREAM o AS SELECT * FROM I1 JOIN I2 WITHIN 1 SECOND ON I1.K = I2.K;")
    assert join_buckets(on_keys.source.join) == 2 and by_partition(on_keys.source.join)
    on_values = plan(join_catalog, "CREATE STREAM o AS SELECT * FROM I1 JOIN I2 WITHIN 1 SECOND ON I1.ID = I2.ID;")
    assert join_buckets(on_values.source.join) == 2 and not by_partition(on_values.source.join)
    to_table = plan(join_catalog, "CREATE STREAM o AS SELECT * FROM I1 JOIN T ON I1.ID = T.ID;")
    assert not by_partition(to_table.source.join)  # the stream joins on a value column


@pytest.mark.parametrize(("windows", "on", "message"), [
    ((("SESSION", None), (None, None)), "S1.K = S2.K",
     "Can not join windowed source to non-windowed source.\n`S1` is SESSION windowed\n`S2` is not windowed"),
    (((None, None), ("TUMBLING", 1000)), "S1.K = S2.K",
     "Can not join windowed source to non-windowed source.\n`S1` is not windowed\n`S2` is TUMBLING windowed"),
    ((("SESSION", None), ("TUMBLING", 1000)), "S1.K = S2.K",
     "Incompatible windowed sources.\nLeft source: SESSION\nRight source: TUMBLING\nSession windowed sources can "
     "only be joined to other session windowed sources"),
    ((("HOPPING", 5000), ("TUMBLING", 2000)), "S1.K = S2.K", "Implicit repartitioning of windowed sources is not "
     "supported. See https://github.com/confluentinc/ksql/issues/4385."),
    ((("TUMBLING", 1000), ("TUMBLING", 1000)), "S1.K = S2.ID", "Implicit repartitioning of windowed sources"),
])
def test_joins_of_windowed_sources_are_checked_as_ksqldb_does(join_catalog: Catalog, windows, on, message) -> None:  # type: ignore[no-untyped-def]
    """ksqlDB's analyzer: windowed joins windowed only, session windows only session windows;
    then a windowed source cannot be repartitioned (a join off its key, or other windows)."""
    from dataclasses import replace

    for name, (wtype, size) in zip(("S1", "S2"), windows):
        join_catalog.sources[name] = replace(join_catalog.get("I1"), name=name, topic=name.lower(),
                                             window_type=wtype, window_size_ms=size)
    with pytest.raises(AnalysisError) as info:
        plan(join_catalog, f"CREATE STREAM o AS SELECT * FROM S1 JOIN S2 WITHIN 1 MINUTE ON {on};")
    assert message in str(info.value)


def _windowed(catalog: Catalog, name: str, wtype: str, size: int | None, key_format: str = "KAFKA",
              kind: str = "STREAM") -> None:
    from dataclasses import replace

    catalog.sources[name] = replace(catalog.get("I1"), name=name, topic=name.lower(), kind=kind,
                                    window_type=wtype, window_size_ms=size, key_format=key_format)


def test_a_join_of_windowed_sources_meets_on_key_and_window(join_catalog: Catalog) -> None:
    """Both sides on their keys, in the same key format: the result is windowed as the left
    source; each side's window bounds are value columns (ksqlDB's schema for ``SELECT *``)."""
    _windowed(join_catalog, "S1", "TUMBLING", 2000)
    _windowed(join_catalog, "S2", "TUMBLING", 2000)
    p = plan(join_catalog, "CREATE STREAM o AS SELECT * FROM S1 JOIN S2 WITHIN 1 MINUTE ON S1.K = S2.K;")
    spec = p.source.join
    assert spec.window == "TUMBLING" and (p.source.window_type, p.source.window_size_ms) == ("TUMBLING", 2000)
    assert [(c.name, c.is_key) for c in p.columns] == [
        ("S1_K", True), ("S1_WINDOWSTART", False), ("S1_WINDOWEND", False), ("S1_ID", False), ("S1_F0", False),
        ("S2_K", False), ("S2_WINDOWSTART", False), ("S2_WINDOWEND", False), ("S2_ID", False), ("S2_F0", False)]


@pytest.mark.parametrize(("left", "right", "message"), [
    # registry key formats are re-keyed into the left's format anyway: other windows are fine
    (("HOPPING", 5000, "JSON_SR", "STREAM"), ("TUMBLING", 2000, "JSON_SR", "STREAM"), None),
    # a KAFKA key in another window would need that re-keying: refused
    (("HOPPING", 5000, "KAFKA", "STREAM"), ("TUMBLING", 2000, "KAFKA", "STREAM"),
     "Implicit repartitioning of windowed sources is not supported. See https://github.com/confluentinc/ksql/issues/4385."),
    # a windowed table with a registry key format cannot be re-keyed at all
    (("TUMBLING", 2000, "AVRO", "TABLE"), ("TUMBLING", 2000, "AVRO", "TABLE"),
     "does not support joins on windowed sources with Schema-Registry-enabled key formats (AVRO, JSON_SR, PROTOBUF)"),
    (("TUMBLING", 2000, "KAFKA", "TABLE"), ("TUMBLING", 2000, "KAFKA", "TABLE"), None),
])
def test_windowed_key_formats_follow_ksqldbs_repartition_rules(join_catalog: Catalog, left, right, message) -> None:  # type: ignore[no-untyped-def]
    _windowed(join_catalog, "S1", *left)
    _windowed(join_catalog, "S2", *right)
    within = "" if left[3] == "TABLE" else " WITHIN 1 MINUTE"
    kind = left[3]
    sql = f"CREATE {kind} o AS SELECT * FROM S1 JOIN S2{within} ON S1.K = S2.K;"
    if message is None:
        assert plan(join_catalog, sql).source.join.window == left[0]
    else:
        with pytest.raises(AnalysisError) as info:
            plan(join_catalog, sql)
        assert message in str(info.value)


def test_n_way_joins_of_windowed_sources_are_checked_join_by_join(join_catalog: Catalog) -> None:
    """ksqlDB has no rule of its own for n-way joins of windowed sources: each join is checked as a
    two-way one, its left side the earlier join (windowed as its first source, keyed by the
    columns equal to its key). The planner used to refuse them all."""
    for name in ("S1", "S2", "S3"):
        _windowed(join_catalog, name, "SESSION", None)
    p = plan(join_catalog, "CREATE STREAM o AS SELECT * FROM S1 JOIN S2 WITHIN 1 MINUTE ON S1.K = S2.K "
                           "JOIN S3 WITHIN 1 MINUTE ON S2.K = S3.K;")
    spec = p.source.join
    assert spec.window == "SESSION" and p.source.window_type == "SESSION"
    assert spec.left.source.join is not None and spec.left.source.join.window == "SESSION"
    assert [c.name for c in p.columns if c.is_key] == ["S1_K"]
    assert {"S3_WINDOWSTART", "S3_WINDOWEND"} <= {c.name for c in p.columns}
    # the earlier join joined off its key would need a repartition
    with pytest.raises(AnalysisError, match="Implicit repartitioning of windowed sources is not supported"):
        plan(join_catalog, "CREATE STREAM o AS SELECT * FROM S1 JOIN S2 WITHIN 1 MINUTE ON S1.K = S2.K "
                           "JOIN S3 WITHIN 1 MINUTE ON S2.ID = S3.K;")
    _windowed(join_catalog, "S4", "TUMBLING", 1000)
    with pytest.raises(AnalysisError, match="Incompatible windowed sources"):
        plan(join_catalog, "CREATE STREAM o AS SELECT * FROM S1 JOIN S2 WITHIN 1 MINUTE ON S1.K = S2.K "
                           "JOIN S4 WITHIN 1 MINUTE ON S1.K = S4.K;")


def test_stream_table_join_keys_by_the_table_key_when_the_stream_side_is_an_expression(join_catalog: Catalog) -> None:
    p = plan(join_catalog, "CREATE STREAM o AS SELECT * FROM I1 LEFT JOIN T ON ABS(I1.ID) = T.ID;")
    assert p.key_columns[0].name == "T_ID"
    assert p.source.join.stream_table and p.source.join.kind == "LEFT"
    assert "abs(`ID`)" in p.source.join.left.key_sql
    q = plan(join_catalog, "CREATE STREAM o2 AS SELECT I1.ID, NAME FROM I1 JOIN T ON T.ID = I1.ID;")
    assert [(c.name, c.is_key) for c in q.columns] == [("I1_ID", True), ("NAME", False)]


@pytest.mark.parametrize("sql, message", [
    ("SELECT F0 FROM I1 JOIN I2 WITHIN 1 SECOND ON I1.K = I2.K EMIT CHANGES;",
     "Column 'F0' is ambiguous. Could be I1.F0 or I2.F0."),
    ("SELECT UNKNOWN.* FROM I1 JOIN I2 WITHIN 1 SECOND ON I1.K = I2.K EMIT CHANGES;",
     "'UNKNOWN' is not a valid stream/table name or alias."),
    ("SELECT * FROM I1 JOIN I2 ON I1.K = I2.K EMIT CHANGES;", "Stream-Stream joins must have a WITHIN clause"),
    ("SELECT * FROM I1 JOIN T WITHIN 1 SECOND ON I1.ID = T.ID EMIT CHANGES;", "not windowed"),
    ("SELECT * FROM I1 JOIN T ON I1.ID = T.NAME EMIT CHANGES;", "Got I1.ID = T.NAME."),
    ("SELECT * FROM I1 FULL OUTER JOIN T ON I1.ID = T.ID EMIT CHANGES;", "Invalid join type: full-outer join not supported for stream-table join. Got I1 [FULL] OUTER JOIN T."),
])
def test_join_errors(join_catalog: Catalog, sql: str, message: str) -> None:
    with pytest.raises(AnalysisError, match=re.escape(message)):
        plan(join_catalog, sql, persistent=False)


def test_table_table_join_is_a_table_keyed_by_the_primary_keys(join_catalog: Catalog) -> None:
    join_catalog.add(Source("U", "TABLE", [t.Column("UID", t.INTEGER, "key"), t.Column("CITY", t.STRING)], topic="u",
                            key_format="KAFKA", value_format="JSON"))
    p = plan(join_catalog, "CREATE TABLE o AS SELECT T.ID, NAME, CITY FROM T LEFT JOIN U ON T.ID = U.UID;")
    assert p.source.is_table and p.source.join.table_table
    assert [(c.name, c.is_key) for c in p.columns] == [("ID", True), ("NAME", False), ("CITY", False)]
    with pytest.raises(AnalysisError, match="primary key of the right input table. Got T.ID = U.CITY."):
        plan(join_catalog, "CREATE TABLE o2 AS SELECT * FROM T JOIN U ON T.ID = U.CITY;")
    # a non-key left column makes a foreign-key join, whose types must match exactly
    with pytest.raises(AnalysisError, match=re.escape("types don't match. Got T.NAME{STRING} = U.UID{INTEGER}.")):
        plan(join_catalog, "CREATE TABLE o2 AS SELECT * FROM T JOIN U ON T.NAME = U.UID;")
    with pytest.raises(AnalysisError, match="table-stream joins are not supported"):
        plan(join_catalog, "SELECT * FROM T JOIN I1 ON T.ID = I1.ID EMIT CHANGES;", persistent=False)


def test_full_outer_join_is_keyed_by_a_synthetic_rowkey(join_catalog: Catalog) -> None:
    p = plan(join_catalog, "CREATE STREAM o AS SELECT * FROM I1 FULL OUTER JOIN I2 WITHIN 1 SECOND ON I1.K = I2.K;")
    assert [(c.name, c.is_key) for c in p.columns][:3] == [("ROWKEY", True), ("I1_K", False), ("I1_ID", False)]
    with pytest.raises(AnalysisError, match="must include the join expression ROWKEY in its projection .*\n"
                                            "ROWKEY was added as a synthetic key column"):
        plan(join_catalog, "CREATE STREAM o2 AS SELECT I1.ID FROM I1 FULL OUTER JOIN I2 WITHIN 1 SECOND ON I1.K = I2.K;")


def test_unknown_function_in_a_group_by_is_named_before_missing_aggregates(catalog: Catalog) -> None:
    with pytest.raises(AnalysisError, match="Can't find any functions with the name 'WONT_FIND_ME'"):
        plan(catalog, "CREATE TABLE o AS SELECT name, wont_find_me(id) FROM pay GROUP BY name;")
    with pytest.raises(AnalysisError, match="GROUP BY requires aggregate functions"):
        plan(catalog, "CREATE TABLE o AS SELECT name, UCASE(name) AS u FROM pay GROUP BY name;")


def test_having_type_errors_show_the_aggregate_call(catalog: Catalog) -> None:
    with pytest.raises(AnalysisError, match=r"Cannot compare SUM\(N\) \(INTEGER\) to '100' \(STRING\)") as err:
        plan(catalog, "CREATE TABLE o AS SELECT name, SUM(n) AS s FROM pay GROUP BY name HAVING SUM(n) > '100';")
    assert "__A" not in str(err.value)


def test_dateadd_with_a_column_for_its_unit_is_rejected_by_argument_types(catalog: Catalog) -> None:
    with pytest.raises(AnalysisError, match=r"Function 'dateadd' does not accept parameters \(STRING, INTEGER, STRING\)\."):
        compile_expr(catalog, "DATEADD(name, 5, name)")
    with pytest.raises(AnalysisError, match="unknown time unit 'FORTNIGHTS'"):
        compile_expr(catalog, "DATEADD(FORTNIGHTS, 5, name)")


@pytest.fixture
def enrichment_catalog() -> Catalog:
    """orders ⟕ customers ⟕ items: a stream and two tables, keyed by different columns."""
    c = Catalog()
    c.add(Source("ORDERS", "STREAM", [t.Column("ID", t.INTEGER, "key"), t.Column("CUSTOMER_ID", t.INTEGER),
                                      t.Column("ITEM_ID", t.STRING), t.Column("QTY", t.INTEGER)],
                 topic="orders", key_format="KAFKA", value_format="JSON"))
    c.add(Source("CUSTOMERS", "TABLE", [t.Column("ID", t.INTEGER, "key"), t.Column("NAME", t.STRING)],
                 topic="customers", key_format="KAFKA", value_format="JSON"))
    c.add(Source("ITEMS", "TABLE", [t.Column("ID", t.STRING, "key"), t.Column("PRICE", t.DOUBLE)],
                 topic="items", key_format="KAFKA", value_format="JSON"))
    c.add(Source("T2", "TABLE", [t.Column("ID", t.INTEGER, "key"), t.Column("V", t.INTEGER)],
                 topic="t2", key_format="KAFKA", value_format="JSON"))
    return c


def test_three_way_join_nests_the_first_join_as_the_left_side(enrichment_catalog: Catalog) -> None:
    p = plan(enrichment_catalog,
             "CREATE STREAM e AS SELECT o.ITEM_ID, o.QTY, c.NAME, i.PRICE FROM ORDERS o "
             "LEFT JOIN CUSTOMERS c ON o.CUSTOMER_ID = c.ID LEFT JOIN ITEMS i ON o.ITEM_ID = i.ID;")
    outer = p.source.join
    inner = outer.left.source.join
    assert inner is not None and outer.kind == "LEFT" and inner.kind == "LEFT"
    assert [s.alias for s in outer.leaves()] == ["O", "C", "I"]
    assert outer.left.key_sql == "`O_ITEM_ID`"  # the nested join's columns keep their ALIAS_ names
    assert [(c.name, c.is_key) for c in p.columns] == [
        ("ITEM_ID", True), ("QTY", False), ("NAME", False), ("PRICE", False)]


def test_n_way_join_viable_keys_follow_the_join_equivalence_sets(join_catalog: Catalog) -> None:
    join_catalog.add(Source("T3", "TABLE", [t.Column("ID", t.INTEGER, "key"), t.Column("V", t.INTEGER)], topic="t3",
                            key_format="KAFKA", value_format="JSON"))
    base = "CREATE STREAM o AS SELECT I1.F0 FROM I1 {} JOIN T ON {} = T.ID {} JOIN T3 ON {} = T3.ID;"
    cases = [("", "I1.ID", "", "I1.ID", "I1.ID, T.ID or T3.ID"),
             ("LEFT", "I1.ID", "LEFT", "I1.ID", "I1.ID, T.ID or T3.ID"),
             ("", "I1.ID + 1", "", "I1.ID", "I1.ID or T3.ID"),
             ("", "I1.ID", "", "I1.ID + 1", "expression T3.ID in")]
    for kind1, left1, kind2, left2, listed in cases:
        with pytest.raises(AnalysisError, match=re.escape(listed)):
            plan(join_catalog, base.format(kind1, left1, kind2, left2))
    # the key is the first viable column the projection has
    p = plan(join_catalog, "CREATE STREAM o AS SELECT T3.ID, I1.F0 FROM I1 JOIN T ON I1.ID = T.ID "
                           "JOIN T3 ON I1.ID = T3.ID;")
    assert [(c.name, c.is_key) for c in p.columns] == [("T3_ID", True), ("F0", False)]


@pytest.mark.parametrize("sql, message", [
    ("SELECT * FROM I1 JOIN T ON I1.F0 = T.ID JOIN T AS X ON I1.ID = I1.ID EMIT CHANGES;",
     "Each side of the join must reference exactly one source and not the same source. Left side references `I1` "
     "and right references `I1`"),
    ("SELECT * FROM T JOIN T AS U ON T.ID = U.ID JOIN I1 ON T.ID = I1.ID EMIT CHANGES;",
     "Invalid join order: table-stream joins are not supported; only stream-table joins. Got T [INNER] JOIN I1."),
    ("SELECT * FROM I1 JOIN T ON I1.ID = T.ID JOIN T ON I1.ID = T.ID EMIT CHANGES;",
     "Can not join 'T' to 'T': self joins require unique aliases."),
    ("SELECT * FROM I1 JOIN T ON I1.ID = 0 JOIN I2 WITHIN 1 SECOND ON I1.K = I2.K EMIT CHANGES;",
     "Invalid comparison expression '0' in join '(I1.ID = 0)'"),
])
def test_n_way_join_errors(join_catalog: Catalog, sql: str, message: str) -> None:
    with pytest.raises(AnalysisError, match=re.escape(message)):
        plan(join_catalog, sql, persistent=False)


def test_foreign_key_join_is_keyed_by_the_left_tables_primary_key(enrichment_catalog: Catalog) -> None:
    enrichment_catalog.add(Source("ORDERS_T", "TABLE", [t.Column("ID", t.INTEGER, "key"),
                                                        t.Column("CUSTOMER_ID", t.INTEGER), t.Column("QTY", t.INTEGER)],
                                  topic="ot", key_format="KAFKA", value_format="JSON"))
    p = plan(enrichment_catalog, "CREATE TABLE o AS SELECT NAME, o.ID, QTY FROM ORDERS_T o "
                                 "LEFT JOIN CUSTOMERS c ON o.CUSTOMER_ID = c.ID;")
    spec = p.source.join
    assert spec.foreign_key == ("O_ID",) and spec.left.key_sql == "`CUSTOMER_ID`"
    assert [(c.name, c.is_key) for c in p.columns] == [("O_ID", True), ("NAME", False), ("QTY", False)]


@pytest.mark.parametrize("sql, message", [
    ("CREATE TABLE o AS SELECT NAME FROM ORDERS_T o JOIN CUSTOMERS c ON o.CUSTOMER_ID = c.ID;",
     "Primary key columns missing in projection. For foreign-key table-table joins, the projection must include "
     "all primary key columns from the left input table (`ORDERS_T`). Missing columns: `ID`."),
    ("CREATE TABLE o AS SELECT o.ID FROM ORDERS_T o RIGHT JOIN CUSTOMERS c ON o.CUSTOMER_ID = c.ID;",
     "RIGHT OUTER JOIN on a foreign key is not supported"),
    ("CREATE TABLE o AS SELECT o.ID FROM ORDERS_T o JOIN CUSTOMERS c ON c.NAME = o.CUSTOMER_ID;",
     "Invalid join condition: table-table joins require to join on the primary key of the right input table. "
     "Got C.NAME = O.CUSTOMER_ID."),
    ("CREATE TABLE o AS SELECT o.ID FROM ORDERS_T o JOIN CUSTOMERS c ON o.ID = c.ID JOIN T2 ON o.QTY = T2.ID;",
     "Invalid join condition: foreign-key table-table joins are not supported as part of n-way joins. "
     "Got O.QTY = T2.ID."),
])
def test_foreign_key_join_errors(enrichment_catalog: Catalog, sql: str, message: str) -> None:
    enrichment_catalog.add(Source("ORDERS_T", "TABLE", [t.Column("ID", t.INTEGER, "key"),
                                                        t.Column("CUSTOMER_ID", t.INTEGER), t.Column("QTY", t.INTEGER)],
                                  topic="ot", key_format="KAFKA", value_format="JSON"))
    with pytest.raises(AnalysisError, match=re.escape(message)):
        plan(enrichment_catalog, sql)


# --- ksqlDB's statement rules and messages (session 17) ---------------------------------------------

def test_select_star_partition_by_builds_ksqldbs_repartitioned_columns(catalog: Catalog) -> None:
    """The new key (a column keeps its name, a struct field takes the field's, another expression
    KSQL_COL_0), then the value columns, then the old key; a key read from the value is null for
    a null-valued record, one of key columns only is not."""
    p = plan(catalog, "CREATE STREAM o AS SELECT * FROM pay PARTITION BY name;")
    assert [(c.name, c.is_key) for c in p.columns][:3] == [("NAME", True), ("AMOUNT", False), ("N", False)]
    assert p.columns[-1].name == "ID" and not p.columns[-1].is_key and p.keys_from_value == {"`NAME`"}
    town = plan(catalog, "CREATE STREAM o AS SELECT * FROM pay PARTITION BY addr->city;")
    assert (town.columns[0].name, town.columns[0].is_key) == ("CITY", True)
    cast = plan(catalog, "CREATE STREAM o AS SELECT * FROM pay PARTITION BY CAST(n AS BIGINT), ROWTIME;")
    assert [(c.name, c.type) for c in cast.columns if c.is_key] == [("KSQL_COL_0", t.BIGINT), ("ROWTIME", t.BIGINT)]
    assert not plan(catalog, "CREATE STREAM o AS SELECT * FROM pay PARTITION BY id;").keys_from_value
    mixed = plan(catalog, "CREATE STREAM o AS SELECT * FROM pay PARTITION BY id, name;")
    assert mixed.keys_from_value == {"`NAME`"}  # each expression on its own, as ksqlDB


@pytest.mark.parametrize("sql, message", [
    ("CREATE STREAM o AS SELECT id, n AS rowtime FROM pay;",
     "`ROWTIME` is a reserved column name. You cannot use it as an alias for a column."),
    ("CREATE STREAM o AS SELECT id, id AS id2, name FROM pay;",
     "The projection contains a key column (`ID`) more than once, aliased as: ID and ID2."),
    ("CREATE STREAM o AS SELECT name, name AS name2, id FROM pay PARTITION BY name;",
     "The projection contains a key column (`NAME`) more than once, aliased as: NAME and NAME2."),
    ("CREATE STREAM o AS SELECT * FROM pay PARTITION BY nope;",
     "Line: 1, Col: 51: PARTITION BY column 'NOPE' cannot be resolved. 'NOPE' must be a column in the source "
     "schema since PARTITION BY is applied on the input."),
    ("CREATE STREAM o AS SELECT id, null AS x FROM pay;",
     "Can't infer a type of null. Please explicitly cast it to a required type, e.g. CAST(null AS VARCHAR)."),
    ("CREATE TABLE o AS SELECT id, COUNT(*) FROM pay GROUP BY id, pay.id;", "Duplicate GROUP BY expression: PAY.ID"),
    ("CREATE TABLE o AS SELECT id, EARLIEST_BY_OFFSET(n, n) FROM pay GROUP BY id;",
     "Parameter 2 passed to function EARLIEST_BY_OFFSET must be a literal constant, but was expression: "
     "'N'"),
    ("CREATE TABLE o AS SELECT id, n * SUM(big) FROM pay GROUP BY id;",
     "Non-aggregate SELECT expression(s) not part of GROUP BY: (N * SUM(BIG))\n"
     "Either add the column(s) to the GROUP BY or remove them from the SELECT."),
])
def test_statement_rules_use_ksqldbs_messages(catalog: Catalog, sql: str, message: str) -> None:
    with pytest.raises(AnalysisError) as err:
        plan(catalog, sql)
    assert str(err.value) == message


def test_column_errors_name_the_line_and_column_in_the_script(join_catalog: Catalog) -> None:
    """ksqlDB starts a message about a column with where it is: ``Line: 3, Col: 38:``."""
    [_, _, stmt] = parse("SHOW STREAMS;\nSHOW TABLES;\nCREATE STREAM O AS SELECT I1.K, F0 FROM I1 JOIN I2 WITHIN "
                         "10 SECONDS ON I1.K = I2.K;")
    with pytest.raises(AnalysisError) as err:
        Planner(join_catalog, builtin_registry()).plan_query(stmt.query, persistent=True, sink_name="O")  # type: ignore[attr-defined]
    assert str(err.value) == "Line: 3, Col: 33: Column 'F0' is ambiguous. Could be I1.F0 or I2.F0."
    with pytest.raises(AnalysisError, match=re.escape("Line: 1, Col: 52: JOIN ON column 'I2.NOPE' cannot be "
                                                      "resolved.")):
        plan(join_catalog, "SELECT * FROM I1 JOIN I2 WITHIN 1 SECOND ON I1.K = I2.NOPE EMIT CHANGES;", persistent=False)
    with pytest.raises(AnalysisError, match=re.escape("Invalid join condition: joins on multiple conditions are not "
                                                      "yet supported. Got ((I1.K = I2.K) AND (I1.ID = I2.ID)).")):
        plan(join_catalog, "SELECT * FROM I1 JOIN I2 WITHIN 1 SECOND ON I1.K = I2.K AND I1.ID = I2.ID EMIT CHANGES;",
             persistent=False)


def test_a_computed_copy_of_the_key_is_a_value_column(catalog: Catalog) -> None:
    p = plan(catalog, "CREATE STREAM o AS SELECT id, name, AS_VALUE(id) AS id2 FROM pay;")
    assert [(c.name, c.is_key) for c in p.columns] == [("ID", True), ("NAME", False), ("ID2", False)]


def test_the_synthetic_join_key_avoids_the_sources_column_names(join_catalog: Catalog) -> None:
    """ksqlDB's generateSyntheticJoinKey: ROWKEY, else ROWKEY_n with the smallest free n (sources
    whose key schema comes from a registry have a key column named ROWKEY)."""
    from streamsql.planner.joins import synthetic_key_name

    assert synthetic_key_name([t.Column("K", t.INTEGER)]) == "ROWKEY"
    assert synthetic_key_name([t.Column("ROWKEY", t.INTEGER), t.Column("ROWKEY_2", t.INTEGER)]) == "ROWKEY_1"
    for name in ("R1", "R2"):
        join_catalog.add(Source(name, "STREAM", [t.Column("ROWKEY", t.INTEGER, "key"), t.Column("V", t.STRING)],
                                topic=name.lower(), key_format="KAFKA", value_format="JSON"))
    p = plan(join_catalog, "CREATE STREAM o AS SELECT ROWKEY_1, R2.V FROM R1 FULL OUTER JOIN R2 WITHIN 10 SECONDS "
                           "ON R1.ROWKEY = R2.ROWKEY;")
    assert [(c.name, c.is_key) for c in p.columns] == [("ROWKEY_1", True), ("R2_V", False)]


def test_a_column_projected_twice_is_refused_as_ksqldbs_schema_builder_does(catalog: Catalog) -> None:
    with pytest.raises(AnalysisError) as info:
        plan(catalog, "SELECT NAME, NAME FROM PAY;", persistent=False)
    assert str(info.value).endswith("Duplicate value columns found in schema: `NAME` STRING")


def test_an_n_way_outer_join_keeps_rowkey_when_no_source_has_it(join_catalog: Catalog) -> None:
    """Only the sources' columns count (ksqlDB's resolveKeyName): the first join's synthetic
    ROWKEY does not push the second to ROWKEY_1."""
    from dataclasses import replace

    join_catalog.sources["I3"] = replace(join_catalog.get("I2"), name="I3", topic="c")
    p = plan(join_catalog, "CREATE STREAM o AS SELECT ROWKEY, I1.ID FROM I1 FULL OUTER JOIN I2 WITHIN 5 SECONDS "
                           "ON I1.ID = I2.ID FULL OUTER JOIN I3 WITHIN 5 SECONDS ON I1.ID = I3.ID;")
    assert p.columns[0].name == "ROWKEY" and p.columns[0].is_key


def test_a_persistent_query_reads_no_windowed_table_in_any_join(join_catalog: Catalog) -> None:
    """ksqlDB's PushQueryValidator looks at all of a persistent query's sources: a windowed table
    on a join's right side is refused as in FROM (only FROM was checked)."""
    from streamsql.planner import ddl

    _windowed(join_catalog, "S1", "TUMBLING", 1000)
    _windowed(join_catalog, "WT", "TUMBLING", 1000, kind="TABLE")
    for sql in ("CREATE STREAM o AS SELECT * FROM S1 JOIN WT ON S1.K = WT.K;",
                "INSERT INTO o SELECT * FROM S1 JOIN WT ON S1.K = WT.K;",
                "CREATE TABLE o AS SELECT * FROM WT;"):
        with pytest.raises(AnalysisError, match="KSQL does not support persistent queries on windowed tables."):
            ddl.check_no_windowed_table(join_catalog, parse(sql)[0].query)
    # the analyzer's checks of the joined sources come first, as in ksqlDB
    with pytest.raises(AnalysisError, match="Can not join windowed source to non-windowed source"):
        ddl.check_no_windowed_table(join_catalog, parse("CREATE STREAM o AS SELECT * FROM I1 JOIN WT "
                                                        "ON I1.K = WT.K;")[0].query)
    _windowed(join_catalog, "S2", "TUMBLING", 1000)
    ddl.check_no_windowed_table(join_catalog, parse("CREATE STREAM o AS SELECT * FROM S1 JOIN S2 WITHIN 1 SECOND "
                                                    "ON S1.K = S2.K;")[0].query)
