"""SET, UNSET, DEFINE and UNDEFINE against a small context (no Spark session, no broker): they
change the session the statement runs under, never the catalog, and the command log keeps none."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from streamsql.catalog import Catalog, FileCommandLog
from streamsql.errors import ConfigError
from streamsql.runtime import results as r
from streamsql.runtime.config import EngineConfig
from streamsql.runtime.executors.session_statements import SessionStatements
from streamsql.runtime.session import Session
from streamsql.sql import parse


@dataclass
class SmallContext:
    """What the session statements reach of the engine: its configuration and the session."""

    config: EngineConfig
    active_session: Session = field(default_factory=Session)
    catalog: Catalog = field(default_factory=Catalog)

    def __post_init__(self) -> None:
        self.command_log = FileCommandLog(self.config.data_dir / "commands.jsonl")


@pytest.fixture
def ctx(tmp_path: Path) -> SmallContext:
    return SmallContext(EngineConfig(data_dir=tmp_path))


def run(ctx: SmallContext, sql: str) -> r.Result:
    [stmt] = parse(sql)
    return SessionStatements(ctx).handlers()[type(stmt)](stmt)  # type: ignore[arg-type]


def unchanged(ctx: SmallContext) -> bool:
    """Nothing entered the catalog or the command log."""
    return not ctx.catalog.source_names() and not ctx.catalog.types and ctx.command_log.read_all() == []


def test_set_and_unset_change_the_session_only(ctx: SmallContext) -> None:
    result = run(ctx, "SET 'auto.offset.reset' = 'earliest';")
    assert isinstance(result, r.CommandStatus)
    assert ctx.active_session.properties == {"auto.offset.reset": "earliest"}
    run(ctx, "UNSET 'auto.offset.reset';")
    assert ctx.active_session.properties == {}
    assert unchanged(ctx)


def test_a_bad_value_is_refused_naming_the_property(ctx: SmallContext) -> None:
    with pytest.raises(ConfigError, match="Invalid value later for configuration auto.offset.reset"):
        run(ctx, "SET 'auto.offset.reset' = 'later';")
    with pytest.raises(ConfigError, match="processing.guarantee"):
        run(ctx, "SET 'processing.guarantee' = 'twice';")
    assert ctx.active_session.properties == {} and unchanged(ctx)


def test_define_and_undefine_variables(ctx: SmallContext) -> None:
    run(ctx, "DEFINE topic = 'orders';")
    assert ctx.active_session.variables == {"TOPIC": "orders"}  # names are case-insensitive
    assert isinstance(run(ctx, "UNDEFINE topic;"), r.CommandStatus)
    assert isinstance(run(ctx, "UNDEFINE topic;"), r.Warning_)  # not defined any more
    assert ctx.active_session.variables == {} and unchanged(ctx)
