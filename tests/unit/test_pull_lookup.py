"""Pull queries: which store rows a WHERE selects (runtime/pull.py) and that the store reads
them through its indexes (runtime/materialized.py). No Spark, no Kafka."""

from __future__ import annotations

from pathlib import Path

from streamsql import types as t
from streamsql.catalog import Source
from streamsql.runtime.materialized import Lookup, TableStore
from streamsql.runtime.pull import lookup_for
from streamsql.sql import parse_expression

TABLE = Source("T", "TABLE", [t.Column("ID", t.BIGINT, "key"), t.Column("V", t.STRING)], topic="t",
               key_format="KAFKA", value_format="JSON")


def test_key_equality_in_list_range_and_window_bounds() -> None:
    assert lookup_for(parse_expression("ID = 5"), TABLE).keys == [[5]]
    assert lookup_for(parse_expression("5 = ID AND V = 'x'"), TABLE).keys == [[5]]
    assert lookup_for(parse_expression("ID IN (1, 2)"), TABLE).keys == [[1], [2]]
    r = lookup_for(parse_expression("ID > 3 AND ID <= 9"), TABLE)
    assert (r.key_low, r.key_high) == ((3, False), (9, True))
    w = lookup_for(parse_expression("WINDOWSTART >= 1000 AND WINDOWSTART < 2000"), TABLE)
    assert (w.wstart_low, w.wstart_high) == ((1000, True), (2000, False))


def test_conditions_it_cannot_use_leave_a_scan() -> None:
    assert lookup_for(parse_expression("ID = 5 OR ID = 6"), TABLE) == Lookup()
    assert lookup_for(parse_expression("ID = '5'"), TABLE) == Lookup()  # literal of another type
    assert lookup_for(parse_expression("V = 'x'"), TABLE) == Lookup()


def test_store_reads_selected_rows_through_indexes(tmp_path: Path) -> None:
    store = TableStore(tmp_path / "t.sqlite")
    store.apply(0, [([i], (None, None), {"V": str(i)}, i) for i in range(10)], [])
    assert [k for k, *_ in store.rows(Lookup(keys=[[3], [7]]))] == [[3], [7]]
    assert sorted(k[0] for k, *_ in store.rows(Lookup(key_low=(7, False)))) == [8, 9]
    assert "rows_key" in store.explain(Lookup(keys=[[3]]))
    assert "rows_k0" in store.explain(Lookup(key_low=(7, False)))
    store.close()
