"""The transient queries' executor against a small context: a real catalog, planner and table
store, no Spark session and no broker. A pull query over a materialized table is answered from
the store (the Arrow path); what a pull query may not have is refused before planning. A SELECT
changes neither the catalog nor the command log."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from streamsql import types as t
from streamsql.catalog import Catalog, FileCommandLog, Source
from streamsql.errors import AnalysisError
from streamsql.functions.catalog import builtin_registry
from streamsql.planner.planner import Planner
from streamsql.runtime import results as r
from streamsql.runtime.config import DEFAULT_PROPERTIES
from streamsql.runtime.executors.transient import TransientQueries
from streamsql.runtime.materialized import TableStore
from streamsql.sql import parse


@dataclass
class SmallContext:
    """What a pull query over a table's store reaches of the engine."""

    data_dir: Path
    catalog: Catalog = field(default_factory=Catalog)
    stores: dict[str, TableStore] = field(default_factory=dict)
    followed: dict[str, Source] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.command_log = FileCommandLog(self.data_dir / "commands.jsonl")
        self.functions = builtin_registry()
        self.planner = Planner(self.catalog, self.functions)

    def prop(self, name: str) -> str:
        return DEFAULT_PROPERTIES.get(name, "")


@pytest.fixture
def ctx(tmp_path: Path) -> SmallContext:
    c = SmallContext(tmp_path)
    c.catalog.add(Source("TOTALS", "TABLE", [t.Column("REGION", t.STRING, "key"), t.Column("N", t.BIGINT)],
                         topic="totals", key_format="KAFKA", value_format="JSON"))
    c.catalog.add(Source("ORDERS", "STREAM", [t.Column("ID", t.BIGINT, "key"), t.Column("AMOUNT", t.DOUBLE)],
                         topic="orders", key_format="KAFKA", value_format="JSON"))
    store = TableStore(tmp_path / "stores" / "TOTALS.db")
    store.apply(0, [(["east"], (None, None), {"N": 3}, 1000), (["west"], (None, None), {"N": 5}, 2000)], [])
    c.stores["TOTALS"] = store
    yield c
    store.close()


def run(ctx: SmallContext, sql: str) -> tuple[TransientQueries, r.Result]:
    [stmt] = parse(sql)
    executor = TransientQueries(ctx)  # type: ignore[arg-type]
    return executor, executor.handlers()[type(stmt)](stmt)


def test_a_pull_query_is_answered_from_the_tables_store(ctx: SmallContext) -> None:
    executor, result = run(ctx, "SELECT REGION, N * 2 AS TWICE FROM TOTALS WHERE REGION = 'west';")
    assert isinstance(result, r.RowStream) and result.kind == "pull"
    assert result.columns == [("REGION", "STRING"), ("TWICE", "BIGINT")]
    assert list(result.rows(5)) == [["west", 10]]
    assert executor.pull_paths == {"arrow": 1}  # no Spark job
    assert sorted(ctx.catalog.source_names()) == ["ORDERS", "TOTALS"] and ctx.catalog.queries == {}
    assert ctx.command_log.read_all() == []


@pytest.mark.parametrize(("sql", "message"), [
    ("SELECT REGION, COUNT(*) FROM TOTALS GROUP BY REGION;", "Pull queries don't support GROUP BY clauses."),
    ("SELECT REGION, ROWPARTITION FROM TOTALS;",
     "Pull queries don't support the following columns in SELECT clauses: `ROWPARTITION`"),
    ("SELECT * FROM TOTALS WHERE WINDOWSTART > 0;", "WHERE column 'WINDOWSTART' cannot be resolved."),
])
def test_what_a_pull_query_may_not_have_is_refused_and_changes_nothing(ctx: SmallContext, sql: str,
                                                                         message: str) -> None:
    with pytest.raises(AnalysisError) as refused:
        run(ctx, sql)
    assert message in str(refused.value)
    assert sorted(ctx.catalog.source_names()) == ["ORDERS", "TOTALS"] and ctx.command_log.read_all() == []


def test_a_table_without_a_store_is_not_queryable(ctx: SmallContext) -> None:
    ctx.stores.clear()
    with pytest.raises(AnalysisError, match="The `TOTALS` table isn't queryable"):
        run(ctx, "SELECT * FROM TOTALS WHERE REGION = 'east';")
    assert ctx.command_log.read_all() == []
