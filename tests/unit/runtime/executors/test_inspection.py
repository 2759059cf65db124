"""SHOW and DESCRIBE against a small context (no Spark session, no broker): what they answer
from the catalog and the session, and that they change neither the catalog nor the command log."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from streamsql import types as t
from streamsql.catalog import Catalog, FileCommandLog, Source
from streamsql.errors import AnalysisError
from streamsql.functions.catalog import builtin_registry
from streamsql.functions.compiled import Compiled
from streamsql.functions.registry import FunctionDef, FunctionRegistry
from streamsql.runtime import results as r
from streamsql.runtime.config import EngineConfig
from streamsql.runtime.executors.inspection import Inspection
from streamsql.runtime.session import Session
from streamsql.sql import parse


@dataclass
class SmallContext:
    """What SHOW STREAMS/TABLES/TYPES/VARIABLES/PROPERTIES and DESCRIBE reach of the engine."""

    config: EngineConfig
    active_session: Session = field(default_factory=Session)
    catalog: Catalog = field(default_factory=Catalog)
    kafka_settings: dict[str, str] = field(default_factory=dict)
    functions: FunctionRegistry = field(default_factory=builtin_registry)

    def __post_init__(self) -> None:
        self.command_log = FileCommandLog(self.config.data_dir / "commands.jsonl")


@pytest.fixture
def ctx(tmp_path: Path) -> SmallContext:
    c = SmallContext(EngineConfig(data_dir=tmp_path))
    c.catalog.add(Source("ORDERS", "STREAM", [t.Column("ID", t.BIGINT, "key"), t.Column("AMOUNT", t.DOUBLE)],
                         topic="orders", key_format="KAFKA", value_format="JSON", partitions=2,
                         statement="CREATE STREAM ORDERS ..."))
    c.catalog.add(Source("TOTALS", "TABLE", [t.Column("ID", t.BIGINT, "key"), t.Column("N", t.BIGINT)],
                         topic="totals", key_format="KAFKA", value_format="JSON"))
    c.catalog.add_type("MONEY", t.Decimal(10, 2))
    return c


def run(ctx: SmallContext, sql: str) -> r.Result:
    [stmt] = parse(sql)
    return Inspection(ctx).handlers()[type(stmt)](stmt)  # type: ignore[arg-type]


def test_show_lists_sources_and_types_and_changes_nothing(ctx: SmallContext) -> None:
    streams = run(ctx, "SHOW STREAMS;")
    assert isinstance(streams, r.SourceList) and [s.name for s in streams.sources] == ["ORDERS"]
    tables = run(ctx, "SHOW TABLES;")
    assert isinstance(tables, r.SourceList) and [(s.name, s.topic) for s in tables.sources] == [("TOTALS", "totals")]
    types = run(ctx, "SHOW TYPES;")
    assert isinstance(types, r.Properties) and types.properties == {"MONEY": "DECIMAL(10, 2)"}
    assert sorted(ctx.catalog.source_names()) == ["ORDERS", "TOTALS"] and list(ctx.catalog.types) == ["MONEY"]
    assert ctx.command_log.read_all() == []


def test_show_properties_hides_a_secret_the_session_set(ctx: SmallContext) -> None:
    ctx.active_session.properties.update({"auto.offset.reset": "earliest", "sasl.password": "s3cret"})
    shown = run(ctx, "SHOW PROPERTIES;")
    assert isinstance(shown, r.Properties)
    assert shown.properties["auto.offset.reset"] == "earliest" and shown.overridden["sasl.password"] == "[hidden]"
    assert "s3cret" not in repr(shown)
    ctx.active_session.variables["TOPIC"] = "orders"
    variables = run(ctx, "SHOW VARIABLES;")
    assert isinstance(variables, r.Properties) and variables.properties == {"TOPIC": "orders"}
    assert ctx.command_log.read_all() == []


def test_describe_a_stream(ctx: SmallContext) -> None:
    described = run(ctx, "DESCRIBE ORDERS;")
    assert isinstance(described, r.SourceDescription)
    assert [(f.name, f.type, f.key) for f in described.fields] == [("ID", "BIGINT", True), ("AMOUNT", "DOUBLE", False)]
    assert (described.partitions, described.read_queries, described.write_queries) == (2, [], [])
    assert ctx.command_log.read_all() == []


def test_show_and_describe_functions_read_the_context_s_registry(ctx: SmallContext) -> None:
    """SHOW FUNCTIONS and DESCRIBE FUNCTION answer from the registry of the engine they are given
    (a function only this context's registry holds is listed; another registry never sees it)."""
    ctx.functions.register(FunctionDef("ONLY_HERE", "SCALAR", lambda cs: Compiled("1", t.INTEGER),
                                       signatures=["ONLY_HERE() -> INT"], description="Here only.", category="PYTHON"))
    shown = run(ctx, "SHOW FUNCTIONS;")
    assert isinstance(shown, r.FunctionList)
    names = [f.name for f in shown.functions]
    assert "ONLY_HERE" in names and "ABS" in names and names == sorted(names)
    described = run(ctx, "DESCRIBE FUNCTION only_here;")
    assert isinstance(described, r.FunctionDescription)
    assert (described.function.name, described.function.description) == ("ONLY_HERE", "Here only.")
    other = SmallContext(ctx.config)
    with pytest.raises(AnalysisError, match="Can't find any functions with the name 'ONLY_HERE'"):
        run(other, "DESCRIBE FUNCTION only_here;")
    assert ctx.command_log.read_all() == []
