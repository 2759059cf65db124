"""The statements of ksqlDB's dialect, as the parser hands them to the engine.

Statements are plain dataclasses. Expressions inside them are sqlglot expression trees, built by
the ksqlDB dialect (``streamsql.sql.dialect``) under these conventions, which the planner relies on:

* Identifiers are already normalized: unquoted names upper-cased, back-quoted or double-quoted
  names kept as written. ``exp.Identifier.quoted`` tells which.
* A column is ``exp.Column(this=Identifier, table=Identifier | None)`` (``s.col`` → table ``S``).
* Struct dereference ``a->b`` is ``exp.Dot(this=<expr of a>, expression=Identifier(B))``.
* Array/map subscript ``a[i]`` is ``exp.Bracket(this=a, expressions=[i])``, index as written
  (ksqlDB indexes arrays from 1; negative counts from the end).
* Every function call, built-in or user-defined, is ``exp.Anonymous(this="UPPERNAME",
  expressions=[args])`` so that the function catalog (not sqlglot) decides what a name means.
  ``COUNT(*)`` has ``exp.Star()`` as its argument. Syntax forms stay syntax: CAST, CASE, LIKE,
  IN, BETWEEN, IS NULL, AND/OR/NOT, arithmetic and comparisons use sqlglot's own node types.
* ``CAST(x AS t)`` is ``exp.Cast(this=x, to=exp.DataType)``; ``streamsql.sql.to_sql_type``
  converts the DataType into a :mod:`streamsql.types` type.
* Lambdas ``x => body`` / ``(x, y) => body`` are ``exp.Lambda(this=body, expressions=[Identifier])``.
* Literals: strings ``exp.Literal.string``, numbers ``exp.Literal.number`` with the text as
  written (the planner types ``1`` as INTEGER, ``1.5`` as DECIMAL, ``1.5E3`` as DOUBLE, as ksqlDB),
  ``exp.Boolean``, ``exp.Null``.
* Star select items ``*``, ``s.*`` and ``col->*`` are :class:`SelectItem` with ``star=True``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from streamsql.types import Column, SqlType


@dataclass
class Statement:
    """Base: ``text`` is the statement's own source text (without the trailing ``;``);
    ``line``/``column`` locate its first character in the script it came from."""

    text: str = field(default="", kw_only=True)
    line: int = field(default=1, kw_only=True)
    column: int = field(default=1, kw_only=True)


@dataclass
class SourceRef:
    """A stream or table named in FROM / JOIN, with its optional alias (both normalized)."""

    name: str
    alias: str | None = None


@dataclass
class WindowSpec:
    """``WINDOW TUMBLING (SIZE ...)``, ``HOPPING (SIZE ..., ADVANCE BY ...)``, ``SESSION (gap)``.
    Durations are milliseconds."""

    type: str  # TUMBLING | HOPPING | SESSION
    size_ms: int
    advance_ms: int | None = None
    retention_ms: int | None = None
    grace_ms: int | None = None


@dataclass
class JoinClause:
    """``[INNER|LEFT [OUTER]|RIGHT [OUTER]|FULL [OUTER]] JOIN right [WITHIN ...] ON cond``."""

    kind: str  # INNER | LEFT | RIGHT | FULL
    right: SourceRef
    on: exp.Expr
    within_before_ms: int | None = None
    within_after_ms: int | None = None
    grace_ms: int | None = None


@dataclass
class SelectItem:
    """One projection item. For ``*`` ``star`` is true and ``expression`` is None (``SELECT *``),
    a column naming the source (``s.*``: ``exp.Column(this=Star, table=S)``) or the struct
    expression (``col->*``)."""

    expression: exp.Expr | None
    alias: str | None = None
    star: bool = False


@dataclass
class Query:
    """``SELECT ... FROM ... [JOIN] [WINDOW] [WHERE] [GROUP BY] [PARTITION BY] [HAVING]
    [EMIT CHANGES|FINAL] [LIMIT n]``. ``emit`` is None for a pull query."""

    select: list[SelectItem]
    source: SourceRef
    joins: list[JoinClause] = field(default_factory=list)
    window: WindowSpec | None = None
    where: exp.Expr | None = None
    group_by: list[exp.Expr] = field(default_factory=list)
    partition_by: list[exp.Expr] = field(default_factory=list)
    having: exp.Expr | None = None
    emit: str | None = None  # CHANGES | FINAL | None
    limit: int | None = None


# --- DDL -----------------------------------------------------------------------------------------


@dataclass
class CreateSource(Statement):
    """``CREATE [OR REPLACE] [SOURCE] STREAM|TABLE [IF NOT EXISTS] name (cols) WITH (...)``.
    ``properties`` keys are upper-cased; values are Python literals (str, int, float, bool)."""

    kind: str  # STREAM | TABLE
    name: str
    columns: list[Column]
    properties: dict[str, Any]
    or_replace: bool = False
    if_not_exists: bool = False
    is_source: bool = False


@dataclass
class CreateAsSelect(Statement):
    """``CREATE [OR REPLACE] STREAM|TABLE [IF NOT EXISTS] name [WITH (...)] AS SELECT ...``."""

    kind: str  # STREAM | TABLE
    name: str
    properties: dict[str, Any]
    query: Query
    or_replace: bool = False
    if_not_exists: bool = False


@dataclass
class InsertInto(Statement):
    """``INSERT INTO target [WITH (QUERY_ID='...')] SELECT ...``."""

    target: str
    query: Query
    properties: dict[str, Any] = field(default_factory=dict)
    #: where the target's name is in the script (line, column): ksqlDB's message for a missing one
    target_position: tuple[int, int] | None = None


@dataclass
class InsertValues(Statement):
    """``INSERT INTO target [(c1, c2)] VALUES (v1, v2)``; ``columns`` None means all, keys first."""

    target: str
    columns: list[str] | None
    values: list[exp.Expr]


@dataclass
class DropSource(Statement):
    kind: str  # STREAM | TABLE
    name: str
    if_exists: bool = False
    delete_topic: bool = False


@dataclass
class AlterSource(Statement):
    """``ALTER STREAM|TABLE name ADD [COLUMN] col type [, ADD [COLUMN] col type ...]``: value
    columns added to a declared source's schema (queries started before keep theirs)."""

    kind: str  # STREAM | TABLE
    name: str
    columns: list[Column]


@dataclass
class AssertTopic(Statement):
    """``ASSERT [NOT EXISTS] TOPIC name [WITH (PARTITIONS=n, REPLICAS=n)] [TIMEOUT n unit]``:
    waits up to the timeout for the topic to exist (or not), as ksqlDB's migrations tool uses it."""

    topic: str
    exists: bool = True
    properties: dict[str, Any] = field(default_factory=dict)
    timeout_ms: int | None = None


@dataclass
class AssertSchema(Statement):
    """``ASSERT [NOT EXISTS] SCHEMA [SUBJECT name] [ID n] [TIMEOUT n unit]``: the same for a
    Schema Registry subject and/or schema id."""

    subject: str | None = None
    schema_id: int | None = None
    exists: bool = True
    timeout_ms: int | None = None


@dataclass
class CreateType(Statement):
    name: str
    type: SqlType
    if_not_exists: bool = False


@dataclass
class DropType(Statement):
    name: str
    if_exists: bool = False


@dataclass
class CreateConnector(Statement):
    """``CREATE SOURCE|SINK CONNECTOR [IF NOT EXISTS] name WITH ('key' = value, ...)``. ``config``
    is Kafka Connect's configuration: keys as written (Connect's keys are case-sensitive), values
    as strings (Connect takes strings; ``TRUE`` becomes ``"true"``)."""

    kind: str  # SOURCE | SINK
    name: str
    config: dict[str, str]
    if_not_exists: bool = False


@dataclass
class DropConnector(Statement):
    """``DROP CONNECTOR [IF EXISTS] name``."""

    name: str
    if_exists: bool = False


# --- queries -------------------------------------------------------------------------------------


@dataclass
class SelectStatement(Statement):
    """A transient query: push (``query.emit`` set) or pull (``query.emit`` None)."""

    query: Query


# --- meta statements -----------------------------------------------------------------------------


@dataclass
class Show(Statement):
    """``SHOW|LIST STREAMS|TABLES|TOPICS|QUERIES|PROPERTIES|FUNCTIONS|TYPES|VARIABLES [EXTENDED]``.
    ``what`` is the upper-cased plural noun; ``all_topics`` is ``SHOW ALL TOPICS``."""

    what: str
    extended: bool = False
    all_topics: bool = False
    #: ``SHOW SOURCE CONNECTORS`` / ``SHOW SINK CONNECTORS``: SOURCE | SINK (None: all)
    connector_kind: str | None = None


@dataclass
class Describe(Statement):
    """``DESCRIBE name [EXTENDED]``, ``DESCRIBE STREAMS|TABLES [EXTENDED]`` (``name`` None,
    ``listing`` set), ``DESCRIBE FUNCTION name`` (``function`` true) and ``DESCRIBE CONNECTOR
    name`` (``connector`` true)."""

    name: str | None
    extended: bool = False
    function: bool = False
    connector: bool = False
    listing: str | None = None  # STREAMS | TABLES


@dataclass
class Print(Statement):
    """``PRINT topic [FROM BEGINNING] [INTERVAL n] [LIMIT n]``; topic kept as written unless
    unquoted (then as written too: ksqlDB looks the topic up case-insensitively)."""

    topic: str
    from_beginning: bool = False
    interval: int | None = None
    limit: int | None = None


@dataclass
class PauseQuery(Statement):
    """``PAUSE query_id`` or ``PAUSE ALL`` (``query_id`` None): stop processing, keep state."""

    query_id: str | None


@dataclass
class ResumeQuery(Statement):
    """``RESUME query_id`` or ``RESUME ALL``: go on from where PAUSE left the query."""

    query_id: str | None


@dataclass
class Terminate(Statement):
    """``TERMINATE query_id`` or ``TERMINATE ALL`` (``query_id`` None)."""

    query_id: str | None


@dataclass
class SetProperty(Statement):
    name: str
    value: str


@dataclass
class UnsetProperty(Statement):
    name: str


@dataclass
class DefineVariable(Statement):
    name: str
    value: str


@dataclass
class UndefineVariable(Statement):
    name: str


@dataclass
class Explain(Statement):
    """``EXPLAIN <statement>`` (``statement`` set) or ``EXPLAIN query_id`` (``query_id`` set)."""

    statement: Statement | None = None
    query_id: str | None = None
