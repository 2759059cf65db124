"""A pull query's WHERE and projection evaluated in pyarrow over a store's rows
(runtime/pull.py ``ArrowPull``), and catch-ups shared by pull queries arriving together
(runtime/materialized.py ``TableStore.catch_up``). No Spark, no Kafka."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from streamsql import types as t
from streamsql.catalog import Catalog, Source
from streamsql.functions.catalog import builtin_registry
from streamsql.planner.planner import Planner, source_scope
from streamsql.runtime.materialized import TableStore
from streamsql.runtime.pull import ArrowPull, arrow_pull
from streamsql.sql import parse

COLUMNS = [t.Column("ID", t.STRING, "key"), t.Column("N", t.INTEGER), t.Column("BIG", t.BIGINT),
           t.Column("AMOUNT", t.DOUBLE), t.Column("PRICE", t.Decimal(6, 2)), t.Column("RAW", t.BYTES),
           t.Column("TAGS", t.Map(t.STRING, t.INTEGER)), t.Column("DETAIL", t.Struct((t.StructField("A", t.INTEGER),
                                                                                    t.StructField("B", t.STRING)))),
           t.Column("AT", t.TIMESTAMP)]


@pytest.fixture
def catalog() -> Catalog:
    c = Catalog()
    c.add(Source("T", "TABLE", COLUMNS, topic="t", key_format="KAFKA", value_format="JSON"))
    c.add(Source("W", "TABLE", [t.Column("K", t.STRING, "key"), t.Column("CNT", t.BIGINT)], topic="w",
                 key_format="KAFKA", value_format="JSON", window_type="TUMBLING", window_size_ms=10))
    return c


def compiled(catalog: Catalog, sql: str) -> ArrowPull | None:
    [stmt] = parse(sql)
    plan = Planner(catalog, builtin_registry()).plan_query(stmt.query, persistent=False)
    return arrow_pull(stmt.query.where, plan, plan.source, source_scope(plan.source, plan.alias))


ROWS: list[Any] = [
    (["a"], None, None, {"N": 1, "BIG": 2**40, "AMOUNT": 1.5, "PRICE": Decimal("1.5"), "RAW": b"\x01\x02",
                         "TAGS": [("x", 1)], "DETAIL": {"A": 3}, "AT": datetime(2020, 1, 1, tzinfo=UTC)}, 7),
    (["b"], None, None, {"N": None, "BIG": -1, "AMOUNT": float("nan"), "PRICE": None, "RAW": None, "TAGS": None,
                         "DETAIL": None, "AT": None}, 8),
    (["c"], None, None, {"N": 2147483647, "BIG": 3, "AMOUNT": -2.0}, 9),
]


def test_key_lookup_passes_values_through_in_the_spark_paths_shapes(catalog: Catalog) -> None:
    pull = compiled(catalog, "SELECT * FROM T WHERE ID = 'a';")
    assert pull is not None and pull.inputs == (("ID", "string"),)
    [row] = pull.run(ROWS, ["ID"])
    assert row[:5] == ["a", 1, 2**40, 1.5, Decimal("1.50")] and str(row[4]) == "1.50"
    assert row[5:8] == ["AQI=", {"x": 1}, {"A": 3, "B": None}]
    assert isinstance(row[8], datetime) and row[8].tzinfo is None  # as pyspark's collect returns it
    assert [(c.name, str(c.type)) for c in pull.result][:5] == [
        ("ID", "STRING"), ("N", "INTEGER"), ("BIG", "BIGINT"), ("AMOUNT", "DOUBLE"), ("PRICE", "DECIMAL(6, 2)")]


def test_where_and_arithmetic_use_the_readers_translation(catalog: Catalog) -> None:
    pull = compiled(catalog, "SELECT ID, N + 1 AS M, BIG * 0.5 AS HALF FROM T WHERE AMOUNT > 0 OR N IS NULL;")
    assert pull is not None
    # NaN > 0 holds in Spark (NaN orders above every number); N + 1 wraps like Spark's int
    assert pull.run(ROWS, ["ID"]) == [["a", 2, Decimal("549755813888.0")], ["b", None, Decimal("-0.5")]]
    assert [str(c.type) for c in pull.result] == ["STRING", "INTEGER", "DECIMAL(22, 1)"]
    wraps = compiled(catalog, "SELECT ID, N + 1 AS M FROM T WHERE ID = 'c' AND ROWTIME >= 9;")
    assert wraps is not None and wraps.run(ROWS, ["ID"]) == [["c", -2147483648]]


def test_windowed_bounds_are_columns_of_the_batch(catalog: Catalog) -> None:
    pull = compiled(catalog, "SELECT * FROM W WHERE K = 'k' AND WINDOWSTART >= 10 AND WINDOWEND <= 30;")
    assert pull is not None
    rows: list[Any] = [(["k"], start, start + 10, {"CNT": start}, start) for start in (0, 10, 20, 30)]
    assert pull.run(rows, ["K"]) == [["k", 10, 20, 10], ["k", 20, 30, 20]]


@pytest.mark.parametrize("sql", [
    "SELECT ID, UCASE(ID) AS U FROM T WHERE ID = 'a';",  # a function
    "SELECT ID, PRICE + 1 AS P FROM T WHERE ID = 'a';",  # a DECIMAL column in arithmetic
    "SELECT ID FROM T WHERE ID LIKE 'a%';",  # LIKE
    "SELECT ID FROM T WHERE ID IN ('a', UCASE(ID));",  # IN with an expression
    "SELECT ID, DETAIL->A AS A FROM T WHERE ID = 'a';",  # a struct field
])
def test_what_does_not_translate_whole_keeps_sparks_plan(catalog: Catalog, sql: str) -> None:
    assert compiled(catalog, sql) is None


def _store(tmp_path: Path) -> TableStore:
    return TableStore(tmp_path / "t.sqlite")


def test_pull_queries_arriving_during_a_catch_up_share_the_next_one(tmp_path: Path) -> None:
    """Ten callers arrive while a catch-up runs: none may use it (it may have read the topic's
    end before they arrived), all share the one that starts after it."""
    store = _store(tmp_path)
    calls: list[int] = []
    release = [threading.Event(), threading.Event()]

    def follow(*_args: Any, **_kwargs: Any) -> int:
        calls.append(len(calls))
        release[len(calls) - 1].wait(10)
        return 0

    store.follow = follow  # type: ignore[method-assign]  # counts catch-ups; Kafka is not the subject
    first = threading.Thread(target=store.catch_up, args=("", None))
    first.start()
    while not calls:
        time.sleep(0.01)
    done: list[int] = []
    waiters = [threading.Thread(target=lambda i=i: (store.catch_up("", None), done.append(i))) for i in range(10)]
    for w in waiters:
        w.start()
    time.sleep(0.2)
    release[0].set()
    first.join(10)
    while len(calls) < 2:
        time.sleep(0.01)
    assert not done  # the first catch-up started before they arrived: they wait for the second
    release[1].set()
    for w in waiters:
        w.join(10)
    assert sorted(done) == list(range(10)) and len(calls) == 2


def test_a_failed_catch_up_fails_the_callers_waiting_for_it(tmp_path: Path) -> None:
    """Four callers arrive during a catch-up; the one they share next fails (Kafka unreachable):
    all four get its error, and none starts another."""
    store = _store(tmp_path)
    calls: list[int] = []
    release = threading.Event()

    def follow(*_args: Any, **_kwargs: Any) -> int:
        calls.append(1)
        if len(calls) == 1:
            release.wait(10)
            return 0
        time.sleep(0.1)
        raise OSError("broker down")

    store.follow = follow  # type: ignore[method-assign]  # counts catch-ups; Kafka is not the subject
    first = threading.Thread(target=store.catch_up, args=("", None))
    first.start()
    while not calls:
        time.sleep(0.01)
    errors: list[BaseException] = []

    def call() -> None:
        try:
            store.catch_up("", None)
        except OSError as e:
            errors.append(e)

    late = [threading.Thread(target=call) for _ in range(4)]
    for w in late:
        w.start()
    time.sleep(0.2)
    release.set()
    first.join(10)
    for w in late:
        w.join(10)
    assert [str(e) for e in errors] == ["broker down"] * 4 and len(calls) == 2


def test_a_catch_up_asks_kafka_again_only_when_the_count_of_writes_grew(tmp_path: Path) -> None:
    """``writes`` counts what the server knows was written (committed micro-batches, acknowledged
    inserts): while it has not grown since the last catch-up began, and that was recent, the
    store already holds all of it; a write counted while a catch-up runs (after it read the
    count) makes the next caller catch up again; past ``recheck_after_s`` Kafka is asked anyway
    (a writer the count cannot see); without a count every call catches up, as before."""
    store = _store(tmp_path)
    written = [0]
    calls: list[int] = []

    def follow(*_args: Any, **_kwargs: Any) -> int:
        calls.append(1)
        if len(calls) == 3:
            written[0] += 1  # acknowledged while this catch-up runs: it may have read the ends before
        return 0

    store.follow = follow  # type: ignore[method-assign]  # counts catch-ups; Kafka is not the subject

    def pull(recheck: float = 60.0) -> int:
        store.catch_up("", None, writes=lambda: written[0], recheck_after_s=recheck)  # type: ignore[arg-type]
        return len(calls)

    assert [pull(), pull(), pull()] == [1, 1, 1]  # the first catches up; nothing written since
    written[0] += 1
    assert [pull(), pull()] == [2, 2]
    written[0] += 1
    assert pull() == 3  # ... during which one more write was acknowledged
    assert [pull(), pull()] == [4, 4]
    time.sleep(0.06)
    assert pull(recheck=0.05) == 5 and pull(recheck=0.05) == 5
    for expected in (6, 7, 8):
        store.catch_up("", None)  # type: ignore[arg-type]
        assert len(calls) == expected
