"""The connector statements' executor against a small context: a real catalog, command log and
query registry, no Spark session and no broker (``planning_only``: a connector that starts is
planned into its steps; a replayed CREATE does not look its topics up). Each statement's outcome
is what the catalog holds, what the command log keeps, and what runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from streamsql.catalog import Catalog, FileCommandLog
from streamsql.connectors.config import ConnectorError
from streamsql.errors import CatalogError
from streamsql.physical.steps import PhysicalPlan
from streamsql.runtime import paths
from streamsql.runtime import results as r
from streamsql.runtime.config import EngineConfig
from streamsql.runtime.executors import Deferred
from streamsql.runtime.executors.connectors import ConnectorStatements
from streamsql.runtime.queries import QueryRegistry
from streamsql.sql import ast, parse

ES = "io.confluent.connect.elasticsearch.ElasticsearchSinkConnector"
CREATE = (f"CREATE SINK CONNECTOR orders_es WITH ('connector.class'='{ES}', "
          f"'connection.url'='http://localhost:9200', 'topics'='orders')")


@dataclass
class SmallContext:
    """What the connector statements reach of the engine when no connector runs in Spark."""

    config: EngineConfig
    catalog: Catalog = field(default_factory=Catalog)
    queries: QueryRegistry = field(default_factory=QueryRegistry)
    planning_only: bool = True

    def __post_init__(self) -> None:
        self.data_dir = Path(self.config.data_dir)
        self.command_log = FileCommandLog(self.data_dir / "commands.jsonl")

    def log_command(self, stmt: ast.Statement, replay_seq: int | None) -> int:
        """The engine's rule: a replayed statement is logged already."""
        return replay_seq if replay_seq is not None else self.command_log.append(stmt.text, {}).seq


@pytest.fixture
def ctx(tmp_path: Path) -> SmallContext:
    return SmallContext(EngineConfig(data_dir=tmp_path))


def run(ctx: SmallContext, sql: str, replay_seq: int | None = None, deferred: Deferred | None = None) -> r.Result:
    [stmt] = parse(sql)
    handler = ConnectorStatements(ctx).handlers()[type(stmt)]  # type: ignore[arg-type]
    return handler(stmt, replay_seq=replay_seq, deferred=deferred)


def logged(ctx: SmallContext) -> list[str]:
    return [c.statement for c in ctx.command_log.read_all()]


def test_a_replayed_create_enters_the_catalog_and_starts_without_logging_again(ctx: SmallContext) -> None:
    created = run(ctx, CREATE + ";", replay_seq=5)
    assert isinstance(created, r.ConnectorCreated) and created.name == "ORDERS_ES"
    info = ctx.catalog.connectors["ORDERS_ES"]
    assert (info.kind, info.topics, info.statement) == ("SINK", ["orders"], CREATE)
    assert isinstance(ctx.queries.plans["CONNECTOR_ORDERS_ES"], PhysicalPlan)
    assert logged(ctx) == []  # the command it replays is in the log already
    warned = run(ctx, CREATE.replace("CONNECTOR orders_es", "CONNECTOR IF NOT EXISTS orders_es") + ";")
    assert isinstance(warned, r.Warning_) and "Connector ORDERS_ES already exists" in warned.message
    with pytest.raises(CatalogError, match="Failed to create connector: Connector ORDERS_ES already exists"):
        run(ctx, CREATE + ";")
    assert list(ctx.catalog.connectors) == ["ORDERS_ES"] and logged(ctx) == []


def test_a_refused_connector_leaves_the_catalog_and_the_log_as_they_were(ctx: SmallContext) -> None:
    with pytest.raises(ConnectorError, match="streamsql runs sink connectors only"):
        run(ctx, CREATE.replace("SINK CONNECTOR", "SOURCE CONNECTOR") + ";")
    with pytest.raises(ConnectorError):
        run(ctx, "CREATE SINK CONNECTOR x WITH ('connector.class'='com.example.Nope', 'topics'='orders');")
    assert ctx.catalog.connectors == {} and ctx.queries.plans == {} and logged(ctx) == []


def test_drop_connector_stops_it_removes_its_checkpoint_and_is_logged(ctx: SmallContext) -> None:
    run(ctx, CREATE + ";", replay_seq=5)
    checkpoint = paths.checkpoint_dir(ctx.data_dir, "CONNECTOR_ORDERS_ES")
    (checkpoint / "offsets").mkdir(parents=True)
    dropped = run(ctx, "DROP CONNECTOR orders_es;")
    assert isinstance(dropped, r.ConnectorDropped) and dropped.name == "ORDERS_ES"
    assert ctx.catalog.connectors == {} and ctx.queries.plans == {} and not checkpoint.exists()
    with pytest.raises(CatalogError, match="Connector ORDERS_ES does not exist."):
        run(ctx, "DROP CONNECTOR orders_es;")
    assert isinstance(run(ctx, "DROP CONNECTOR IF EXISTS orders_es;"), r.Warning_)
    assert logged(ctx) == ["DROP CONNECTOR orders_es"]
