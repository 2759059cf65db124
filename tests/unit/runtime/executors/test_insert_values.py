"""INSERT VALUES' executor against a small context (a real catalog and command log, no Spark
session, no broker): the rows it refuses, in ksqlDB's words, before anything is evaluated or
written. INSERT VALUES is never logged (a replay would write the row again) and changes no
catalog entry; a row that is written is covered with a real engine (tests/integration)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from streamsql import types as t
from streamsql.catalog import Catalog, FileCommandLog, Source
from streamsql.errors import AnalysisError, CatalogError
from streamsql.runtime import results as r
from streamsql.runtime.executors.inserts import ValueInserts
from streamsql.sql import parse


@dataclass
class SmallContext:
    """What INSERT VALUES reaches of the engine before it evaluates a row."""

    data_dir: Path
    catalog: Catalog = field(default_factory=Catalog)

    def __post_init__(self) -> None:
        self.command_log = FileCommandLog(self.data_dir / "commands.jsonl")


@pytest.fixture
def ctx(tmp_path: Path) -> SmallContext:
    c = SmallContext(tmp_path)
    c.catalog.add(Source("S", "STREAM", [t.Column("ID", t.BIGINT, "key"), t.Column("V", t.INTEGER),
                                         t.Column("H", t.Array(t.Struct((t.StructField("KEY", t.STRING),
                                                                          t.StructField("VALUE", t.BYTES)))),
                                                  "headers")],
                         topic="s", key_format="KAFKA", value_format="JSON"))
    c.catalog.add(Source("Lower", "STREAM", [t.Column("ID", t.BIGINT, "key"), t.Column("V", t.INTEGER)],
                         topic="lower", key_format="KAFKA", value_format="JSON"))
    c.catalog.add(Source("RO", "TABLE", [t.Column("ID", t.BIGINT, "key"), t.Column("V", t.INTEGER)],
                         topic="ro", key_format="KAFKA", value_format="JSON", is_source=True))
    return c


def run(ctx: SmallContext, sql: str) -> r.Result:
    [stmt] = parse(sql)
    return ValueInserts(ctx).handlers()[type(stmt)](stmt)  # type: ignore[arg-type]


@pytest.mark.parametrize(("sql", "error", "message"), [
    ("INSERT INTO NOPE (ID, V) VALUES (1, 2);", CatalogError, "Cannot insert values into an unknown stream/table: `NOPE`"),
    ("INSERT INTO LOWER (ID, V) VALUES (1, 2);", CatalogError, 'Did you mean "Lower"?'),
    ("INSERT INTO RO (ID, V) VALUES (1, 2);", AnalysisError, "Cannot insert values into read-only table: RO"),
    ("INSERT INTO S VALUES (1, 2);", AnalysisError, "Cannot insert into HEADER columns: H"),
    ("INSERT INTO S (ID, V) VALUES (1);", AnalysisError, "Expected number columns and values to match: 2, 1"),
    ("INSERT INTO S (ID, ROWPARTITION) VALUES (1, 0);", AnalysisError,
     "Inserting into column `ROWPARTITION` is not allowed."),
    ("INSERT INTO S (ID, W) VALUES (1, 0);", AnalysisError, "Column name W does not exist."),
])
def test_a_refused_row_changes_nothing(ctx: SmallContext, sql: str, error: type[Exception], message: str) -> None:
    before = (sorted(ctx.catalog.source_names()), dict(ctx.catalog.queries))
    with pytest.raises(error) as refused:
        run(ctx, sql)
    assert message in str(refused.value)
    assert (sorted(ctx.catalog.source_names()), dict(ctx.catalog.queries)) == before
    assert ctx.command_log.read_all() == []
