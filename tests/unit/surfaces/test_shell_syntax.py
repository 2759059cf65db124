"""The shell's pure parts: when Enter runs the input, what Tab offers, how results are laid out."""

from __future__ import annotations

from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from pygments.token import Keyword, Name, String

from streamsql.runtime import results as r
from streamsql.surfaces import console
from streamsql.surfaces.backends import Vocabulary
from streamsql.surfaces.shell import _split_commands
from streamsql.surfaces.shell_syntax import KsqlCompleter, KsqlLexer, is_cli_command, is_complete

VOCAB = Vocabulary(sources={"ORDERS": "STREAM", "ORDER_TOTALS": "TABLE", "USERS": "TABLE"},
                   columns={"ORDERS": ["ID", "AMOUNT", "USER_ID"], "ORDER_TOTALS": ["USER_ID", "TOTAL"],
                            "USERS": ["USER_ID", "NAME"]},
                   queries=["CSAS_BIG_1"], functions=["ABS", "UCASE", "CONCAT"],
                   properties=["auto.offset.reset", "ksql.service.id"], variables=["TOPIC"], topics=["orders"])


def complete(text: str) -> list[str]:
    completer = KsqlCompleter(lambda: VOCAB)
    return [c.text for c in completer.get_completions(Document(text), CompleteEvent(completion_requested=True))]


def test_enter_runs_only_complete_input() -> None:
    """A statement is complete where the SQL splitter ends it (``sql.ends_statement``,
    tests/unit/sql/test_parser.py); shell commands need no ``;``."""
    assert is_complete("SELECT * FROM s;") and not is_complete("SELECT 'a;")
    assert is_complete("") and is_complete("help") and is_complete("EXIT;") and is_complete("output json")
    assert is_complete("run script '/tmp/x.sql'")
    assert not is_complete("help me with")
    assert is_cli_command("quit") and not is_cli_command("SHOW STREAMS")


def test_completion_of_sources_after_from_and_describe() -> None:
    assert complete("SELECT * FROM ORD") == ["ORDERS", "ORDER_TOTALS"]
    assert complete("describe ord") == ["orders", "order_totals"]
    assert complete("DROP TABLE US") == ["USERS"]
    assert "ORDERS" not in complete("CREATE STREAM OR")  # a new name is being written there


def test_completion_of_columns_functions_and_keywords() -> None:
    # columns of the source the statement names come first
    assert complete("SELECT * FROM orders WHERE AM") == ["AMOUNT"]
    assert complete("SELECT US") == ["USER_ID", "USERS"]
    assert complete("SELECT UC") == ["UCASE"]
    assert complete("sel") == ["select"]
    assert complete("SHOW ST") == ["STREAMS"]
    assert complete("TERMINATE CS") == ["CSAS_BIG_1"]


def test_completion_of_properties_and_variables() -> None:
    assert complete("SET 'auto") == ["'auto.offset.reset'"]
    assert complete("SET ") == ["'auto.offset.reset'", "'ksql.service.id'"]
    assert complete("CREATE STREAM s (a INT) WITH (KAFKA_TOPIC='${T") == ["${TOPIC}"]


def test_lexer_marks_keywords_strings_and_names() -> None:
    tokens = [(t, v) for t, v in KsqlLexer().get_tokens("select name from users where id = 'x';") if v.strip()]
    assert (Keyword, "select") in tokens and (String.Single, "'x'") in tokens and (Name, "users") in tokens


def test_tables_are_laid_out_like_the_ksql_cli() -> None:
    text = console.render_entity(r.SourceList("SHOW STREAMS", "STREAMS", [
        r.SourceInfo("RIDERLOCATIONS", "STREAM", "locations", "KAFKA", "JSON", False)]))
    header = " Stream Name    | Kafka Topic | Key Format | Value Format | Windowed "
    assert text.splitlines() == [header, "-" * len(header),
                                 " RIDERLOCATIONS | locations   | KAFKA      | JSON         | false    ",
                                 "-" * len(header)]
    assert console.render_entity(r.CommandStatus("CREATE STREAM", "Stream created")).splitlines() == [
        " Message        ", "----------------", " Stream created ", "----------------"]


def test_streamed_rows_fill_fixed_width_cells_and_wrap() -> None:
    boxes = console.RowBoxes(["ID", "NAME"], terminal_width=24)
    assert boxes.cell_width == 10
    assert boxes.header().splitlines() == ["+----------+----------+", "|ID        |NAME      |",
                                           "+----------+----------+"]
    assert boxes.row(["a", "abcdefghijklm"]).splitlines() == ["|a         |abcdefghij|", "|          |klm       |"]
    assert boxes.row([None, {"k": 1}]) == "|null      |{\"k\":1}   |"


def test_scripts_mix_statements_and_shell_commands() -> None:
    assert _split_commands("SHOW STREAMS;\noutput JSON\nSELECT 1\n  FROM s;\nexit\n") == [
        "SHOW STREAMS;\n", "output JSON", "SELECT 1\n  FROM s;\n", "exit"]
