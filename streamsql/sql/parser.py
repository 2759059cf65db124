"""ksqlDB statements: script text in, :mod:`streamsql.sql.ast` dataclasses out.

A script is split on ``;`` (outside quotes and comments), each statement gets its ``${name}``
variables substituted, and is then parsed by recursive descent over the ksqlDB dialect's token
stream; expressions and types are delegated to :class:`~streamsql.sql.dialect.KsqlParser`.
Statements are parsed one at a time so that ``DEFINE`` / ``CREATE TYPE`` affect the statements
after them. Errors carry the line and column of the offending token in the whole script.
"""

from __future__ import annotations

import bisect
import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import sqlglot.errors
from sqlglot import exp
from sqlglot.tokens import Token, TokenType

from streamsql import errors
from streamsql import types as t
from streamsql.sql import ast
from streamsql.sql.dialect import (
    KSQL,
    KsqlParser,
    KsqlSyntaxError,
    NestingTooDeep,
    datatype_to_sql_type,
    finish_expression,
    syntax_error_near,
    token_text,
    tokenize,
)

#: Milliseconds per ksqlDB ``windowUnit`` (singular and plural spellings).
_UNIT_MS: dict[str, int] = {
    unit + suffix: ms
    for unit, ms in (
        ("MILLISECOND", 1), ("SECOND", 1000), ("MINUTE", 60_000), ("HOUR", 3_600_000), ("DAY", 86_400_000)
    )
    for suffix in ("", "S")
}

#: Words that end a FROM/JOIN source, so they are never taken as its alias.
_CLAUSE_WORDS = frozenset(
    "JOIN INNER LEFT RIGHT FULL OUTER WITHIN ON WINDOW WHERE GROUP PARTITION HAVING EMIT LIMIT".split()
)
_SHOW_TARGETS = ("STREAMS", "TABLES", "TOPICS", "QUERIES", "PROPERTIES", "FUNCTIONS", "TYPES", "VARIABLES",
                 "CONNECTORS")
_SHOW_EXTENDED = frozenset({"STREAMS", "TABLES", "TOPICS", "QUERIES"})
_VARIABLE_RE = re.compile(r"\$(\$?)\{([A-Za-z_][A-Za-z0-9_]*)\}")

#: Default of the largest statement :func:`parse` accepts, in UTF-8 bytes (256 KiB): parsing
#: takes time linear in a statement's size, but the densest text (``x+x+x...``, a term per two
#: bytes) costs about 20 s per MiB on this project's 2-core machine, so an untrusted client's
#: statement is bounded to a few seconds. ksqlDB's own query-validation statements are under
#: 1 KB. The server's setting ``streamsql.statement.max.bytes`` (runtime/config.py) overrides it.
MAX_STATEMENT_BYTES = 262_144
#: the setting that names the limit in its error message
MAX_STATEMENT_BYTES_PROPERTY = "streamsql.statement.max.bytes"


# --- public API --------------------------------------------------------------------------------


def parse(
    text: str,
    variables: Mapping[str, str] | None = None,
    *,
    custom_types: Mapping[str, t.SqlType] | None = None,
    max_statement_bytes: int | None = MAX_STATEMENT_BYTES,
) -> list[ast.Statement]:
    """Parse a script of ``;``-separated statements (a missing final ``;`` is accepted).

    ``variables`` seed ``${name}`` substitution (names case-insensitive); ``custom_types`` (upper-
    cased names) resolve type names from earlier ``CREATE TYPE`` statements. DEFINE/UNDEFINE and
    CREATE/DROP TYPE inside the script apply to the statements after them; the arguments
    themselves are never modified.

    Limits (each a ParseError naming it): a statement longer than ``max_statement_bytes`` (UTF-8,
    before and after variable substitution; None: no limit, e.g. to replay statements accepted
    before), and expressions nested deeper than ``dialect.MAX_NESTING_DEPTH``. Time and stack are
    linear in the statement's size otherwise: operator chains are parsed in a loop.
    """
    script = _Script(text)
    session = _Session(
        {name.upper(): value for name, value in (variables or {}).items()}, dict(custom_types or {})
    )
    statements = []
    for chunk in script.chunks():
        statement = _parse_chunk(script, chunk, session, max_statement_bytes)
        if statement is not None:
            session.apply(statement)
            statements.append(statement)
    return statements


def parse_expression(text: str) -> exp.Expr:
    """One expression (``a + 1``, ``CAST(x AS INT)``, ``s->f``) under the ast.py conventions."""
    return _parse_fragment(text, lambda p: p.parse_expr())


def parse_type(text: str, custom_types: Mapping[str, t.SqlType] | None = None) -> t.SqlType:
    """Type text such as ``STRUCT<A INT, `b` ARRAY<STRING>>`` (as the catalog stores types)."""
    return _parse_fragment(text, lambda p: p.parse_sql_type(), custom_types)


def to_sql_type(datatype: exp.DataType) -> t.SqlType:
    """The :mod:`streamsql.types` type of a sqlglot DataType, e.g. a ``CAST`` target."""
    try:
        return datatype_to_sql_type(datatype)
    except ValueError as e:
        raise errors.ParseError(str(e), 1, 1, datatype.sql()) from None


def split_statements(text: str) -> list[str]:
    """The script's statements as written (without their ``;``), split on ``;`` outside quotes
    and comments; nothing is parsed or substituted. For clients that send statements elsewhere
    to be parsed (the shell against a server)."""
    out = [chunk.text.strip() for chunk in _Script(text).chunks()]
    return [s for s in out if s and tokenize(s)]


def ends_statement(text: str) -> bool:
    """Whether ``text`` ends with a statement's ``;`` — outside strings, quoted identifiers and
    comments, with only comments after it — as :func:`split_statements` and :func:`parse`
    split scripts (the shell runs its input on Enter when it does). Unterminated quotes and
    comments do not end a statement."""
    try:
        chunks = _Script(text).chunks()
    except errors.ParseError:
        return False
    if not chunks:
        return False
    if chunks[-1].end < len(text):  # the last chunk ends at a ';', then whitespace
        return True
    try:  # text after the last ';': comments only?
        return len(chunks) > 1 and not tokenize(chunks[-1].text)
    except sqlglot.errors.SqlglotError:
        return False


def substitute_variables(text: str, variables: Mapping[str, str]) -> str:
    """``text`` with ``${name}`` replaced by its value (names case-insensitive), as :func:`parse`
    does before parsing; ``$${name}`` stays a literal ``${name}``."""
    return _substitute(text, {name.upper(): value for name, value in variables.items()}).text


# --- script, chunks, variables -----------------------------------------------------------------


@dataclass(frozen=True)
class _Chunk:
    """One statement's raw text: ``start`` is its offset in the script, ``end`` the offset of
    its ``;`` (or the end of the script)."""

    start: int
    end: int
    text: str


class _Script:
    """The whole script: splits it into statements and turns offsets into line/column."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._line_starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]

    def position(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self._line_starts, offset)
        return line, offset - self._line_starts[line - 1] + 1

    def error(self, reason: str, offset: int, statement: str | None = None) -> errors.ParseError:
        line, column = self.position(offset)
        return errors.ParseError(reason, line, column, statement)

    def chunks(self) -> list[_Chunk]:
        """Split on ``;`` outside strings, quoted identifiers and comments. Unterminated quotes
        and comments are reported here, where their start is still known."""
        text, chunks, start, i = self.text, [], 0, 0
        while i < len(text):
            char, pair = text[i], text[i : i + 2]
            if char in "'`\"":
                i = self._skip_quoted(i, char)
            elif pair == "--":
                newline = text.find("\n", i)
                i = len(text) if newline < 0 else newline + 1
            elif pair == "/*":
                close = text.find("*/", i + 2)
                if close < 0:
                    raise self.error("Syntax error at or near '/*': unterminated comment", i)
                i = close + 2
            elif char == ";":
                chunks.append(_Chunk(start, i, text[start:i]))
                start = i = i + 1
            else:
                i += 1
        if text[start:].strip():
            chunks.append(_Chunk(start, len(text), text[start:]))
        return chunks

    def _skip_quoted(self, i: int, quote: str) -> int:
        """Offset just past the quoted text opening at ``i`` (a doubled quote escapes itself)."""
        j = i + 1
        while True:
            close = self.text.find(quote, j)
            if close < 0:
                what = "string" if quote == "'" else "quoted identifier"
                raise self.error(f"Syntax error at or near '{quote}': unterminated {what}", i)
            if self.text[close + 1 : close + 2] != quote:
                return close + 1
            j = close + 2


@dataclass
class _Session:
    """What earlier statements of the script define for later ones."""

    variables: dict[str, str]
    custom_types: dict[str, t.SqlType]

    def apply(self, statement: ast.Statement) -> None:
        if isinstance(statement, ast.DefineVariable):
            self.variables[statement.name.upper()] = statement.value
        elif isinstance(statement, ast.UndefineVariable):
            self.variables.pop(statement.name.upper(), None)
        elif isinstance(statement, ast.CreateType):
            if not (statement.if_not_exists and statement.name in self.custom_types):
                self.custom_types[statement.name] = statement.type
        elif isinstance(statement, ast.DropType):
            self.custom_types.pop(statement.name, None)


@dataclass(frozen=True)
class _Substituted:
    """Statement text after ``${name}`` substitution, with the edits that map its offsets back
    to the original text: ``(original_start, original_end, new_length)`` in order."""

    text: str
    edits: tuple[tuple[int, int, int], ...]

    def original_offset(self, offset: int) -> int:
        shift = 0
        for start, end, new_length in self.edits:
            new_start = start + shift
            if offset < new_start:
                break
            if offset < new_start + new_length:
                return start  # inside a substituted value: point at its ``${``
            shift += new_length - (end - start)
        return offset - shift


def _substitute(text: str, variables: Mapping[str, str]) -> _Substituted:
    """Replace ``${name}`` by its value (case-insensitive) and ``$${x}`` by ``${x}``. Unknown
    names stay as written, as in ksqlDB (then usually failing to parse)."""
    if "$" not in text:
        return _Substituted(text, ())
    parts, edits, last = [], [], 0
    for match in _VARIABLE_RE.finditer(text):
        escaped, name = match.group(1), match.group(2)
        if escaped:
            value = match.group(0)[1:]
        elif name.upper() in variables:
            value = variables[name.upper()]
        else:
            continue
        parts.append(text[last : match.start()] + value)
        edits.append((match.start(), match.end(), len(value)))
        last = match.end()
    parts.append(text[last:])
    return _Substituted("".join(parts), tuple(edits))


def _check_size(script: _Script, chunk: _Chunk, text: str, limit: int | None, substituted: bool) -> None:
    """Refuse a statement whose ``text`` is longer than ``limit`` UTF-8 bytes, before anything
    else reads it (the tokenizer, the parser)."""
    if limit is None or len(text) * 4 <= limit:  # a character is at most 4 bytes
        return
    size = len(text) if len(text) > limit else len(text.encode("utf-8", "surrogatepass"))
    if size <= limit:
        return
    what = "after variable substitution " if substituted else ""
    reason = (f"Statement is too large: {what}more than {limit} bytes (the limit is {limit} bytes, "
              f"setting '{MAX_STATEMENT_BYTES_PROPERTY}')")
    raise script.error(reason, chunk.start + len(chunk.text) - len(chunk.text.lstrip()))


def _parse_chunk(
    script: _Script, chunk: _Chunk, session: _Session, max_statement_bytes: int | None = MAX_STATEMENT_BYTES
) -> ast.Statement | None:
    """Parse one statement; None for a chunk holding only whitespace and comments."""
    _check_size(script, chunk, chunk.text, max_statement_bytes, substituted=False)
    source = _substitute(chunk.text, session.variables)
    if source.edits:
        _check_size(script, chunk, source.text, max_statement_bytes, substituted=True)

    def script_offset(offset: int) -> int:
        return chunk.start + source.original_offset(offset)

    try:
        tokens = tokenize(source.text)
    except sqlglot.errors.TokenError:
        reason = "Syntax error: cannot read this statement"
        raise script.error(reason, chunk.start, chunk.text.strip()) from None
    if not tokens:
        return None

    def locate(offset: int) -> tuple[int, int]:
        return script.position(script_offset(offset))

    parser = _StatementParser(source.text, tokens, session.custom_types, locate)
    try:
        return parser.statement()
    except (NestingTooDeep, RecursionError) as e:
        # RecursionError: the limit was not reached but the caller's stack was already deep
        nesting = e if isinstance(e, NestingTooDeep) else NestingTooDeep(parser.max_nesting_depth, None)
        offset = script_offset(nesting.token.start) if nesting.token else chunk.start
        raise script.error(nesting.reason, offset, source.text[tokens[0].start : tokens[-1].end + 1]) from None
    except KsqlSyntaxError as e:
        statement_text = source.text[tokens[0].start : tokens[-1].end + 1]
        undefined = _undefined_variable(source.text, tokens)
        if undefined:
            reason, offset = undefined[0], script_offset(undefined[1])
        else:
            reason, offset = e.reason, script_offset(e.token.start) if e.token else chunk.end
            if e.token is None and script.text[offset : offset + 1] == ";":
                # ksqlDB's parser reads the statement's ';' there, not the end of the script
                reason = reason.replace("'<EOF>'", "';'", 1)
        raise script.error(reason, offset, statement_text) from None


def _undefined_variable(text: str, tokens: list[Token]) -> tuple[str, int] | None:
    """Why a statement that failed to parse did: a ``${name}`` left unsubstituted outside
    string literals (ksqlDB leaves unknown variables in place, which then cannot parse)."""
    for token in tokens:
        match = _VARIABLE_RE.match(text, token.start) if token.text == "$" else None
        if match:
            return f"Variable '{match.group(2)}' is not defined", token.start
    return None


def _parse_fragment(
    text: str, rule: Callable[[_StatementParser], Any], custom_types: Mapping[str, t.SqlType] | None = None
) -> Any:
    """Parse all of ``text`` with one grammar rule (an expression, a type)."""
    script = _Script(text)
    script.chunks()  # reports unterminated quotes and comments
    try:
        tokens = tokenize(text)
    except sqlglot.errors.TokenError:
        raise script.error("Syntax error: cannot read this text", 0, text) from None
    parser = _StatementParser(text, tokens, custom_types or {}, script.position)
    try:
        result = rule(parser)
        parser.expect_end()
    except (KsqlSyntaxError, NestingTooDeep) as e:
        raise script.error(e.reason, e.token.start if e.token else len(text), text) from None
    return result


# --- the statement grammar ---------------------------------------------------------------------


class _StatementParser(KsqlParser):
    """Recursive descent over one statement's tokens (ksqlDB's ``statement`` rule).

    Keywords are matched by text so that ksqlDB's many non-reserved words stay usable as
    identifiers everywhere else; ``locate`` maps an offset in this statement's text to the
    line and column in the script.
    """

    def __init__(
        self,
        sql: str,
        tokens: list[Token],
        custom_types: Mapping[str, t.SqlType],
        locate: Callable[[int], tuple[int, int]],
    ) -> None:
        super().__init__(dialect=KSQL)
        self.sql = sql
        self.custom_types = custom_types
        self._locate = locate
        self._tokens = tokens
        self._tokens_size = len(tokens)
        self._index = -1
        self._advance()

    # --- token matching ---------------------------------------------------------------------

    def _accept(self, *words: str) -> bool:
        """Consume ``words`` if they come next (a multi-word token such as ``GROUP BY`` counts
        as its words). Quoted identifiers and strings never match a keyword."""
        index, pending = self._index, list(words)
        while pending and self._curr and self._curr.token_type not in self.TEXT_MATCH_EXCLUDED_TOKENS:
            parts = self._curr.text.upper().split()
            if parts != pending[: len(parts)]:
                break
            pending = pending[len(parts) :]
            self._advance()
        if pending:
            self._retreat(index)
            return False
        return True

    def _expect(self, *words: str) -> None:
        if not self._accept(*words):
            raise self._mismatch(" ".join(f"'{w}'" for w in words))

    def _expect_one_of(self, *words: str) -> str:
        for word in words:
            if self._accept(word):
                return word
        raise self._mismatch("{" + ", ".join(f"'{w}'" for w in words) + "}")

    def _mismatch(self, expected: str) -> KsqlSyntaxError:
        token = self._curr or None
        return KsqlSyntaxError(f"mismatched input '{token_text(token)}' expecting {expected}", token)

    def _at_word(self, *words: str) -> bool:
        """Whether ``words`` come next, without consuming them."""
        index = self._index
        found = self._accept(*words)
        self._retreat(index)
        return found

    def expect_end(self) -> None:
        if self._curr:
            raise self._mismatch("';'")

    def _string(self) -> str:
        return self._expect_type(TokenType.STRING, "STRING").text

    def _name_as_written(self) -> str:
        """A topic or query id: identifier or string, case kept (lookups are case-insensitive)."""
        if self._curr.token_type == TokenType.STRING or (self._curr and self._is_word(self._curr)):
            self._advance()
            return self._prev.text
        raise syntax_error_near(self._curr or None)

    # --- statements ---------------------------------------------------------------------------

    def statement(self) -> ast.Statement:
        """The statement filling all tokens, with its text and position set."""
        statement = self._statement()
        self.expect_end()
        _mark_column_positions(statement, self._locate)
        return statement

    def _statement(self) -> ast.Statement:
        first = self._curr
        handler = self._STATEMENTS.get(first.text.upper()) if self._is_word(first) else None
        if handler is None or first.token_type == TokenType.IDENTIFIER:
            if self._is_word(first) and first.text.upper() not in errors.KSQL_COMMANDS:
                raise KsqlSyntaxError(errors.unknown_statement(first.text), first)
            raise syntax_error_near(first)
        if first.text.upper() != "SELECT":
            self._advance()
        statement = handler(self)
        statement.text = self.sql[first.start : self._prev.end + 1]
        statement.line, statement.column = self._locate(first.start)
        return statement

    def _create(self) -> ast.Statement:
        or_replace = self._accept("OR", "REPLACE")
        if not or_replace and self._accept("TYPE"):
            return self._create_type()
        if not or_replace and (self._at_word("SOURCE", "CONNECTOR") or self._at_word("SINK", "CONNECTOR")):
            return self._create_connector()
        is_source = self._accept("SOURCE")
        kind = self._expect_one_of("STREAM", "TABLE")
        if_not_exists = self._accept("IF", "NOT", "EXISTS")
        name = self.expect_identifier()
        columns = self._column_defs(kind) if self._curr.token_type == TokenType.L_PAREN else []
        properties = self._with_properties()
        if columns or is_source or not self._at_word("AS"):
            return ast.CreateSource(
                kind, name, columns, properties,
                or_replace=or_replace, if_not_exists=if_not_exists, is_source=is_source,
            )  # fmt: skip
        self._expect("AS")
        return ast.CreateAsSelect(
            kind, name, properties, self._query(), or_replace=or_replace, if_not_exists=if_not_exists
        )

    def _create_type(self) -> ast.CreateType:
        if_not_exists = self._accept("IF", "NOT", "EXISTS")
        name = self.expect_identifier()
        self._expect("AS")
        return ast.CreateType(name, self.parse_sql_type(), if_not_exists=if_not_exists)

    def _create_connector(self) -> ast.CreateConnector:
        kind = self._expect_one_of("SOURCE", "SINK")
        self._expect("CONNECTOR")
        if_not_exists = self._accept("IF", "NOT", "EXISTS")
        name = self.expect_identifier()
        self._expect("WITH")
        self._expect_type(TokenType.L_PAREN, "'('")
        config = dict(self._csv(self._connector_property))
        self._expect_type(TokenType.R_PAREN, "')'")
        return ast.CreateConnector(kind, name, config, if_not_exists=if_not_exists)

    def _connector_property(self) -> tuple[str, str]:
        """``'key' = value``: Connect's keys are case-sensitive, so the key stays as written."""
        key = self._string() if self._curr.token_type == TokenType.STRING else self._name_as_written()
        self._expect_type(TokenType.EQ, "'='")
        value = self._literal_value()
        return key, str(value).lower() if isinstance(value, bool) else str(value)

    def _insert(self) -> ast.Statement:
        self._expect("INTO")
        target_token = self._curr
        target = self.expect_identifier()
        columns = None
        if self._match(TokenType.L_PAREN):
            columns = self._csv(self.expect_identifier)
            self._expect_type(TokenType.R_PAREN, "')'")
            self._expect("VALUES")
        elif not self._accept("VALUES"):
            properties = self._with_properties()
            return ast.InsertInto(target, self._query(), properties,
                                  target_position=self._locate(target_token.start))
        self._expect_type(TokenType.L_PAREN, "'('")
        values = self._csv(self.parse_expr)
        self._expect_type(TokenType.R_PAREN, "')'")
        return ast.InsertValues(target, columns, values)

    def _select(self) -> ast.SelectStatement:
        return ast.SelectStatement(self._query())

    def _drop(self) -> ast.Statement:
        if self._accept("TYPE"):
            if_exists = self._accept("IF", "EXISTS")
            return ast.DropType(self.expect_identifier(), if_exists=if_exists)
        if self._accept("CONNECTOR"):
            if_exists = self._accept("IF", "EXISTS")
            return ast.DropConnector(self.expect_identifier(), if_exists=if_exists)
        kind = self._expect_one_of("STREAM", "TABLE")
        if_exists = self._accept("IF", "EXISTS")
        name = self.expect_identifier()
        return ast.DropSource(kind, name, if_exists=if_exists, delete_topic=self._accept("DELETE", "TOPIC"))

    def _alter(self) -> ast.AlterSource:
        kind = self._expect_one_of("STREAM", "TABLE")
        name = self.expect_identifier()

        def add_column() -> t.Column:
            self._expect("ADD")
            self._accept("COLUMN")
            column = self.expect_identifier()
            return t.Column(column, self.parse_sql_type(), "value")

        return ast.AlterSource(kind, name, self._csv(add_column))

    def _assert(self) -> ast.Statement:
        exists = not self._accept("NOT", "EXISTS")
        if self._accept("TOPIC"):
            topic = self._name_as_written()
            properties = self._with_properties()
            return ast.AssertTopic(topic, exists, properties, self._timeout())
        if self._accept("SCHEMA"):
            subject = self._name_as_written() if self._accept("SUBJECT") else None
            schema_id = None
            if self._accept("ID"):
                value = self._literal_value()
                if not isinstance(value, int) or isinstance(value, bool):
                    raise KsqlSyntaxError("ID must be an integer", self._prev)
                schema_id = value
            if subject is None and schema_id is None:
                raise KsqlSyntaxError("ASSERT SCHEMA statements much include a subject name or an id", self._prev)
            return ast.AssertSchema(subject, schema_id, exists, self._timeout())
        raise syntax_error_near(self._curr or None)  # ksqlDB's grammar: no alternative fits here

    def _timeout(self) -> int | None:
        return self._duration() if self._accept("TIMEOUT") else None

    def _show(self) -> ast.Show:
        if self._accept("ALL"):
            self._expect("TOPICS")
            return ast.Show("TOPICS", extended=self._accept("EXTENDED"), all_topics=True)
        if self._at_word("SOURCE", "CONNECTORS") or self._at_word("SINK", "CONNECTORS"):
            connector_kind = self._expect_one_of("SOURCE", "SINK")
            self._expect("CONNECTORS")
            return ast.Show("CONNECTORS", connector_kind=connector_kind)
        what = self._expect_one_of(*_SHOW_TARGETS)
        return ast.Show(what, extended=what in _SHOW_EXTENDED and self._accept("EXTENDED"))

    def _describe(self) -> ast.Describe:
        if self._accept("FUNCTION"):
            return ast.Describe(self.expect_identifier(), function=True)
        if self._at_word("CONNECTOR") and self._next:
            self._advance()
            return ast.Describe(self.expect_identifier(), connector=True)
        for listing in ("STREAMS", "TABLES"):
            if self._accept(listing):
                if not self._curr or self._at_word("EXTENDED"):
                    return ast.Describe(None, extended=self._accept("EXTENDED"), listing=listing)
                self._retreat(self._index - 1)
        legacy_extended = self._accept("EXTENDED") if self._next else False
        name = self.expect_identifier()
        return ast.Describe(name, extended=legacy_extended or self._accept("EXTENDED"))

    def _print(self) -> ast.Print:
        topic = self._name_as_written()
        from_beginning = self._accept("FROM", "BEGINNING")
        interval = self._expect_int() if self._accept("INTERVAL") or self._accept("SAMPLE") else None
        limit = self._expect_int() if self._accept("LIMIT") else None
        return ast.Print(topic, from_beginning=from_beginning, interval=interval, limit=limit)

    def _terminate(self) -> ast.Terminate:
        return ast.Terminate(None if self._accept("ALL") else self._name_as_written())

    def _pause(self) -> ast.PauseQuery:
        return ast.PauseQuery(None if self._accept("ALL") else self._name_as_written())

    def _resume(self) -> ast.ResumeQuery:
        return ast.ResumeQuery(None if self._accept("ALL") else self._name_as_written())

    def _set(self) -> ast.SetProperty:
        name = self._string()
        self._expect_type(TokenType.EQ, "'='")
        return ast.SetProperty(name, self._string())

    def _unset(self) -> ast.UnsetProperty:
        return ast.UnsetProperty(self._string())

    def _define(self) -> ast.DefineVariable:
        name = self.expect_identifier()
        self._expect_type(TokenType.EQ, "'='")
        return ast.DefineVariable(name, self._string())

    def _undefine(self) -> ast.UndefineVariable:
        return ast.UndefineVariable(self.expect_identifier())

    def _explain(self) -> ast.Explain:
        if self._curr and self._is_word(self._curr) and not self._next:
            return ast.Explain(query_id=self._name_as_written())
        with self.nested():  # EXPLAIN EXPLAIN ... nests statements
            return ast.Explain(statement=self._statement())

    _STATEMENTS: dict[str, Callable[[_StatementParser], ast.Statement]] = {
        "CREATE": _create,
        "INSERT": _insert,
        "SELECT": _select,
        "DROP": _drop,
        "ALTER": _alter,
        "ASSERT": _assert,
        "PAUSE": _pause,
        "RESUME": _resume,
        "SHOW": _show,
        "LIST": _show,
        "DESCRIBE": _describe,
        "PRINT": _print,
        "TERMINATE": _terminate,
        "SET": _set,
        "UNSET": _unset,
        "DEFINE": _define,
        "UNDEFINE": _undefine,
        "EXPLAIN": _explain,
    }

    # --- DDL pieces -------------------------------------------------------------------------

    def _column_defs(self, kind: str) -> list[t.Column]:
        self._expect_type(TokenType.L_PAREN, "'('")
        columns = self._csv(lambda: self._column_def(kind))
        self._expect_type(TokenType.R_PAREN, "{',', ')'}")
        return columns

    def _column_def(self, kind: str) -> t.Column:
        """``name type [KEY | PRIMARY KEY | HEADERS | HEADER('k')]``; ksqlDB's parser already
        rejects KEY on tables and PRIMARY KEY on streams, with these messages."""
        name_token = self._curr
        name = self.expect_identifier()
        sql_type = self.parse_sql_type()
        if self._accept("PRIMARY", "KEY"):
            if kind == "STREAM":
                reason = f"Column `{name}` is a 'PRIMARY KEY' column: please use 'KEY' for streams."
                raise KsqlSyntaxError(reason, name_token)
            return t.Column(name, sql_type, "key")
        if self._accept("KEY"):
            if kind == "TABLE":
                reason = f"Column `{name}` is a 'KEY' column: please use 'PRIMARY KEY' for tables."
                raise KsqlSyntaxError(reason, name_token)
            return t.Column(name, sql_type, "key")
        if self._accept("HEADERS"):
            return t.Column(name, sql_type, "headers")
        if self._accept("HEADER"):
            self._expect_type(TokenType.L_PAREN, "'('")
            header_key = self._string()
            self._expect_type(TokenType.R_PAREN, "')'")
            return t.Column(name, sql_type, "header", header_key)
        return t.Column(name, sql_type)

    def _with_properties(self) -> dict[str, Any]:
        """``WITH (key = literal, ...)``: keys upper-cased, values as Python literals."""
        if not self._accept("WITH"):
            return {}
        self._expect_type(TokenType.L_PAREN, "'('")
        properties = dict(self._csv(self._property))
        self._expect_type(TokenType.R_PAREN, "')'")
        return properties

    def _property(self) -> tuple[str, Any]:
        key = self._string() if self._curr.token_type == TokenType.STRING else self.expect_identifier()
        self._expect_type(TokenType.EQ, "'='")
        return key.upper(), self._literal_value()

    def _literal_value(self) -> Any:
        token = self._curr
        if self._match(TokenType.STRING):
            return token.text
        if self._accept("TRUE") or self._accept("FALSE"):
            return token.text.upper() == "TRUE"
        negative = self._match(TokenType.DASH)
        number = self._expect_type(TokenType.NUMBER, "a literal")
        value: int | float = int(number.text) if number.text.isdigit() else float(number.text)
        return -value if negative else value

    # --- queries ------------------------------------------------------------------------------

    def _query(self) -> ast.Query:
        """ksqlDB's query: the clauses in their fixed order."""
        self._expect("SELECT")
        select = self._csv(self._select_item)
        self._expect("FROM")
        query = ast.Query(select, self._source_ref())
        while join := self._join():
            query.joins.append(join)
        if self._accept("WINDOW"):
            query.window = self._window()
        if self._accept("WHERE"):
            query.where = self.parse_expr()
        if self._accept("GROUP", "BY"):
            query.group_by = self._grouping()
        if self._accept("PARTITION", "BY"):
            start = self._curr
            query.partition_by = self._grouping()
            if not query.partition_by:  # PARTITION BY ()
                raise KsqlSyntaxError("PARTITION BY requires at least one expression", start)
        if self._accept("HAVING"):
            query.having = self.parse_expr()
        if self._accept("EMIT"):
            query.emit = self._expect_one_of("CHANGES", "FINAL")
        if self._accept("LIMIT"):
            query.limit = self._expect_int()
        return query

    def _select_item(self) -> ast.SelectItem:
        if self._match(TokenType.STAR):
            return ast.SelectItem(None, star=True)
        expression = self.parse_expr(allow_struct_star=True)
        if isinstance(expression, exp.Column) and isinstance(expression.this, exp.Star):
            return ast.SelectItem(expression, star=True)
        if isinstance(expression, exp.Dot) and isinstance(expression.expression, exp.Star):
            return ast.SelectItem(expression.this, star=True)
        alias = None
        if self._accept("AS"):
            alias = self.expect_identifier()
        elif self._curr and self._is_word(self._curr) and not self._at_word("FROM"):
            alias = self.expect_identifier()
        return ast.SelectItem(expression, alias)

    def _source_ref(self) -> ast.SourceRef:
        name = self.expect_identifier()
        if self._accept("AS"):
            return ast.SourceRef(name, self.expect_identifier())
        token = self._curr
        if token and self._is_word(token):
            quoted = token.token_type == TokenType.IDENTIFIER
            if quoted or token.text.upper() not in _CLAUSE_WORDS:
                return ast.SourceRef(name, self.expect_identifier())
        return ast.SourceRef(name)

    def _join(self) -> ast.JoinClause | None:
        kind = self._join_kind()
        if kind is None:
            return None
        right = self._source_ref()
        before = after = grace = None
        if self._accept("WITHIN"):
            if self._match(TokenType.L_PAREN):
                before = self._duration()
                self._expect_type(TokenType.COMMA, "','")
                after = self._duration()
                self._expect_type(TokenType.R_PAREN, "')'")
            else:
                before = after = self._duration()
            if self._accept("GRACE", "PERIOD"):
                grace = self._duration()
        self._expect("ON")
        return ast.JoinClause(kind, right, self.parse_expr(), before, after, grace)

    def _join_kind(self) -> str | None:
        if self._accept("JOIN"):
            return "INNER"
        for kind in ("INNER", "LEFT", "RIGHT", "FULL"):
            if self._accept(kind):
                if kind != "INNER":
                    self._accept("OUTER")
                self._expect("JOIN")
                return kind
        return None

    def _window(self) -> ast.WindowSpec:
        """``TUMBLING (SIZE d, ...)``, ``HOPPING (SIZE d, ADVANCE BY d, ...)``, ``SESSION (d, ...)``
        with optional ``RETENTION d`` / ``GRACE PERIOD d``; a legacy window name may precede."""
        if self._curr and self._next and self._next.text.upper() in ("TUMBLING", "HOPPING", "SESSION"):
            self.expect_identifier()
        kind = self._expect_one_of("TUMBLING", "HOPPING", "SESSION")
        self._expect_type(TokenType.L_PAREN, "'('")
        if kind != "SESSION":
            self._expect("SIZE")
        window = ast.WindowSpec(kind, self._duration())
        if kind == "HOPPING":
            self._expect_type(TokenType.COMMA, "','")
            self._expect("ADVANCE", "BY")
            window.advance_ms = self._duration()
        while self._match(TokenType.COMMA):
            if self._accept("RETENTION"):
                window.retention_ms = self._duration()
            else:
                self._expect("GRACE", "PERIOD")
                window.grace_ms = self._duration()
        self._expect_type(TokenType.R_PAREN, "')'")
        return window

    def _duration(self) -> int:
        """``n unit`` in milliseconds."""
        amount = self._expect_int()
        unit = self._curr.text.upper() if self._curr.token_type != TokenType.STRING else ""
        if unit not in _UNIT_MS:
            raise self._mismatch("a time unit (MILLISECONDS, SECONDS, MINUTES, HOURS, DAYS)")
        self._advance()
        return amount * _UNIT_MS[unit]

    def _grouping(self) -> list[exp.Expr]:
        """``e1, e2`` or ``(e1, e2)``; ksqlDB allows value expressions only (no AND/OR or
        comparisons), which is sqlglot's ``bitwise`` level."""
        first = self.parse_expr(self._parse_bitwise, keep_tuple=True)
        if isinstance(first, exp.Tuple):
            return [finish_expression(e, fallback=self._prev) for e in first.expressions]
        return [first, *self._csv(lambda: self.parse_expr(self._parse_bitwise), leading_comma=True)]

    # --- expressions ----------------------------------------------------------------------------

    def parse_expr(
        self,
        rule: Callable[[], exp.Expr | None] | None = None,
        allow_struct_star: bool = False,
        keep_tuple: bool = False,
    ) -> exp.Expr:
        """One expression, finished to the ast.py conventions."""
        start = self._curr or None
        tree = (rule or self._parse_disjunction)()
        if tree is None:
            raise syntax_error_near(self._curr or None)
        if keep_tuple and isinstance(tree, exp.Tuple):
            return tree
        return finish_expression(tree, allow_struct_star, fallback=start, sql=self.sql)

    def _csv(self, item: Callable[[], Any], leading_comma: bool = False) -> list[Any]:
        """Items separated by commas (``leading_comma``: zero or more, each after a comma)."""
        items = [] if leading_comma else [item()]
        while self._match(TokenType.COMMA):
            items.append(item())
        return items


def _mark_column_positions(node: object, locate: Callable[[int], tuple[int, int]]) -> None:
    """Record on each column reference and each call of a function no built-in class holds (a
    user's function, or a typo'd name) the script line and column it starts at
    (``meta["position"]``), for the analysis errors that name where it is (ksqlDB's
    ``Line: 3, Col: 38:`` prefix; errors.located)."""
    if isinstance(node, exp.Expr):
        for column in node.find_all(exp.Column):
            starts = [n.meta["start"] for n in column.walk() if "start" in n.meta]
            if starts:
                column.meta["position"] = locate(min(starts))
        for call in node.find_all(exp.Anonymous):
            if "start" in call.meta:
                call.meta["position"] = locate(call.meta["start"])
    elif isinstance(node, list | tuple):
        for item in node:
            _mark_column_positions(item, locate)
    elif dataclasses.is_dataclass(node) and not isinstance(node, type):
        for f in dataclasses.fields(node):
            _mark_column_positions(getattr(node, f.name), locate)
