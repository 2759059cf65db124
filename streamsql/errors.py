"""Errors users see. Each names what was wrong and where, the way ksqlDB's messages do.

Every error raised for bad user input derives from :class:`StreamsqlError`; surfaces (runner,
shell, server) catch that class, print/return its message and keep running. Anything else
escaping the engine is a bug.
"""

from __future__ import annotations


class StreamsqlError(Exception):
    """Base class. ``statement`` is the offending statement's text, when known."""

    def __init__(self, message: str, statement: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.statement = statement

    def __str__(self) -> str:
        return self.message


class ParseError(StreamsqlError):
    """Malformed statement text. ``line`` and ``column`` are 1-based, as ksqlDB reports them
    (message shape: ``line 1:15: Syntax error at or near 'FORM'``)."""

    def __init__(self, message: str, line: int, column: int, statement: str | None = None) -> None:
        super().__init__(f"line {line}:{column}: {message}", statement)
        self.line = line
        self.column = column
        self.reason = message


def located(node: object) -> str:
    """``Line: 3, Col: 38: `` for a parsed expression whose script position the parser recorded
    (sql/parser.py), as ksqlDB starts the messages about a column it cannot use; else ``""``."""
    position = getattr(node, "meta", {}).get("position")
    return f"Line: {position[0]}, Col: {position[1]}: " if position else ""


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


def spark_message(exc: BaseException) -> str:
    """The useful first line of a Spark/Py4J error, not the JVM stack."""
    text = getattr(exc, "desc", None) or getattr(exc, "message", None) or str(exc)
    text = str(text).strip()
    for marker in ("\n\tat ", "\nJVM stacktrace:", "\n== "):
        if marker in text:
            text = text.split(marker)[0]
    return text.strip()

