"""Errors users see. Each names what was wrong and where, the way ksqlDB's messages do.

Every error raised for bad user input derives from :class:`StreamsqlError`; surfaces (runner,
shell, server) catch that class, print/return its message and keep running. Anything else
escaping the engine is a bug.
"""

from __future__ import annotations

import re


class StreamsqlError(Exception):
    """Base class. ``statement`` is the offending statement's text, when known."""

    def __init__(self, message: str, statement: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.statement = statement

    def __str__(self) -> str:
        return self.message


class ParseError(StreamsqlError):
    """Malformed statement text. ``line`` and ``column`` are 1-based, as ksqlDB reports them.
    ``reason`` is the parser's own (ANTLR-style) reason; the message renders it as ksqlDB's
    syntax error listener does (:func:`syntax_message`), e.g.
    ``line 1:15: Syntax Error\nSyntax error at or near 'FORM' at line 1:15``."""

    def __init__(self, message: str, line: int, column: int, statement: str | None = None) -> None:
        super().__init__(f"line {line}:{column}: {syntax_message(message, line, column)}", statement)
        self.line = line
        self.column = column
        self.reason = message


#: the statements ksqlDB's grammar starts with, in its order (SyntaxErrorValidator's list)
KSQL_COMMANDS = ("SELECT", "CREATE", "INSERT", "DESCRIBE", "PRINT", "EXPLAIN", "SHOW", "LIST", "TERMINATE",
                 "PAUSE", "RESUME", "DROP", "SET", "DEFINE", "UNDEFINE", "UNSET", "ASSERT", "ALTER")
_NEAR = re.compile(r"Syntax error at or near '(.*)'", re.S)
_EXPECTING = re.compile(r"(?:mismatched|extraneous) input '(.*)' expecting (.*)", re.S)
_OTHER_ANTLR = re.compile(r"missing .+ at '.*'|Unknown statement '.*'\nDid you mean '.*'\?", re.S)


def _edit_distance(a: str, b: str) -> int:
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def unknown_statement(word: str) -> str:
    """The reason for a statement starting with a word that starts no statement, naming the
    nearest command (the first of equally near ones, as ksqlDB)."""
    nearest = min(KSQL_COMMANDS, key=lambda c: _edit_distance(c, word.upper()))
    return f"Unknown statement '{word}'\nDid you mean '{nearest}'?"


def syntax_message(reason: str, line: int, column: int) -> str:
    """ksqlDB's rendering of a syntax error (its ``SyntaxErrorValidator``): ``Syntax Error`` and a
    second line — ``Syntax error at or near 'X' at line L:C`` where no alternative fits,
    ``Expecting {…}`` when at most three tokens would, ksqlDB's missing-bracket hint when the
    statement ended early, ANTLR's own ``missing ')' at ','``. Reasons that are not syntax errors
    (an unknown type, an undefined variable) are returned unchanged."""
    if match := _NEAR.fullmatch(reason):
        return f"Syntax Error\nSyntax error at or near '{match.group(1)}' at line {line}:{column}"
    if match := _EXPECTING.fullmatch(reason):
        if "EOF" in reason:
            return "Syntax Error\nSyntax error at or near \";\"\n'}', ']', or ')' is missing"
        expecting = match.group(2)
        # a long list of alternatives says nothing useful: ksqlDB leaves the line out
        return f"Syntax Error\nExpecting {expecting}" if len(expecting.split(",")) <= 3 else "Syntax Error"
    if _OTHER_ANTLR.fullmatch(reason):
        return f"Syntax Error\n{reason}"
    return reason


def located(node: object) -> str:
    """``Line: 3, Col: 38: `` for a parsed expression whose script position the parser recorded
    (sql/parser.py), as ksqlDB starts the messages about a column it cannot use; else ``""``."""
    position = getattr(node, "meta", {}).get("position")
    return f"Line: {position[0]}, Col: {position[1]}: " if position else ""


#: how ksqlDB words a statement it could not build (DefaultKsqlParser.prepare: the AST builder,
#: which also validates a WITH clause's properties); it throws them as ParseFailedException
PREPARE_FAILED = "Failed to prepare statement: "


class AssertionFailed(StreamsqlError):
    """An ASSERT TOPIC / ASSERT SCHEMA that did not hold within its timeout (the REST API answers
    HTTP 417, error code 41700, as ksqlDB)."""


class AnalysisError(StreamsqlError):
    """A well-formed statement that cannot run: unknown source or column, type mismatch, ..."""


class CatalogError(AnalysisError):
    """A name clash or missing entry in the catalog."""


class KafkaError(StreamsqlError):
    """The Kafka cluster refused or could not do something (missing topic, unreachable broker)."""


class ConfigError(StreamsqlError):
    """A bad property, option or command-line setting."""


class UnsupportedSchemaError(ConfigError):
    """A format cannot hold a source's columns (a type or a number of fields it does not support);
    the engine names the format, the columns and this reason, as ksqlDB's "Key format does not
    support schema" message."""


class DataDirError(StreamsqlError):
    """The data directory cannot be used as asked: another engine holds it, or it holds the
    state of another Kafka cluster. The message names the holder or the cluster and the way out."""


_EXCEPTION_LINE = re.compile(r"^\s*(?:[\w.]+\.)?(\w*(?:Error|Exception)): (.+)$")


def own_message(text: str) -> str:
    """An error's own message, never a Python or JVM trace: Spark wraps the traceback of an
    exception raised in a Python worker (its last ``Type: message`` line is the cause) and a
    failed streaming query's state dump into its messages; Spark's SQLSTATE suffix goes too."""
    if "Traceback (most recent call last)" in text:
        found = [m.group(2) for m in map(_EXCEPTION_LINE.match, text.splitlines()) if m is not None]
        if found:
            text = found[-1]
    if "terminated with exception: " in text:  # Spark's wrapper: keep the cause
        text = text.split("terminated with exception: ", 1)[1]
    for marker in ("\n=== Streaming Query", "\n\tat ", "\nJVM stacktrace:", "Traceback (most recent"):
        text = text.split(marker)[0]
    return re.sub(r"(\s*SQLSTATE: \w+)+\s*$", "", text.strip())


#: how Kafka Streams words any exception a processor raised for a record (StreamTask.process),
#: which ksqlDB reports as the query's error
CAUGHT_IN_PROCESS = "Exception caught in process. "


def query_failure(exc: BaseException) -> str:
    """Why a persistent query stopped, as ksqlDB reports it: an exception raised while the
    query's records were processed (in a Spark Python worker: the sources' decoding, the
    operators, the sink's encoding) is Kafka Streams' ``Exception caught in process.`` with the
    exception's own message; any other failure is Spark's message. Never a trace."""
    text = spark_message(exc)
    if "[PYTHON_EXCEPTION]" in text or "Traceback (most recent call last)" in text:
        return CAUGHT_IN_PROCESS + own_message(text)
    return own_message(text) or text


def spark_message(exc: BaseException) -> str:
    """The useful first line of a Spark/Py4J error, not the JVM stack."""
    text = getattr(exc, "desc", None) or getattr(exc, "message", None) or str(exc)
    text = str(text).strip()
    for marker in ("\n\tat ", "\nJVM stacktrace:", "\n== "):
        if marker in text:
            text = text.split(marker)[0]
    return text.strip()

