"""What the engine knows: streams, tables, custom types and persistent queries.

The catalog is rebuilt, never stored as a snapshot: the durable record is the ordered list of
successful DDL/DML statements (the *command log*, :mod:`streamsql.catalog.commands`), replayed on
start. That is ksqlDB's command-topic design; the file-backed log used by the headless runner and
the Kafka-topic log used by the server are two stores behind the same interface.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from streamsql.errors import CatalogError
from streamsql.formats.schema_registry import SchemaBinding
from streamsql.types import Column, SqlType


@dataclass
class Source:
    """A stream or table registered over a Kafka topic."""

    name: str
    kind: str  # STREAM | TABLE
    columns: list[Column]
    topic: str
    key_format: str
    value_format: str
    partitions: int = 1
    key_delimiter: str = ","
    value_delimiter: str = ","
    wrap_single_value: bool = True
    timestamp_column: str | None = None
    timestamp_format: str | None = None
    is_source: bool = False  # CREATE SOURCE STREAM/TABLE: read-only
    window_type: str | None = None  # windowed key (TUMBLING/HOPPING/SESSION) or None
    window_size_ms: int | None = None
    #: the key format a WITH clause named (FORMAT/KEY_FORMAT) even if the source has no key columns:
    #: a GROUP BY over it writes its new key in that format (ksqlDB)
    declared_key_format: str | None = None
    statement: str = ""
    writer_query: str | None = None  # the CSAS/CTAS query populating it
    #: Schema Registry subjects of the key and value (AVRO, JSON_SR, PROTOBUF formats)
    key_schema: SchemaBinding | None = None
    value_schema: SchemaBinding | None = None
    #: format options from the WITH clause (schema full name, Protobuf null representation)
    key_format_options: dict[str, str] = field(default_factory=dict)
    value_format_options: dict[str, str] = field(default_factory=dict)

    @property
    def key_columns(self) -> list[Column]:
        return [c for c in self.columns if c.role == "key"]

    @property
    def value_columns(self) -> list[Column]:
        return [c for c in self.columns if c.role == "value"]

    @property
    def header_columns(self) -> list[Column]:
        return [c for c in self.columns if c.role in ("headers", "header")]

    def column(self, name: str) -> Column | None:
        for c in self.columns:
            if c.name == name:
                return c
        return None

    @property
    def is_table(self) -> bool:
        return self.kind == "TABLE"


@dataclass
class QueryInfo:
    """A persistent query (CSAS / CTAS / INSERT INTO)."""

    id: str
    statement: str
    sink: str
    sources: list[str]
    kind: str = "PERSISTENT"


@dataclass
class ConnectorInfo:
    """A connector (``CREATE SINK CONNECTOR``): Kafka Connect's configuration as written, and the
    statement that created it (replayed from the command log like a query's)."""

    name: str
    kind: str  # SINK | SOURCE
    class_name: str
    config: dict[str, str]
    statement: str
    topics: list[str]


@dataclass
class Catalog:
    """The engine's names. Statements that change it run one at a time (the engine's command
    lock), while reads (queries, SHOW, DESCRIBE) run beside them without a lock, so every change
    replaces a dictionary instead of mutating it (copy on write): a reader that took
    ``catalog.sources`` iterates a snapshot that no writer changes under it. Change the catalog
    through these methods, never through its dictionaries."""

    sources: dict[str, Source] = field(default_factory=dict)
    queries: dict[str, QueryInfo] = field(default_factory=dict)
    types: dict[str, SqlType] = field(default_factory=dict)
    connectors: dict[str, ConnectorInfo] = field(default_factory=dict)

    def get(self, name: str) -> Source:
        src = self.sources.get(name)
        if src is None:
            raise CatalogError(f"{name} does not exist.")
        return src

    def find(self, name: str) -> Source | None:
        return self.sources.get(name)

    def add(self, source: Source) -> None:
        if source.name in self.sources:
            existing = self.sources[source.name]
            raise CatalogError(
                f"Cannot add {source.kind.lower()} '{source.name}': A {existing.kind.lower()} "
                f"with the same name already exists"
            )
        self.sources = {**self.sources, source.name: source}

    def remove(self, name: str) -> Source:
        source = self.sources[name]
        self.sources = {k: v for k, v in self.sources.items() if k != name}
        return source

    def add_query(self, info: QueryInfo) -> None:
        self.queries = {**self.queries, info.id: info}

    def remove_query(self, query_id: str) -> QueryInfo | None:
        info = self.queries.get(query_id)
        if info is not None:
            self.queries = {k: v for k, v in self.queries.items() if k != query_id}
        return info

    def add_connector(self, info: ConnectorInfo) -> None:
        self.connectors = {**self.connectors, info.name: info}

    def remove_connector(self, name: str) -> ConnectorInfo | None:
        info = self.connectors.get(name)
        if info is not None:
            self.connectors = {k: v for k, v in self.connectors.items() if k != name}
        return info

    def add_type(self, name: str, sql_type: SqlType) -> None:
        self.types = {**self.types, name: sql_type}

    def remove_type(self, name: str) -> None:
        self.types = {k: v for k, v in self.types.items() if k != name}

    def streams(self) -> list[Source]:
        return [s for s in self.sources.values() if s.kind == "STREAM"]

    def tables(self) -> list[Source]:
        return [s for s in self.sources.values() if s.kind == "TABLE"]

    def queries_reading(self, name: str) -> list[QueryInfo]:
        return [q for q in self.queries.values() if name in q.sources]

    def queries_writing(self, name: str) -> list[QueryInfo]:
        return [q for q in self.queries.values() if q.sink == name]

    def source_names(self) -> Iterable[str]:
        return self.sources.keys()
