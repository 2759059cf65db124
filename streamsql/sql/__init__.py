"""ksqlDB's SQL dialect: statement text in, typed statements (``streamsql.sql.ast``) out.

Public API (the rest of the engine uses only these):

    parse(text, variables=None) -> list[ast.Statement]
        Split a script on ``;`` and parse each statement. ``${name}`` variables are substituted
        first. Raises ``errors.ParseError`` with line and column (1-based, in ``text``).
    parse_expression(text) -> sqlglot.exp.Expr
    parse_type(text) -> types.SqlType
    to_sql_type(datatype: sqlglot.exp.DataType) -> types.SqlType
    split_statements(text) -> list[str]                 statement texts, as written
    ends_statement(text) -> bool                        the text ends with a statement's ``;``
    substitute_variables(text, variables) -> str        ``${name}`` substitution alone
"""

from streamsql.sql.parser import (
    ends_statement,
    parse,
    parse_expression,
    parse_type,
    split_statements,
    substitute_variables,
    to_sql_type,
)

__all__ = ["ends_statement", "parse", "parse_expression", "parse_type", "split_statements",
           "substitute_variables", "to_sql_type"]
