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


STRING_KEYED = Source("MATVIEW", "TABLE", [t.Column("ID", t.STRING, "key"), t.Column("V0", t.STRING)], topic="m",
                      key_format="KAFKA", value_format="JSON")
TWO_KEYS = Source("AGG", "TABLE", [t.Column("ID1", t.STRING, "key"), t.Column("ID2", t.INTEGER, "key"),
                                   t.Column("COUNT", t.BIGINT)], topic="a", key_format="JSON", value_format="JSON")


def _path(where: str | None, table: Source = STRING_KEYED, scans: bool = False, ranges: bool = True) -> str:
    from streamsql.runtime.pull import check_access_path

    return check_access_path(parse_expression(where) if where else None, table, scans, ranges)


def _error(where: str | None, table: Source = STRING_KEYED, ranges: bool = True) -> str:
    import pytest

    from streamsql.errors import AnalysisError

    with pytest.raises(AnalysisError) as e:
        _path(where, table, False, ranges)
    return str(e.value)


def test_access_path_with_table_scans_disabled_follows_ksqldb() -> None:
    """The cases of ksqlDB's pull-queries-with-range-scan RQTT file."""
    assert _path("ID = '1'") == "key-lookup"
    assert _path("ID IN ('1', '2')") == "key-lookup"
    assert _path("ID < '12'") == "range-scan"
    assert _path("ID < '12' AND V0 > '10'") == "range-scan"
    assert _path("ID1 = '11' AND ID2 = 10", TWO_KEYS) == "key-lookup"
    assert "Query requires table scan to be enabled" in _error("ID <= '10'", ranges=False)
    assert "Query requires table scan to be enabled" in _error(None)
    assert "Query requires table scan to be enabled" in _error("ID <= '11' OR ID >= '13'")
    assert "Query requires table scan to be enabled" in _error("ID1 <= '11' AND ID2 >= 10", TWO_KEYS)
    assert "cannot be combined with other comparisons such as an IN predicate" in _error("ID >= '11' AND ID <= '13'")
    assert "WHERE clause missing key column for disjunct: (V0 >= '13a')" in _error("V0 >= '13a'")
    assert "Multi-column sources must specify every key" in _error("ID1 = '11'", TWO_KEYS)
    assert "A comparison must be between a key column and a resolvable expression" in _error("ID = V0")


def test_access_path_with_table_scans_enabled_never_fails() -> None:
    for where in (None, "ID <= '11' OR ID >= '13'", "V0 >= 'v13a'", "ID = V0"):
        assert _path(where, scans=True) == "table-scan"
    assert _path("ID >= '11' AND ID <= '13'", scans=True) == "range-scan"  # ksqlDB keeps the first bound
    assert _path("ID <= '10'", scans=True, ranges=False) == "table-scan"
    assert _path("ID <= '10'", TABLE, scans=True) == "table-scan"  # ranges over numbers are scans in ksqlDB


def test_key_lookup_values_must_be_keys() -> None:
    assert "Primary key columns can not be NULL: (ID = null)" in _error("ID IN (NULL)")
    assert "'10' can not be converted to the type of the key column: ID BIGINT KEY" in _error("ID IN ('10', 8)", TABLE)
    assert _path("ID IN (10, 8)", TABLE) == "key-lookup"


def test_double_keys_are_looked_up_as_doubles() -> None:
    doubles = Source("D", "TABLE", [t.Column("ID", t.DOUBLE, "key"), t.Column("V", t.STRING)], topic="d",
                     key_format="KAFKA", value_format="JSON")
    assert lookup_for(parse_expression("ID IN (10, 8)"), doubles).keys == [[10.0], [8.0]]
    assert lookup_for(parse_expression("ID = 10.5"), TABLE) == Lookup()  # no BIGINT key is 10.5


def test_like_on_a_non_string_column_is_rejected() -> None:
    from streamsql.runtime.pull import check_access_path

    import pytest

    from streamsql.errors import AnalysisError

    with pytest.raises(AnalysisError, match="The column type for Like condition must be VARCHAR. The column type "
                                            "is BIGINT"):
        check_access_path(parse_expression("ID LIKE 12"), TABLE, True, True)
    assert check_access_path(parse_expression("V LIKE 'a%'"), TABLE, True, True) == "table-scan"


def test_scan_properties_must_be_booleans() -> None:
    import pytest

    from streamsql.errors import ConfigError
    from streamsql.runtime.executors.transient import enabled

    assert enabled("ksql.query.pull.table.scan.enabled", "FALSE") is False
    assert enabled("ksql.query.pull.table.scan.enabled", " true") is True
    with pytest.raises(ConfigError, match="Invalid value yes for configuration ksql.query.pull.table.scan.enabled"):
        enabled("ksql.query.pull.table.scan.enabled", "yes")
