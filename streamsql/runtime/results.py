"""Typed results of executing a statement.

The engine returns these; the runner, the shell and the REST server only render them (text
tables, JSON entities), so the three surfaces can never disagree about what happened. The names
follow ksqlDB's REST entities (currentStatus, streams, queries, sourceDescription, ...).
"""

from __future__ import annotations

import queue
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Result:
    statement: str


@dataclass
class CommandStatus(Result):
    """A DDL/DML statement succeeded (ksqlDB ``currentStatus``)."""

    message: str
    command_seq: int | None = None
    query_id: str | None = None


@dataclass
class Asserted(Result):
    """An ASSERT TOPIC / ASSERT SCHEMA held (ksqlDB's ``assert_topic`` / ``assert_schema``):
    ``what`` names the resource as ksqlDB's CLI prints it (``Topic t``, ``Schema with subject s``)."""

    kind: str  # TOPIC | SCHEMA
    what: str
    exists: bool
    topic: str | None = None
    subject: str | None = None
    schema_id: int | None = None


@dataclass
class Warning_(Result):
    message: str


@dataclass
class SourceInfo:
    name: str
    kind: str
    topic: str
    key_format: str
    value_format: str
    windowed: bool = False


@dataclass
class SourceList(Result):
    kind: str  # STREAMS | TABLES
    sources: list[SourceInfo]


@dataclass
class QueryDescription:
    id: str
    statement: str
    sink: str
    sources: list[str]
    state: str
    kind: str = "PERSISTENT"
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass
class QueryList(Result):
    queries: list[QueryDescription]


@dataclass
class TopicInfo:
    name: str
    partitions: int
    replicas: int = 1


@dataclass
class TopicList(Result):
    topics: list[TopicInfo]


@dataclass
class FieldInfo:
    name: str
    type: str
    key: bool


@dataclass
class PartitionOffsets:
    partition: int
    log_start: int
    log_end: int
    committed: int

    @property
    def lag(self) -> int:
        return max(0, self.log_end - self.committed)


@dataclass
class OffsetSummary:
    """A query reading a source, as a consumer group of its topic (ksqlDB's ``QueryOffsetSummary``)."""

    group_id: str
    topic: str
    partitions: list[PartitionOffsets]


@dataclass
class SourceDescription(Result):
    source: SourceInfo
    fields: list[FieldInfo]
    partitions: int
    timestamp_column: str | None
    statement_text: str
    read_queries: list[str]
    write_queries: list[str]
    extended: bool = False
    #: DESCRIBE … EXTENDED: the consumer lag of each running query reading the source
    offset_summaries: list[OffsetSummary] = field(default_factory=list)


@dataclass
class Properties(Result):
    """SHOW PROPERTIES, and the name → value listings of SHOW VARIABLES and SHOW TYPES."""

    properties: dict[str, str]
    overridden: dict[str, str]

    @property
    def listing(self) -> str:
        """Which listing this is, from its statement: VARIABLES, TYPES or PROPERTIES (every
        surface shows them differently: the REST entity's type, the text tables' headers)."""
        m = re.match(r"\s*(?:SHOW|LIST)\s+(VARIABLES|TYPES)\b", self.statement, re.IGNORECASE)
        return m.group(1).upper() if m else "PROPERTIES"


@dataclass
class FunctionInfo:
    name: str
    kind: str
    category: str
    description: str = ""
    signatures: list[str] = field(default_factory=list)


@dataclass
class FunctionList(Result):
    functions: list[FunctionInfo]


@dataclass
class FunctionVariant:
    """One signature of a function: ``arguments`` are type names; the last repeats if variadic."""

    arguments: list[str]
    returns: str
    variadic: bool = False


@dataclass
class FunctionDescription(Result):
    """``DESCRIBE FUNCTION name``: the function and every variant it accepts."""

    function: FunctionInfo
    variants: list[FunctionVariant]


@dataclass
class ConnectorSummary:
    """A connector as SHOW CONNECTORS lists it (Connect's states: RUNNING, FAILED, UNASSIGNED)."""

    name: str
    kind: str  # SINK | SOURCE
    class_name: str
    state: str


@dataclass
class ConnectorCreated(Result):
    """CREATE … CONNECTOR succeeded (ksqlDB ``connector_info``)."""

    name: str
    kind: str
    config: dict[str, str]


@dataclass
class ConnectorDropped(Result):
    name: str


@dataclass
class ConnectorList(Result):
    connectors: list[ConnectorSummary]


@dataclass
class ConnectorDescription(Result):
    """DESCRIBE CONNECTOR: ``trace`` is the failure of a FAILED connector; ``writes`` says what
    it does with each record."""

    connector: ConnectorSummary
    topics: list[str]
    worker_id: str
    trace: str | None = None
    writes: str = ""


@dataclass
class Explanation(Result):
    text: str


class TombstoneRow(list[Any]):
    """A row deleted from a table (a push query over a table): key and window columns set, the
    rest null. The REST API marks it ``"tombstone": true`` as ksqlDB does."""

    tombstone = True


class RowStream(Result):
    """Rows of a push or pull query (or PRINT), as they arrive.

    A producer thread (the Spark query's ``foreachBatch``) calls :meth:`put`; consumers iterate.
    Iteration ends when the query finishes (LIMIT reached, pull query done) or :meth:`close` is
    called (Ctrl-C, client gone); closing stops the underlying Spark query.
    """

    _END = object()

    def __init__(self, statement: str, query_id: str, columns: list[tuple[str, str]],
                 limit: int | None = None, kind: str = "push") -> None:
        super().__init__(statement)
        self.query_id = query_id
        self.columns = columns  # (name, SQL type)
        self.limit = limit
        self.kind = kind
        self.error: BaseException | None = None
        self._queue: queue.Queue[object] = queue.Queue()
        self._emitted = 0
        self._closed = threading.Event()
        self._on_close: list[Callable[[], None]] = []

    def put(self, row: list[Any]) -> bool:
        """Offer a row; returns False once the stream needs no more (LIMIT reached / closed)."""
        if self._closed.is_set():
            return False
        if self.limit is not None and self._emitted >= self.limit:
            return False
        self._queue.put(row)
        self._emitted += 1
        if self.limit is not None and self._emitted >= self.limit:
            self.finish()
            return False
        return True

    @property
    def limit_reached(self) -> bool:
        return self.limit is not None and self._emitted >= self.limit

    def finish(self, error: BaseException | None = None) -> None:
        if error is not None:
            self.error = error
        if not self._closed.is_set():
            self._closed.set()
            self._queue.put(self._END)

    def on_close(self, fn: Callable[[], None]) -> None:
        self._on_close.append(fn)

    def close(self) -> None:
        self.finish()
        for fn in self._on_close:
            fn()
        self._on_close.clear()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    TIMEOUT = object()

    def poll(self, timeout: float) -> Any:
        """The next row; :attr:`TIMEOUT` if none came within ``timeout``; None once the stream
        has ended (re-raising the query's error, if it failed)."""
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            return self.TIMEOUT
        if item is self._END:
            self._queue.put(self._END)  # later polls see the end too
            if self.error is not None:
                raise self.error
            return None
        return item

    def rows(self, timeout: float | None = None) -> Iterator[list[Any]]:
        """Yield rows until the stream ends; with ``timeout``, stop after that long without a row."""
        while True:
            try:
                item = self._queue.get(timeout=timeout)
            except queue.Empty:
                return
            if item is self._END:
                if self.error is not None:
                    raise self.error
                return
            yield item  # type: ignore[misc]

    def __iter__(self) -> Iterator[list[Any]]:
        return self.rows()
