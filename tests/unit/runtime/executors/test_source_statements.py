"""The source statements' executor against a small context: a real catalog and a real command
log in a directory, no Spark session and no broker. Each statement's outcome is what the
catalog holds and what the command log keeps (the statements a replay runs again)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from streamsql import types as t
from streamsql.catalog import Catalog, FileCommandLog, Source
from streamsql.errors import CatalogError
from streamsql.planner.ddl import SourceDefinitions
from streamsql.runtime import results as r
from streamsql.runtime.config import DEFAULT_PROPERTIES
from streamsql.runtime.executors.sources import SourceStatements
from streamsql.sql import ast, parse


@dataclass
class SmallContext:
    """What the source statements reach of the engine when no topic and no query is involved."""

    data_dir: Path
    catalog: Catalog = field(default_factory=Catalog)
    followed: dict[str, Any] = field(default_factory=dict)
    stores: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.command_log = FileCommandLog(self.data_dir / "commands.jsonl")
        self.definitions = SourceDefinitions(lambda name: DEFAULT_PROPERTIES.get(name, ""))

    def log_command(self, stmt: ast.Statement, replay_seq: int | None) -> int:
        """The engine's rule: a replayed statement is logged already."""
        return replay_seq if replay_seq is not None else self.command_log.append(stmt.text, {}).seq


@pytest.fixture
def ctx(tmp_path: Path) -> SmallContext:
    return SmallContext(tmp_path)


def run(ctx: SmallContext, sql: str, replay_seq: int | None = None) -> r.Result:
    [stmt] = parse(sql)
    handler = SourceStatements(ctx).handlers()[type(stmt)]  # type: ignore[arg-type]
    return handler(stmt, replay_seq=replay_seq)


def logged(ctx: SmallContext) -> list[str]:
    return [c.statement for c in ctx.command_log.read_all()]


def test_create_and_drop_type(ctx: SmallContext) -> None:
    created = run(ctx, "CREATE TYPE ADDRESS AS STRUCT<STREET VARCHAR, ZIP INT>;")
    assert isinstance(created, r.CommandStatus) and "Registered custom type with name 'ADDRESS'" in created.message
    address = t.Struct((t.StructField("STREET", t.STRING), t.StructField("ZIP", t.INTEGER)))
    assert ctx.catalog.types["ADDRESS"] == address
    with pytest.raises(CatalogError, match="Cannot register custom type 'ADDRESS' since it is already registered"):
        run(ctx, "CREATE TYPE ADDRESS AS INT;")
    assert isinstance(run(ctx, "CREATE TYPE IF NOT EXISTS ADDRESS AS INT;"), r.Warning_)
    dropped = run(ctx, "DROP TYPE ADDRESS;")
    assert isinstance(dropped, r.CommandStatus) and "ADDRESS" not in ctx.catalog.types
    with pytest.raises(CatalogError, match="Type ADDRESS does not exist"):
        run(ctx, "DROP TYPE ADDRESS;")
    assert isinstance(run(ctx, "DROP TYPE IF EXISTS ADDRESS;"), r.CommandStatus)
    # only the statements that changed the catalog are logged (their text without the ";"), in order
    assert logged(ctx) == ["CREATE TYPE ADDRESS AS STRUCT<STREET VARCHAR, ZIP INT>", "DROP TYPE ADDRESS"]


def test_a_replayed_create_stream_enters_the_catalog_without_logging_again(ctx: SmallContext) -> None:
    sql = "CREATE STREAM S (ID BIGINT KEY, V INT) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON', PARTITIONS=3);"
    result = run(ctx, sql, replay_seq=7)
    assert isinstance(result, r.CommandStatus) and result.message == "Stream created"
    source = ctx.catalog.get("S")
    assert (source.kind, source.topic, source.partitions) == ("STREAM", "s", 3)
    assert [c.name for c in source.columns] == ["ID", "V"]
    assert logged(ctx) == []  # the command it replays is in the log already
    again = run(ctx, sql, replay_seq=8)  # the same statement again: a no-op
    assert isinstance(again, r.CommandStatus) and "already exists (unchanged)" in again.message


def test_alter_stream_adds_columns_and_is_logged(ctx: SmallContext) -> None:
    run(ctx, "CREATE STREAM S (ID BIGINT KEY, V INT) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON', PARTITIONS=1);",
        replay_seq=1)
    result = run(ctx, "ALTER STREAM S ADD COLUMN W VARCHAR;")
    assert isinstance(result, r.CommandStatus) and result.message == "Stream S altered."
    assert [(c.name, c.type) for c in ctx.catalog.get("S").columns] == [
        ("ID", t.BIGINT), ("V", t.INTEGER), ("W", t.STRING)]
    with pytest.raises(CatalogError, match="Cannot add column `W` to schema"):
        run(ctx, "ALTER STREAM S ADD COLUMN W INT;")
    with pytest.raises(CatalogError, match="Incompatible data source type is STREAM"):
        run(ctx, "ALTER TABLE S ADD COLUMN X INT;")
    assert logged(ctx) == ["ALTER STREAM S ADD COLUMN W VARCHAR"]


def test_drop_stream_leaves_the_catalog_and_is_logged(ctx: SmallContext) -> None:
    ctx.catalog.add(Source("S", "STREAM", [t.Column("ID", t.BIGINT, "key"), t.Column("V", t.INTEGER)],
                           topic="s", key_format="KAFKA", value_format="JSON"))
    with pytest.raises(CatalogError, match="Incompatible data source type is STREAM, but statement was DROP TABLE"):
        run(ctx, "DROP TABLE S;")
    result = run(ctx, "DROP STREAM S;")
    assert isinstance(result, r.CommandStatus) and result.message == "Source `S` (topic: s) was dropped."
    assert ctx.catalog.find("S") is None
    with pytest.raises(CatalogError, match="Source S does not exist"):
        run(ctx, "DROP STREAM S;")
    assert isinstance(run(ctx, "DROP STREAM IF EXISTS S;"), r.CommandStatus)
    assert logged(ctx) == ["DROP STREAM S"]
