"""streamsql: ksqlDB's SQL dialect run as Spark Structured Streaming queries over Kafka.

The package layout follows a statement's path through the engine:

    sql/        statement text -> typed statements (sqlglot dialect for ksqlDB)
    catalog/    streams, tables, types and queries the engine knows, persisted
    planner/    statement + catalog -> analysed plan -> Spark DataFrame
    runtime/    the engine: executes statements, owns Spark and the running queries
    kafka/      the one place that talks to Kafka: broker, admin, source, sink
    formats/    the one place that knows bytes <-> columns (JSON, DELIMITED, KAFKA)
    surfaces/   how people reach the engine: CLI, headless runner, shell; server/ the REST API
    seeds/      the seed functions and pipelines shipped in the package
    api.py      the same engine from Python: ``streamsql.connect()``
"""

from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

if TYPE_CHECKING:
    from streamsql.api import Session


def connect(*args: Any, **kwargs: Any) -> "Session":
    """A started engine for Python code and notebooks (``streamsql.api.connect``); importing
    ``streamsql`` alone starts nothing and imports no Spark."""
    from streamsql.api import connect as _connect

    return _connect(*args, **kwargs)
