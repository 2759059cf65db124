"""streamsql: ksqlDB's SQL dialect run as Spark Structured Streaming queries over Kafka.

The package layout follows a statement's path through the engine:

    sql/        statement text -> typed statements (sqlglot dialect for ksqlDB)
    catalog/    streams, tables, types and queries the engine knows, persisted
    planner/    statement + catalog -> analysed plan -> Spark DataFrame
    runtime/    the engine: executes statements, owns Spark and the running queries
    kafka/      the one place that talks to Kafka: broker, admin, source, sink
    formats/    the one place that knows bytes <-> columns (JSON, DELIMITED, KAFKA)
    surfaces/   how people reach the engine: CLI, headless runner (shell and server later)
"""

__version__ = "0.1.0"
