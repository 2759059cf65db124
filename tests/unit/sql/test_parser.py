"""The ksqlDB dialect and statement parser (pure: no Spark, no Kafka)."""

from __future__ import annotations

import json

import pytest
from sqlglot import exp

from streamsql import types as t
from streamsql.errors import ParseError
from streamsql.sql import ast, parse, parse_expression, parse_type, to_sql_type
from streamsql.sql.dialect import to_ksql
from tests.support.corpus import corpus_dir


def one(text: str, **kwargs) -> ast.Statement:
    statements = parse(text, **kwargs)
    assert len(statements) == 1
    return statements[0]


def query(text: str) -> ast.Query:
    statement = one(text)
    assert isinstance(statement, ast.SelectStatement)
    return statement.query


def column(name: str, table: str | None = None, quoted: bool = False) -> exp.Column:
    return exp.Column(
        this=exp.Identifier(this=name, quoted=quoted),
        table=exp.Identifier(this=table, quoted=False) if table else None,
    )


def parse_error(text: str, **kwargs) -> ParseError:
    with pytest.raises(ParseError) as info:
        parse(text, **kwargs)
    return info.value


# --- identifiers and literals ----------------------------------------------------------------


def test_unquoted_identifiers_are_upper_cased_and_quoted_ones_kept() -> None:
    assert parse_expression("abc") == column("ABC")
    assert parse_expression("`aBc`") == column("aBc", quoted=True)
    assert parse_expression('"aBc"') == column("aBc", quoted=True)
    assert parse_expression("s.col") == column("COL", table="S")
    assert parse_expression("`we``ird`").name == "we`ird"


def test_non_reserved_keywords_and_pseudo_columns_are_columns() -> None:
    for name in ("KEY", "VALUE", "DATE", "TIME", "TIMESTAMP", "SESSION", "SIZE", "ROWTIME", "ROWPARTITION",
                 "ROWOFFSET", "WINDOWSTART", "WINDOWEND", "EMIT", "FINAL", "STRUCT", "MAP", "ARRAY"):  # fmt: skip
        assert parse_expression(name.lower()) == column(name), name


def test_digit_identifiers_are_allowed() -> None:
    assert query("SELECT ROUND(v, -1) AS 1R FROM s;").select[0].alias == "1R"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("'it''s'", exp.Literal.string("it's")),
        ("1", exp.Literal.number("1")),
        ("1.50", exp.Literal.number("1.50")),
        ("1.5E3", exp.Literal.number("1.5E3")),
        ("TRUE", exp.Boolean(this=True)),
        ("false", exp.Boolean(this=False)),
        ("NULL", exp.Null()),
        ("-1", exp.Neg(this=exp.Literal.number("1"))),
    ],
)
def test_literals(text: str, expected: exp.Expr) -> None:
    assert parse_expression(text) == expected


def test_decimal_type_constructor_takes_precision_and_scale_from_the_text() -> None:
    cast = parse_expression("DECIMAL '12.30'")
    assert isinstance(cast, exp.Cast) and cast.this == exp.Literal.string("12.30")
    assert to_sql_type(cast.to) == t.Decimal(4, 2)


def test_integer_literals_outside_bigint_are_rejected() -> None:
    # BIGINT's minimum parses to the negated literal; one below it is ksqlDB's ParseFailedException
    # (QTT literals.json "BIGINT literal negative overflow": "Invalid numeric literal: -9223372036854775809")
    assert parse_expression("-9223372036854775808") == exp.Neg(this=exp.Literal.number(str(2**63)))
    assert to_ksql(parse_expression("-9223372036854775808")) == str(-(2**63))
    with pytest.raises(ParseError, match="Invalid numeric literal: -9223372036854775809$"):
        parse_expression("-9223372036854775809")
    with pytest.raises(ParseError, match="Invalid numeric literal: 9223372036854775808"):
        parse_expression("9223372036854775808")


def test_comments_are_ignored() -> None:
    statements = parse("-- heading\nSHOW STREAMS; /* block\ncomment */ SHOW TABLES -- trailing")
    assert [s.what for s in statements] == ["STREAMS", "TABLES"]
    assert statements[1].text == "SHOW TABLES"


# --- expressions -----------------------------------------------------------------------------


def test_function_calls_are_anonymous_with_upper_case_names() -> None:
    for name in ("substring", "count", "concat", "if", "trim", "left", "replace", "ceil", "initcap", "myUdf"):
        call = parse_expression(f"{name}(a, 1)")
        assert isinstance(call, exp.Anonymous), name
        assert call.name == name.upper()
        assert call.expressions == [column("A"), exp.Literal.number("1")]


def test_count_star() -> None:
    assert parse_expression("COUNT(*)") == exp.Anonymous(this="COUNT", expressions=[exp.Star()])


def test_struct_dereference_and_subscripts() -> None:
    deref = parse_expression("a->b->`c`")
    assert deref == exp.Dot(
        this=exp.Dot(this=column("A"), expression=exp.Identifier(this="B", quoted=False)),
        expression=exp.Identifier(this="c", quoted=True),
    )
    assert parse_expression("arr[1]") == exp.Bracket(this=column("ARR"), expressions=[exp.Literal.number("1")])
    assert parse_expression("s.m['k']->f").this.this == column("M", table="S")


def test_lambdas() -> None:
    call = parse_expression("TRANSFORM(m, (k, v) => UCASE(k), (k, v) => v + 1)")
    first, second = call.expressions[1:]
    assert isinstance(first, exp.Lambda) and [p.name for p in first.expressions] == ["K", "V"]
    assert first.this == exp.Anonymous(this="UCASE", expressions=[column("K")])
    assert second.this == exp.Add(this=column("V"), expression=exp.Literal.number("1"))
    single = parse_expression("FILTER(arr, x => x > 1)").expressions[1]
    assert isinstance(single, exp.Lambda) and single.expressions[0].name == "X"


def test_cast_carries_a_datatype_convertible_to_a_sql_type() -> None:
    cast = parse_expression("CAST(x AS STRUCT<a INT, `b` ARRAY<DECIMAL(4, 2)>, c MAP<STRING, BYTES>>)")
    assert isinstance(cast, exp.Cast)
    assert to_sql_type(cast.to) == t.Struct(
        (
            t.StructField("A", t.INTEGER),
            t.StructField("b", t.Array(t.Decimal(4, 2))),
            t.StructField("C", t.Map(t.STRING, t.BYTES)),
        )
    )


@pytest.mark.parametrize(
    ("text", "node"),
    [
        ("a + b * c - d / e % f", exp.Sub),
        ("a = 1 AND NOT b <> 2 OR c >= 3", exp.Or),
        ("a LIKE 'x%' ESCAPE '!'", exp.Escape),
        ("a NOT LIKE 'x%'", exp.Not),
        ("a NOT IN (1)", exp.Not),
        ("a NOT BETWEEN 1 AND 2", exp.Not),
        ("a IN (1, 2)", exp.In),
        ("a BETWEEN 1 AND 2", exp.Between),
        ("a IS NULL", exp.Is),
        ("a IS NOT NULL", exp.Not),
        ("a IS DISTINCT FROM b", exp.NullSafeNEQ),
        ("CASE WHEN a > 1 THEN 'x' ELSE 'y' END", exp.Case),
        ("CASE a WHEN 1 THEN 'x' END", exp.Case),
        ("a || b", exp.DPipe),
        ("ARRAY[1, 2]", exp.Array),
    ],
)
def test_syntax_forms_keep_sqlglot_node_types(text: str, node: type[exp.Expr]) -> None:
    assert isinstance(parse_expression(text), node)


def test_constructors() -> None:
    struct = parse_expression("STRUCT(a := 1, `b` := 'x')")
    assert struct.name == "STRUCT"
    assert struct.expressions[0] == exp.PropertyEQ(
        this=exp.Identifier(this="A", quoted=False), expression=exp.Literal.number("1")
    )
    assert parse_expression("MAP('k' := 1)").expressions[0].this == exp.Literal.string("k")


def test_parentheses_are_dropped_and_restored_by_to_ksql() -> None:
    tree = parse_expression("((a + b)) * c")
    assert isinstance(tree, exp.Mul) and isinstance(tree.this, exp.Add)
    assert to_ksql(tree) == "(A + B) * C"
    assert to_ksql(parse_expression("TRANSFORM(a, x => x->f)")) == "TRANSFORM(A, X => X->F)"


@pytest.mark.parametrize(
    "text",
    ["(SELECT 1)", "a & b", "COUNT(DISTINCT a)", "a::INT", "a.b.c", "a[1:2]", "x IN ()", "f(x) OVER (PARTITION BY y)"],
)
def test_syntax_outside_ksqldb_is_rejected(text: str) -> None:
    with pytest.raises(ParseError):
        parse_expression(text)


# --- types -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("BOOLEAN", t.BOOLEAN),
        ("INT", t.INTEGER),
        ("integer", t.INTEGER),
        ("BIGINT", t.BIGINT),
        ("DOUBLE", t.DOUBLE),
        ("DECIMAL(10, 2)", t.Decimal(10, 2)),
        ("VARCHAR", t.STRING),
        ("STRING", t.STRING),
        ("BYTES", t.BYTES),
        ("DATE", t.DATE),
        ("TIME", t.TIME),
        ("TIMESTAMP", t.TIMESTAMP),
        ("ARRAY<ARRAY<INT>>", t.Array(t.Array(t.INTEGER))),
        ("MAP<STRING, ARRAY<BIGINT>>", t.Map(t.STRING, t.Array(t.BIGINT))),
        ("STRUCT<>", t.Struct(())),
        (
            "STRUCT<KEY STRING, `value` STRUCT<x INT>>",
            t.Struct((t.StructField("KEY", t.STRING), t.StructField("value", t.Struct((t.StructField("X", t.INTEGER),))))),
        ),
    ],
)
def test_types(text: str, expected: t.SqlType) -> None:
    assert parse_type(text) == expected
    assert parse_type(str(expected)) == expected  # the catalog stores types as their text


@pytest.mark.parametrize("text", ["FLOAT", "DECIMAL", "ARRAY<INT", "STRUCT<a>", "MAP<STRING>", "NULL", "ARRAY<NULL>"])
def test_bad_types_are_rejected(text: str) -> None:
    with pytest.raises(ParseError):
        parse_type(text)


def test_custom_types_resolve_from_arguments_and_earlier_create_type() -> None:
    address = t.Struct((t.StructField("STREET", t.STRING),))
    statement = one("CREATE STREAM s (a ADDRESS) WITH (kafka_topic='t');", custom_types={"ADDRESS": address})
    assert statement.columns[0].type == address

    create_type, stream, select = parse(
        "CREATE TYPE address AS STRUCT<street STRING>;"
        "CREATE STREAM s (a ARRAY<Address>) WITH (kafka_topic='t');"
        "SELECT CAST(x AS ADDRESS) FROM s;"
    )
    assert create_type == ast.CreateType("ADDRESS", address, text=create_type.text)
    assert stream.columns[0].type == t.Array(address)
    assert to_sql_type(select.query.select[0].expression.to) == address


def test_unknown_type_names_the_type() -> None:
    error = parse_error("CREATE TYPE a AS INT; DROP TYPE a; CREATE STREAM s (x A);")
    assert error.reason == "Unknown type: A"
    assert (error.line, error.column) == (1, 55)


# --- DDL -------------------------------------------------------------------------------------


def test_create_stream_with_columns_and_properties() -> None:
    statement = one(
        "CREATE STREAM pageviews (id BIGINT KEY, `Page` STRING, h ARRAY<STRUCT<KEY STRING, VALUE BYTES>> HEADERS, "
        "b BYTES HEADER('trace')) WITH (kafka_topic='pv', 'value_format'='JSON', partitions=2, "
        "wrap_single_value=false, x=1.5, y=-3);"
    )
    assert isinstance(statement, ast.CreateSource)
    assert (statement.kind, statement.name, statement.is_source, statement.or_replace) == ("STREAM", "PAGEVIEWS", False, False)
    assert statement.columns == [
        t.Column("ID", t.BIGINT, "key"),
        t.Column("Page", t.STRING),
        t.Column("H", t.Array(t.Struct((t.StructField("KEY", t.STRING), t.StructField("VALUE", t.BYTES)))), "headers"),
        t.Column("B", t.BYTES, "header", "trace"),
    ]
    assert statement.properties == {
        "KAFKA_TOPIC": "pv", "VALUE_FORMAT": "JSON", "PARTITIONS": 2, "WRAP_SINGLE_VALUE": False, "X": 1.5, "Y": -3,
    }  # fmt: skip


def test_create_source_table_or_replace_if_not_exists() -> None:
    statement = one("CREATE OR REPLACE SOURCE TABLE IF NOT EXISTS t (id INT PRIMARY KEY) WITH (kafka_topic='t');")
    assert (statement.kind, statement.is_source, statement.or_replace, statement.if_not_exists) == ("TABLE", True, True, True)
    assert statement.columns == [t.Column("ID", t.INTEGER, "key")]


def test_create_without_columns() -> None:
    statement = one("CREATE STREAM s WITH (kafka_topic='s', format='AVRO')")
    assert isinstance(statement, ast.CreateSource) and statement.columns == []


@pytest.mark.parametrize(
    ("text", "message", "column"),
    [
        (
            "CREATE TABLE INPUT (ID INT KEY) WITH (kafka_topic='i');",
            "Column `ID` is a 'KEY' column: please use 'PRIMARY KEY' for tables.",
            21,
        ),
        (
            "CREATE STREAM INPUT (ID INT PRIMARY KEY) WITH (kafka_topic='i');",
            "Column `ID` is a 'PRIMARY KEY' column: please use 'KEY' for streams.",
            22,
        ),
    ],
)
def test_key_kind_must_match_source_kind(text: str, message: str, column: int) -> None:
    error = parse_error(text)
    assert (error.reason, error.line, error.column) == (message, 1, column)


def test_create_as_select() -> None:
    statement = one("CREATE OR REPLACE TABLE IF NOT EXISTS agg WITH (partitions=2) AS SELECT id, COUNT(*) AS n FROM s GROUP BY id;")
    assert isinstance(statement, ast.CreateAsSelect)
    assert (statement.kind, statement.name, statement.properties) == ("TABLE", "AGG", {"PARTITIONS": 2})
    assert (statement.or_replace, statement.if_not_exists) == (True, True)
    assert statement.query.group_by == [column("ID")]
    assert statement.query.emit is None


def test_drop_and_types() -> None:
    drop, drop_table, create_type, drop_type = parse(
        "DROP STREAM IF EXISTS s DELETE TOPIC; DROP TABLE t; CREATE TYPE IF NOT EXISTS pt AS STRUCT<x INT>; DROP TYPE IF EXISTS pt;"
    )
    assert (drop.kind, drop.name, drop.if_exists, drop.delete_topic) == ("STREAM", "S", True, True)
    assert (drop_table.kind, drop_table.if_exists, drop_table.delete_topic) == ("TABLE", False, False)
    assert create_type.if_not_exists and create_type.name == "PT"
    assert drop_type == ast.DropType("PT", if_exists=True, text="DROP TYPE IF EXISTS pt", column=100)


def test_insert_into_select_and_values() -> None:
    insert, values, all_values = parse(
        "INSERT INTO out WITH (QUERY_ID='my_q') SELECT * FROM s EMIT CHANGES;"
        "INSERT INTO s (ROWTIME, id, `Name`) VALUES (1, 2, 'x');"
        "INSERT INTO s VALUES (1);"
    )
    assert isinstance(insert, ast.InsertInto)
    assert (insert.target, insert.properties, insert.query.emit) == ("OUT", {"QUERY_ID": "my_q"}, "CHANGES")
    assert isinstance(values, ast.InsertValues)
    assert values.columns == ["ROWTIME", "ID", "Name"]
    assert values.values == [exp.Literal.number("1"), exp.Literal.number("2"), exp.Literal.string("x")]
    assert all_values.columns is None


# --- queries ---------------------------------------------------------------------------------


def test_full_query() -> None:
    q = query(
        "SELECT l.id AS k, r.*, l.s->*, COUNT(*) cnt FROM left_s l "
        "LEFT OUTER JOIN right_s AS r WITHIN (1 HOUR, 2 HOURS) GRACE PERIOD 10 SECONDS ON l.id = r.id "
        "WINDOW TUMBLING (SIZE 1 MINUTE, RETENTION 2 DAYS, GRACE PERIOD 0 SECONDS) WHERE l.x > 1 "
        "GROUP BY l.id HAVING COUNT(*) > 2 EMIT FINAL LIMIT 10;"
    )
    assert q.select == [
        ast.SelectItem(column("ID", "L"), "K"),
        ast.SelectItem(exp.Column(this=exp.Star(), table=exp.Identifier(this="R", quoted=False)), star=True),
        ast.SelectItem(column("S", "L"), star=True),
        ast.SelectItem(exp.Anonymous(this="COUNT", expressions=[exp.Star()]), "CNT"),
    ]
    assert q.source == ast.SourceRef("LEFT_S", "L")
    assert q.joins == [ast.JoinClause("LEFT", ast.SourceRef("RIGHT_S", "R"), q.joins[0].on, 3_600_000, 7_200_000, 10_000)]
    assert q.window == ast.WindowSpec("TUMBLING", 60_000, retention_ms=172_800_000, grace_ms=0)
    assert isinstance(q.where, exp.GT) and isinstance(q.having, exp.GT)
    assert (q.emit, q.limit) == ("FINAL", 10)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("JOIN", "INNER"), ("INNER JOIN", "INNER"), ("LEFT JOIN", "LEFT"), ("LEFT OUTER JOIN", "LEFT"),
        ("RIGHT OUTER JOIN", "RIGHT"), ("FULL OUTER JOIN", "FULL"), ("FULL JOIN", "FULL"),
    ],  # fmt: skip
)
def test_join_kinds(text: str, kind: str) -> None:
    q = query(f"SELECT * FROM a {text} b WITHIN 5 SECONDS ON a.id = b.id {text} c ON b.id = c.id EMIT CHANGES;")
    assert [j.kind for j in q.joins] == [kind, kind]
    assert (q.joins[0].within_before_ms, q.joins[0].within_after_ms, q.joins[1].within_before_ms) == (5000, 5000, None)


@pytest.mark.parametrize(
    ("window", "expected"),
    [
        ("TUMBLING (SIZE 30 SECONDS)", ast.WindowSpec("TUMBLING", 30_000)),
        (
            "HOPPING (SIZE 1 HOUR, ADVANCE BY 10 MINUTES, GRACE PERIOD 1 DAY)",
            ast.WindowSpec("HOPPING", 3_600_000, advance_ms=600_000, grace_ms=86_400_000),
        ),
        ("SESSION (500 MILLISECONDS)", ast.WindowSpec("SESSION", 500)),
        ("SESSION (1 MILLISECOND, RETENTION 1 SECOND)", ast.WindowSpec("SESSION", 1, retention_ms=1000)),
        ("legacy_name TUMBLING (SIZE 1 DAYS)", ast.WindowSpec("TUMBLING", 86_400_000)),
    ],
)
def test_windows_and_durations(window: str, expected: ast.WindowSpec) -> None:
    assert query(f"SELECT COUNT(*) FROM s WINDOW {window} GROUP BY k EMIT CHANGES;").window == expected


def test_group_by_forms_and_partition_by() -> None:
    assert query("SELECT * FROM s GROUP BY (a, b->c);").group_by == [
        column("A"),
        exp.Dot(this=column("B"), expression=exp.Identifier(this="C", quoted=False)),
    ]
    assert query("SELECT * FROM s GROUP BY a, b;").group_by == [column("A"), column("B")]
    assert query("SELECT * FROM s PARTITION BY a, b EMIT CHANGES;").partition_by == [column("A"), column("B")]
    assert query("SELECT * FROM s PARTITION BY NULL EMIT CHANGES;").partition_by == [exp.Null()]


@pytest.mark.parametrize("text", ["SELECT * FROM s GROUP BY a AND b;", "SELECT * FROM s GROUP BY a, (b, c);"])
def test_group_by_takes_value_expressions_only(text: str) -> None:
    parse_error(text)


def test_pull_and_push_queries() -> None:
    assert query("SELECT * FROM t WHERE id = 1;").emit is None
    assert query("select * from s emit changes limit 3;").limit == 3


# --- meta statements -------------------------------------------------------------------------


def test_show_and_list() -> None:
    statements = parse(
        "SHOW STREAMS; LIST TABLES EXTENDED; SHOW ALL TOPICS; SHOW TOPICS EXTENDED; SHOW QUERIES; "
        "SHOW PROPERTIES; LIST FUNCTIONS; SHOW TYPES; SHOW VARIABLES;"
    )
    assert [(s.what, s.extended, s.all_topics) for s in statements] == [
        ("STREAMS", False, False), ("TABLES", True, False), ("TOPICS", False, True), ("TOPICS", True, False),
        ("QUERIES", False, False), ("PROPERTIES", False, False), ("FUNCTIONS", False, False),
        ("TYPES", False, False), ("VARIABLES", False, False),
    ]  # fmt: skip


def test_describe() -> None:
    source, extended, listing, tables, quoted, function = parse(
        "DESCRIBE s; DESCRIBE s EXTENDED; DESCRIBE STREAMS EXTENDED; DESCRIBE TABLES; DESCRIBE `TABLES`; DESCRIBE FUNCTION lcase;"
    )
    assert (source.name, source.extended) == ("S", False)
    assert extended.extended
    assert (listing.name, listing.listing, listing.extended) == (None, "STREAMS", True)
    assert tables.listing == "TABLES"
    assert (quoted.name, quoted.listing) == ("TABLES", None)
    assert (function.name, function.function) == ("LCASE", True)


def test_print_terminate_set_define_explain() -> None:
    statements = parse(
        "PRINT 'my-Topic' FROM BEGINNING INTERVAL 2 LIMIT 5; PRINT topic2 SAMPLE 3; TERMINATE CSAS_OUT_1; TERMINATE ALL; "
        "SET 'auto.offset.reset' = 'earliest'; UNSET 'auto.offset.reset'; DEFINE fmt = 'JSON'; UNDEFINE fmt; "
        "EXPLAIN CTAS_X_3; EXPLAIN SELECT * FROM s EMIT CHANGES;"
    )
    assert statements[0] == ast.Print("my-Topic", True, 2, 5, text=statements[0].text)
    assert (statements[1].topic, statements[1].interval) == ("topic2", 3)
    assert [s.query_id for s in statements[2:4]] == ["CSAS_OUT_1", None]
    assert (statements[4].name, statements[4].value) == ("auto.offset.reset", "earliest")
    assert statements[5].name == "auto.offset.reset"
    assert (statements[6].name, statements[6].value, statements[7].name) == ("FMT", "JSON", "FMT")
    assert statements[8] == ast.Explain(query_id="CTAS_X_3", text="EXPLAIN CTAS_X_3", column=statements[8].column)
    inner = statements[9].statement
    assert isinstance(inner, ast.SelectStatement) and inner.text == "SELECT * FROM s EMIT CHANGES"


# --- scripts, text and positions -------------------------------------------------------------


def test_statement_text_and_positions() -> None:
    first, second = parse("SHOW STREAMS;\n  -- note\n  SELECT *\n  FROM s EMIT CHANGES ;")
    assert (first.text, first.line, first.column) == ("SHOW STREAMS", 1, 1)
    assert (second.text, second.line, second.column) == ("SELECT *\n  FROM s EMIT CHANGES", 3, 3)


def test_missing_final_semicolon_and_empty_statements_are_fine() -> None:
    assert [type(s) for s in parse("SHOW STREAMS;;  ; SHOW TABLES")] == [ast.Show, ast.Show]
    assert parse("  -- nothing\n") == []


def test_semicolons_inside_strings_and_identifiers_do_not_split() -> None:
    statement = one("SET 'a;b' = 'c;''d';")
    assert (statement.name, statement.value) == ("a;b", "c;'d")
    assert one("SELECT `x;y` FROM s;").query.select[0].expression == column("x;y", quoted=True)


# --- variables -------------------------------------------------------------------------------


def test_variables_from_arguments_are_case_insensitive() -> None:
    statement = one("CREATE STREAM ${Name} (id INT KEY) WITH (kafka_topic='${topic}', partitions=${N});",
                    variables={"name": "s1", "TOPIC": "t1", "n": "3"})  # fmt: skip
    assert (statement.name, statement.properties) == ("S1", {"KAFKA_TOPIC": "t1", "PARTITIONS": 3})
    assert statement.text == "CREATE STREAM s1 (id INT KEY) WITH (kafka_topic='t1', partitions=3)"


def test_define_applies_to_later_statements_and_undefine_removes() -> None:
    variables = {"keep": "x"}
    statements = parse(
        "DEFINE topic = 'a'; DEFINE other = 'b_${topic}'; SET 'p' = '${other}'; UNDEFINE topic; SET 'q' = '${topic}';",
        variables,
    )
    assert statements[2].value == "b_a"
    assert statements[4].value == "${topic}"  # unknown variables stay as written, as in ksqlDB
    assert variables == {"keep": "x"}


def test_escaped_variable() -> None:
    assert one("SET 'p' = '$${x}';", variables={"x": "no"}).value == "${x}"


def test_undefined_variable_outside_strings_is_reported() -> None:
    error = parse_error("SHOW STREAMS;\nSELECT ${col} FROM s;")
    assert (error.reason, error.line, error.column) == ("Variable 'col' is not defined", 2, 8)


def test_error_positions_map_back_through_substitution() -> None:
    error = parse_error("SELECT ${c} FORM s;", variables={"c": "a_long_column"})
    assert (error.line, error.column) == (1, 18)


# --- errors ----------------------------------------------------------------------------------


NEAR = "Syntax Error\nSyntax error at or near '{}' at line {}:{}"


@pytest.mark.parametrize(
    ("text", "reason", "line", "column", "rendered"),
    [
        ("SHOW STREAMS;\nSELECT * FORM s;", "mismatched input 'FORM' expecting 'FROM'", 2, 10,
         "Syntax Error\nExpecting 'FROM'"),
        ("SELECT a\n  FORM s;", "mismatched input 's' expecting 'FROM'", 2, 8, "Syntax Error\nExpecting 'FROM'"),
        ("FOO BAR;", "Unknown statement 'FOO'\nDid you mean 'SHOW'?", 1, 1,
         "Syntax Error\nUnknown statement 'FOO'\nDid you mean 'SHOW'?"),
        ("SELEC * FROM s;", "Unknown statement 'SELEC'\nDid you mean 'SELECT'?", 1, 1,
         "Syntax Error\nUnknown statement 'SELEC'\nDid you mean 'SELECT'?"),
        ("SHOW STREAMS x;", "mismatched input 'x' expecting ';'", 1, 14, "Syntax Error\nExpecting ';'"),
        # the statement's ';' is where ksqlDB's parser stops, not the end of the script
        ("SELECT * FROM s WHERE;", "Syntax error at or near ';'", 1, 22, NEAR.format(";", 1, 22)),
        # a script ending inside a statement: ksqlDB's hint about a missing bracket
        ("CREATE STREAM s (a INT) WITH (kafka_topic='t'", "mismatched input '<EOF>' expecting ')'", 1, 46,
         "Syntax Error\nSyntax error at or near \";\"\n'}', ']', or ')' is missing"),
        (   # more than three alternatives: ksqlDB does not list them
            "SELECT * FROM s WINDOW TUMBLING (SIZE 30 BOBS);",
            "mismatched input 'BOBS' expecting a time unit (MILLISECONDS, SECONDS, MINUTES, HOURS, DAYS)",
            1, 42, "Syntax Error",
        ),
        ("SELECT a FROM s WHERE b = 'x;", "Syntax error at or near ''': unterminated string", 1, 27,
         "Syntax error at or near ''': unterminated string"),
        ("SELECT a /* x", "Syntax error at or near '/*': unterminated comment", 1, 10,
         "Syntax error at or near '/*': unterminated comment"),
        ("SELECT CAST(a AS NULL) FROM s;", "Syntax error at or near 'NULL'", 1, 18, NEAR.format("NULL", 1, 18)),
        ("SELECT f(a,, b) FROM s;", "Syntax error at or near ','", 1, 12, NEAR.format(",", 1, 12)),
        ("SELECT a + FROM s;", "Syntax error at or near 'FROM'", 1, 12, NEAR.format("FROM", 1, 12)),
        ("SELECT * FROM s WHERE x IN ();", "Syntax error at or near 'X IN ()'", 1, 23, NEAR.format("X IN ()", 1, 23)),
        # ksqlDB's grammar has no row values: ``(a, b)`` reads as ``(a`` missing its ')'
        ("SELECT * FROM s GROUP BY f3, (f2, f1);", "missing ')' at ','", 1, 33, "Syntax Error\nmissing ')' at ','"),
        # a named type may take parameters (ignored), an integer or STRING
        ("CREATE STREAM i (k STRING (KEY)) WITH (kafka_topic='i', value_format='JSON');",
         "mismatched input 'KEY' expecting {'STRING', INTEGER_VALUE}", 1, 28,
         "Syntax Error\nExpecting {'STRING', INTEGER_VALUE}"),
        ("CREATE STREAM i (k VARCHAR(STRING) (KEY)) WITH (kafka_topic='i', value_format='JSON');",
         "mismatched input '(' expecting {',', ')'}", 1, 36, "Syntax Error\nExpecting {',', ')'}"),
    ],
)
def test_syntax_errors(text: str, reason: str, line: int, column: int, rendered: str) -> None:
    """The reason is the parser's; the message is ksqlDB's rendering of it (SyntaxErrorValidator)."""
    error = parse_error(text)
    assert (error.reason, error.line, error.column) == (reason, line, column)
    assert str(error) == f"line {line}:{column}: {rendered}"


def test_type_parameters_are_read_and_ignored() -> None:
    [statement] = parse(
        "CREATE STREAM i (k VARCHAR(10) KEY, v INT(3, STRING)) WITH (kafka_topic='i', value_format='JSON');")
    assert isinstance(statement, ast.CreateSource)
    assert [(c.name, c.type) for c in statement.columns] == [
        ("K", t.Primitive(t.PRIMITIVE_ALIASES["VARCHAR"])), ("V", t.Primitive(t.PRIMITIVE_ALIASES["INT"]))]


def test_error_carries_the_statement_text() -> None:
    assert parse_error("SHOW STREAMS; SELECT * FORM s; SHOW TABLES;").statement == "SELECT * FORM s"


# --- QTT corpus smoke test -------------------------------------------------------------------


def _corpus_scripts() -> list[tuple[str, str]]:
    """Each QTT test's statements as one script (so CREATE TYPE reaches later statements),
    for the tests that expect success."""
    scripts = []
    for path in sorted((corpus_dir() / "qtt").glob("*.json")):
        for test in json.loads(path.read_text())["tests"]:
            if "expectedException" not in test:
                script = "\n".join(test.get("statements", [])).replace("{FORMAT}", "JSON")
                scripts.append((f"{path.name}: {test['name']}", script))
    return scripts


@pytest.mark.qtt_corpus
def test_qtt_corpus_parses() -> None:
    scripts = _corpus_scripts()
    assert len(scripts) > 1000
    failures = []
    for name, script in scripts:
        try:
            parse(script)
        except ParseError as e:
            failures.append(f"{name}: {e}")
    rate = 1 - len(failures) / len(scripts)
    print(f"QTT parse rate {rate:.2%} over {len(scripts)} tests; failures: {failures}")
    assert rate >= 0.99, "\n".join(failures)


def test_decimal_beyond_spark_precision_is_a_clear_error() -> None:
    from streamsql.errors import ParseError
    from streamsql.sql import parse

    with pytest.raises(ParseError, match=r"DECIMAL\(50, 30\) is not supported"):
        parse("CREATE STREAM s (n DECIMAL(50, 30)) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='JSON');")


def test_alter_adds_value_columns() -> None:
    [statement] = parse("ALTER STREAM s ADD COLUMN c INT, ADD d ARRAY<STRING>;")
    assert isinstance(statement, ast.AlterSource) and (statement.kind, statement.name) == ("STREAM", "S")
    assert statement.columns == [
        t.Column("C", t.Primitive(t.PRIMITIVE_ALIASES["INT"])),
        t.Column("D", t.Array(t.Primitive(t.PRIMITIVE_ALIASES["STRING"])))]
    assert parse_error("ALTER STREAM s DROP COLUMN c;").reason == "mismatched input 'DROP' expecting 'ADD'"


def test_assert_topic_and_schema() -> None:
    [topic] = parse("ASSERT NOT EXISTS TOPIC 'My.Topic' WITH (partitions=3) TIMEOUT 5 SECONDS;")
    assert isinstance(topic, ast.AssertTopic)
    assert (topic.topic, topic.exists, topic.properties, topic.timeout_ms) == ("My.Topic", False, {"PARTITIONS": 3}, 5000)
    [schema] = parse("ASSERT SCHEMA SUBJECT orders_value ID 4;")
    assert isinstance(schema, ast.AssertSchema)
    assert (schema.subject, schema.schema_id, schema.exists, schema.timeout_ms) == ("orders_value", 4, True, None)
    assert parse_error("ASSERT SCHEMA TIMEOUT 1 SECOND;").reason == (
        "ASSERT SCHEMA statements much include a subject name or an id")
    # the test runner's ASSERT VALUES is no statement of the server's grammar
    error = parse_error("ASSERT VALUES foo (id INT) VALUES (123);")
    assert str(error) == "line 1:8: Syntax Error\nSyntax error at or near 'VALUES' at line 1:8"


def test_assert_schema_id_must_be_an_integer() -> None:
    error = parse_error("ASSERT SCHEMA ID 'four';")
    assert error.reason == "ID must be an integer" and (error.line, error.column) == (1, 18)


@pytest.mark.parametrize("text,ends", [
    ("SELECT * FROM s;", True),
    ("CREATE STREAM s (\n a INT)\n WITH (KAFKA_TOPIC='t');  -- done\n", True),
    ("SELECT 1; /* a comment */  ", True),
    (";", True),
    ("CREATE STREAM s (\n a INT)", False),
    ("SELECT 'a;", False),  # inside an unterminated string
    ("SELECT `x;` FROM s", False),
    ("SELECT 1 /* ; */", False),
    ("SELECT 1; /* unterminated", False),
    ("SELECT 1; SELECT 2", False),
    ("-- only a comment;", False),
    ("", False),
    ("SELECT 'it''s' FROM s;", True),
])
def test_one_splitter_tells_where_a_statement_ends(text: str, ends: bool) -> None:
    """``ends_statement`` (the shell's Enter) agrees with ``split_statements`` (scripts): when
    the text ends a statement, a statement typed after it is a statement of its own."""
    from streamsql.sql import ends_statement, split_statements

    assert ends_statement(text) is ends
    if ends:
        assert split_statements(text + "\nSHOW STREAMS;")[-1].splitlines()[-1] == "SHOW STREAMS"
        assert len(split_statements(text + "\nSHOW STREAMS;")) == len(split_statements(text)) + 1
