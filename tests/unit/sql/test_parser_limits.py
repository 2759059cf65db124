"""The parser's bounds (issue #52): time and stack linear in a statement's size, a nesting
limit answered as a ParseError (never a RecursionError), and a maximum statement size.

No test here times anything: "linear" is checked as "does not recurse per term" (5,000 terms
under Python's default recursion limit) and "does not render the tree per node" (the cause of
the quadratic parse time before)."""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest
from sqlglot import exp

from streamsql import errors
from streamsql.runtime.config import PROPERTY_DOCS
from streamsql.sql import ast, dialect, parse, parse_expression, parse_type
from streamsql.sql.parser import MAX_STATEMENT_BYTES, MAX_STATEMENT_BYTES_PROPERTY
from tests.support.recursion import default_recursion_limit

TERMS = 5000




@pytest.mark.parametrize("operator", ["+", "-", "*", "AND", "OR", "||"])
def test_long_operator_chains_parse_without_recursing_per_term(operator: str) -> None:
    chain = f" {operator} ".join(f"x{i % 7}" for i in range(TERMS))
    with default_recursion_limit():
        [statement] = parse(f"SELECT * FROM t WHERE k = 1 AND ({chain}) IS NOT NULL;")
    assert isinstance(statement, ast.SelectStatement) and statement.query.where is not None
    assert len(list(statement.query.where.find_all(exp.Column))) == TERMS + 1


def test_a_chain_is_not_rendered_node_by_node(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cause of the quadratic parse time (1,500 terms ~50 s): checking each node rendered
    its whole subtree as text for a message only a rejected node needs."""
    rendered: list[exp.Expr] = []
    original = dialect._node_text
    monkeypatch.setattr(dialect, "_node_text", lambda node: rendered.append(node) or original(node))
    parse("SELECT * FROM t WHERE " + " + ".join(["x"] * 300) + " > 0;")
    assert rendered == []
    with pytest.raises(errors.ParseError, match="Syntax error at or near 'A.B.C'"):
        parse("SELECT a.b.c FROM t;")  # a rejected node still names its text


DEEP = {
    "60 parentheses": "SELECT * FROM t WHERE " + "(" * 60 + "x" + ")" * 60 + " = 1;",
    "300 NOTs": "SELECT * FROM t WHERE " + "NOT " * 300 + "x;",
    "300 signs": "SELECT " + "- " * 300 + "x FROM t;",
    "nested function calls": "SELECT " + "ABS(" * 100 + "x" + ")" * 100 + " FROM t;",
    "nested CASE": "SELECT " + "CASE WHEN x THEN 1 ELSE " * 100 + "1" + " END" * 100 + " FROM t;",
    "nested subscripts": "SELECT " + "x[" * 100 + "1" + "]" * 100 + " FROM t;",
    "nested ARRAY": "SELECT " + "ARRAY[" * 100 + "1" + "]" * 100 + " FROM t;",
    "nested IN": "SELECT * FROM t WHERE " + "x IN (" * 100 + "1" + ")" * 100 + ";",
    "nested lambdas": "SELECT " + "TRANSFORM(a, x => " * 100 + "x" + ")" * 100 + " FROM t;",
    "nested STRUCT": "SELECT " + "STRUCT(a := " * 100 + "1" + ")" * 100 + " FROM t;",
    "nested types": "CREATE TYPE deep AS " + "ARRAY<" * 300 + "INT" + ">" * 300 + ";",
    "nested CAST type": "SELECT CAST(x AS " + "ARRAY<" * 300 + "INT" + ">" * 300 + ") FROM t;",
    "EXPLAIN EXPLAIN ...": "EXPLAIN " * 300 + "SELECT * FROM t;",
}


@pytest.mark.parametrize("statement", DEEP.values(), ids=DEEP.keys())
def test_deep_nesting_is_a_parse_error_naming_the_limit(statement: str) -> None:
    with default_recursion_limit(), pytest.raises(errors.ParseError) as raised:
        parse(statement)
    limit = dialect.MAX_NESTING_DEPTH
    assert raised.value.reason.startswith(f"Statement nesting is too deep: more than {limit} levels")
    assert f"the limit is {limit}" in raised.value.reason


def test_nesting_up_to_the_limit_parses() -> None:
    depth = dialect.MAX_NESTING_DEPTH - 1  # the innermost operand is a level too
    with default_recursion_limit():
        [statement] = parse("SELECT * FROM t WHERE " + "(" * depth + "x" + ")" * depth + " = 1;")
        [function] = parse("SELECT " + "ABS(" * depth + "x" + ")" * depth + " FROM t;")
    assert isinstance(statement, ast.SelectStatement) and isinstance(function, ast.SelectStatement)


def test_the_error_points_at_where_the_limit_is_passed() -> None:
    with pytest.raises(errors.ParseError) as raised:
        parse("SHOW STREAMS;\nSELECT * FROM t WHERE " + "(" * 60 + "x" + ")" * 60 + " = 1;")
    # the innermost operand is a level too: the parenthesis one past the limit is refused
    column = len("SELECT * FROM t WHERE ") + dialect.MAX_NESTING_DEPTH + 1
    assert (raised.value.line, raised.value.column) == (2, column)
    assert raised.value.statement is not None and raised.value.statement.startswith("SELECT * FROM t")


def test_fragments_have_the_nesting_limit_too() -> None:
    with pytest.raises(errors.ParseError, match="nesting is too deep"):
        parse_expression("(" * 60 + "x" + ")" * 60)
    with pytest.raises(errors.ParseError, match="nesting is too deep"):
        parse_type("ARRAY<" * 60 + "INT" + ">" * 60)


def _at_stack_depth(frames_left: int, call: Callable[[], object]) -> object:
    """``call()`` with only about ``frames_left`` frames left before the recursion limit."""
    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back

    def descend(remaining: int) -> object:
        return call() if remaining <= 0 else descend(remaining - 1)

    return descend(sys.getrecursionlimit() - depth - frames_left)


def test_a_caller_with_little_stack_left_gets_the_parse_error_not_a_recursion_error() -> None:
    statement = "SELECT * FROM t WHERE " + "(" * 30 + "x" + ")" * 30 + " = 1;"
    with default_recursion_limit(), pytest.raises(errors.ParseError, match="nesting is too deep"):
        _at_stack_depth(150, lambda: parse(statement))


# --- statement size ----------------------------------------------------------------------------


def test_a_statement_over_the_size_limit_is_refused_naming_the_limit_and_the_setting() -> None:
    statement = "SELECT * FROM t WHERE x = '" + "a" * 200 + "';"
    with pytest.raises(errors.ParseError) as raised:
        parse("SHOW STREAMS;\n  " + statement, max_statement_bytes=100)
    assert raised.value.reason == ("Statement is too large: more than 100 bytes (the limit is 100 bytes, "
                                   f"setting '{MAX_STATEMENT_BYTES_PROPERTY}')")
    assert (raised.value.line, raised.value.column) == (2, 3)
    assert len(parse(statement, max_statement_bytes=None)) == 1
    assert len(parse(statement, max_statement_bytes=len(statement))) == 1


def test_the_size_counts_utf8_bytes() -> None:
    statement = "SELECT * FROM t WHERE x = '" + "é" * 40 + "'"  # 68 characters, 108 bytes
    assert len(parse(statement, max_statement_bytes=108)) == 1
    with pytest.raises(errors.ParseError, match="more than 107 bytes"):
        parse(statement, max_statement_bytes=107)


def test_variables_cannot_grow_a_statement_past_the_limit() -> None:
    script = "DEFINE v = '" + "x" * 60 + "'; SELECT * FROM t WHERE a = '${v}${v}${v}';"
    with pytest.raises(errors.ParseError, match="Statement is too large: after variable substitution more "
                                                "than 150 bytes"):
        parse(script, max_statement_bytes=150)


def test_the_default_limit_is_256_kib_and_documented_as_the_setting_default() -> None:
    assert MAX_STATEMENT_BYTES == 262_144
    assert PROPERTY_DOCS[MAX_STATEMENT_BYTES_PROPERTY][0] == str(MAX_STATEMENT_BYTES)
    with pytest.raises(errors.ParseError, match="Statement is too large"):
        parse("SELECT * FROM t WHERE x = '" + "a" * MAX_STATEMENT_BYTES + "';")


def test_a_long_chain_can_be_shown() -> None:
    chain = parse_expression(" + ".join(["x"] * TERMS))
    assert dialect.to_ksql(parse_expression("a + b + c")) == "(A + B) + C"
    with default_recursion_limit():
        assert dialect.to_ksql(chain) == " + ".join(["X"] * TERMS)


def test_the_server_setting_is_read_from_the_config_file() -> None:
    from pathlib import Path

    from streamsql.runtime.config import EngineConfig

    assert EngineConfig(data_dir=Path("d")).statement_max_bytes() == MAX_STATEMENT_BYTES
    configured = EngineConfig(data_dir=Path("d"), properties={MAX_STATEMENT_BYTES_PROPERTY: "4096"})
    assert configured.statement_max_bytes() == 4096
    with pytest.raises(errors.ConfigError, match="must be a positive number of bytes, got 'lots'"):
        EngineConfig(data_dir=Path("d"), properties={MAX_STATEMENT_BYTES_PROPERTY: "lots"}).statement_max_bytes()
