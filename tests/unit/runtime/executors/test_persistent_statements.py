"""The persistent queries' executor against a small context: a real catalog, command log, query
registry and planner, no Spark session and no broker (``planning_only``: a query that starts is
planned into its steps, as ``streamsql topology`` plans it). Each statement's outcome is what the
catalog holds, what the command log keeps, and what runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from streamsql import types as t
from streamsql.catalog import Catalog, FileCommandLog, QueryInfo, Source
from streamsql.errors import AnalysisError, CatalogError
from streamsql.functions.catalog import builtin_registry
from streamsql.physical.steps import PhysicalPlan
from streamsql.planner.ddl import SourceDefinitions
from streamsql.planner.planner import Planner
from streamsql.runtime import paths
from streamsql.runtime import results as r
from streamsql.runtime.config import DEFAULT_PROPERTIES
from streamsql.runtime.executors import Deferred
from streamsql.runtime.executors.persistent import PersistentQueries
from streamsql.runtime.queries import QueryRegistry
from streamsql.sql import ast, parse

CSAS = "CREATE STREAM BIG AS SELECT ID, V FROM S WHERE V > 10 EMIT CHANGES"


@dataclass
class SmallContext:
    """What the persistent statements reach of the engine when no query runs in Spark."""

    data_dir: Path
    catalog: Catalog = field(default_factory=Catalog)
    queries: QueryRegistry = field(default_factory=QueryRegistry)
    stores: dict[str, Any] = field(default_factory=dict)
    followed: dict[str, Any] = field(default_factory=dict)
    planning_only: bool = True

    def __post_init__(self) -> None:
        self.command_log = FileCommandLog(self.data_dir / "commands.jsonl")
        self.functions = builtin_registry()
        self.planner = Planner(self.catalog, self.functions)
        self.definitions = SourceDefinitions(self.prop)

    def prop(self, name: str) -> str:
        return DEFAULT_PROPERTIES.get(name, "")

    def offset_reset(self) -> str:
        return "earliest"

    def exactly_once(self) -> bool:
        return False

    def log_command(self, stmt: ast.Statement, replay_seq: int | None) -> int:
        """The engine's rule: a replayed statement is logged already."""
        return replay_seq if replay_seq is not None else self.command_log.append(stmt.text, {}).seq


@pytest.fixture
def ctx(tmp_path: Path) -> SmallContext:
    c = SmallContext(tmp_path)
    c.catalog.add(Source("S", "STREAM", [t.Column("ID", t.BIGINT, "key"), t.Column("V", t.INTEGER)],
                         topic="s", key_format="KAFKA", value_format="JSON", partitions=1,
                         statement="CREATE STREAM S (ID BIGINT KEY, V INT) WITH (...)"))
    c.catalog.add(Source("BIG", "STREAM", [t.Column("ID", t.BIGINT, "key"), t.Column("V", t.INTEGER)],
                         topic="BIG", key_format="KAFKA", value_format="JSON", partitions=1,
                         statement=CSAS, writer_query="CSAS_BIG_2"))
    c.catalog.add_query(QueryInfo("CSAS_BIG_2", CSAS, "BIG", ["S"]))
    return c


def run(ctx: SmallContext, sql: str, replay_seq: int | None = None, deferred: Deferred | None = None) -> r.Result:
    [stmt] = parse(sql, custom_types=ctx.catalog.types)
    handler = PersistentQueries(ctx).handlers()[type(stmt)]  # type: ignore[arg-type]
    return handler(stmt, replay_seq=replay_seq, deferred=deferred)


def logged(ctx: SmallContext) -> list[str]:
    return [c.statement for c in ctx.command_log.read_all()]


def test_terminate_removes_the_query_and_its_checkpoint_and_is_logged(ctx: SmallContext) -> None:
    checkpoint = paths.checkpoint_dir(ctx.data_dir, "CSAS_BIG_2")
    (checkpoint / "offsets").mkdir(parents=True)
    with pytest.raises(CatalogError, match="Unknown queryId: CSAS_NOPE_9"):
        run(ctx, "TERMINATE CSAS_NOPE_9;")
    assert logged(ctx) == [] and "CSAS_BIG_2" in ctx.catalog.queries
    result = run(ctx, "TERMINATE CSAS_BIG_2;")
    assert isinstance(result, r.CommandStatus) and result.message == "Query terminated."
    assert "CSAS_BIG_2" not in ctx.catalog.queries and not checkpoint.exists()
    assert ctx.catalog.get("BIG").writer_query is None  # the stream stays, written by nothing
    assert logged(ctx) == ["TERMINATE CSAS_BIG_2"]


def test_the_same_create_as_select_again_is_a_no_op_and_another_is_refused(ctx: SmallContext) -> None:
    again = run(ctx, CSAS + ";")
    assert isinstance(again, r.CommandStatus) and "already exists (unchanged)" in again.message
    assert again.query_id == "CSAS_BIG_2"
    other = "CREATE STREAM BIG AS SELECT ID FROM S EMIT CHANGES"
    warned = run(ctx, other.replace("STREAM BIG", "STREAM IF NOT EXISTS BIG") + ";")
    assert isinstance(warned, r.Warning_) and "A stream with the same name already exists" in warned.message
    with pytest.raises(CatalogError, match="Cannot add stream 'BIG': A stream with the same name already exists"):
        run(ctx, other + ";")
    assert list(ctx.catalog.queries) == ["CSAS_BIG_2"] and logged(ctx) == []


def test_insert_into_refuses_a_table_and_a_source_stream_before_logging(ctx: SmallContext) -> None:
    ctx.catalog.add(Source("T", "TABLE", [t.Column("ID", t.BIGINT, "key"), t.Column("V", t.INTEGER)],
                           topic="t", key_format="KAFKA", value_format="JSON"))
    ctx.catalog.add(Source("RO", "STREAM", [t.Column("ID", t.BIGINT, "key"), t.Column("V", t.INTEGER)],
                           topic="ro", key_format="KAFKA", value_format="JSON", is_source=True))
    with pytest.raises(AnalysisError, match="INSERT INTO can only be used to insert into a stream. T is a table."):
        run(ctx, "INSERT INTO T SELECT ID, V FROM S EMIT CHANGES;")
    with pytest.raises(AnalysisError, match="Cannot insert into read-only stream: RO"):
        run(ctx, "INSERT INTO RO SELECT ID, V FROM S EMIT CHANGES;")
    with pytest.raises(CatalogError, match="Source `NOPE` does not exist"):
        run(ctx, "INSERT INTO NOPE SELECT ID, V FROM S EMIT CHANGES;")
    assert list(ctx.catalog.queries) == ["CSAS_BIG_2"] and logged(ctx) == []


def test_a_query_paused_in_the_log_waits_for_resume_which_starts_it(ctx: SmallContext) -> None:
    """Replaying the log: PAUSE takes the query out of the queries the replay starts; a live
    RESUME starts it (here: plans its steps) and is logged."""
    [select] = parse("SELECT ID, V FROM S WHERE V > 10 EMIT CHANGES;")
    assert isinstance(select, ast.SelectStatement)
    plan = ctx.planner.plan_query(select.query, persistent=True, sink_name="BIG")
    [create] = parse(CSAS + ";")
    deferred: Deferred = [("CSAS_BIG_2", plan, create, "BIG")]
    paused = run(ctx, "PAUSE CSAS_BIG_2;", replay_seq=3, deferred=deferred)
    assert isinstance(paused, r.CommandStatus) and paused.message == "Query paused."
    assert deferred == [] and ctx.queries.paused == {"CSAS_BIG_2"} and ctx.queries.plans == {}
    resumed = run(ctx, "RESUME CSAS_BIG_2;")
    assert isinstance(resumed, r.CommandStatus) and resumed.message == "Query resumed."
    assert ctx.queries.paused == set() and isinstance(ctx.queries.plans["CSAS_BIG_2"], PhysicalPlan)
    assert "CSAS_BIG_2" in ctx.catalog.queries
    assert logged(ctx) == ["RESUME CSAS_BIG_2"]  # the PAUSE it replayed is in the log already
