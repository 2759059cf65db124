"""The join tasks of physical/joins.py on their own: a bucket's records in, joined rows out, the
state in a dict between micro-batches (the operator keeps it in Spark's MapState)."""

from __future__ import annotations

from streamsql.physical.joins import (
    BucketState,
    MemoryStore,
    Record,
    StreamTableJoin,
    TableTableJoin,
    WindowJoin,
    arrival_order,
    run,
)

MINUTE = 60_000


def rec(side: int, key: str | None, ts: int, row: str, off: int = 0, part: int = 0, tomb: bool = False) -> Record:
    return (side, part, off, ts, tomb, key, row)


def feed(task, records: list[Record], store: MemoryStore | None = None, batch: int = 1):  # type: ignore[no-untyped-def]
    """Run ``records`` through ``task`` ``batch`` at a time (one micro-batch each), state kept in
    ``store``; the joined rows as (time, left, right, key)."""
    store = store if store is not None else MemoryStore()
    out = []
    for i in range(0, len(records), batch):
        state = BucketState(store)
        out += run(task, records[i:i + batch], state)
        state.flush()
    return [(ts, left, right, key) for ts, _seq, left, right, _deleted, key, _side in out]


def out_of_order(second_left_ts: int) -> list[Record]:
    """ksqlDB's out-of-order sequence: A/a match, B moves stream time far ahead, C and D are late."""
    return [rec(0, "0", 0, "A", off=0), rec(1, "0", MINUTE, "a", off=0), rec(0, "1", 330_000, "B", off=1),
            rec(0, "2", 90_000, "C", off=2), rec(1, "2", 90_000, "c", off=1), rec(0, "3", second_left_ts, "D", off=3),
            rec(1, "3", MINUTE, "d", off=2)]


def test_a_left_join_with_grace_emits_an_unmatched_row_when_its_window_closes() -> None:
    join = WindowJoin("LEFT", MINUTE, MINUTE, MINUTE)
    store = MemoryStore()
    assert feed(join, [rec(0, "k", 0, "L0")], store) == []  # waits: a match may still come
    # another key's record moves stream time to 2 min: L0's window (0 + 1 min + 1 min grace) is not closed
    assert feed(join, [rec(1, "other", 2 * MINUTE, "r")], store) == []
    # past it: L0 is emitted with nulls, at its own time
    assert feed(join, [rec(1, "other", 2 * MINUTE + 1, "r2")], store) == [(0, "L0", None, "k")]
    # a record matched before its window closes is never emitted with nulls
    assert feed(join, [rec(0, "m", 3 * MINUTE, "L1"), rec(1, "m", 3 * MINUTE + 10, "R1"),
                       rec(1, "x", 10 * MINUTE, "R9")], store) == [(3 * MINUTE + 10, "L1", "R1", "m")]


def test_a_left_join_without_grace_emits_an_unmatched_row_at_once() -> None:
    """ksqlDB keeps Kafka Streams' behaviour before its spurious-result fix for WITHIN without a
    GRACE PERIOD: the null row first, the joined row when the match arrives."""
    join = WindowJoin("LEFT", MINUTE, MINUTE, None)
    assert feed(join, [rec(0, "k", 0, "L0"), rec(1, "k", 10, "R0")]) == [(0, "L0", None, "k"), (10, "L0", "R0", "k")]


def test_out_of_order_records_follow_stream_time_and_the_window_stores_retention() -> None:
    """ksqlDB's 'out of order and custom grace period' sequence, WITHIN 1 minute GRACE PERIOD 1
    minute: C and D arrive after B moved stream time to 330 s. Their windows are already closed,
    so a LEFT join emits them with nulls at once; the left store no longer holds C (older than
    330 s minus before + after + grace), so c finds nothing, and neither does an INNER join."""
    assert feed(WindowJoin("INNER", MINUTE, MINUTE, MINUTE), out_of_order(MINUTE)) == [(MINUTE, "A", "a", "0")]
    assert feed(WindowJoin("LEFT", MINUTE, MINUTE, MINUTE), out_of_order(MINUTE)) == [
        (MINUTE, "A", "a", "0"), (90_000, "C", None, "2"), (MINUTE, "D", None, "3")]


def test_a_right_join_mirrors_the_left_one() -> None:
    records = out_of_order(MINUTE)
    records[-2:] = [rec(1, "3", MINUTE, "d", off=2), rec(0, "3", 90_000, "D", off=3)]
    assert feed(WindowJoin("RIGHT", MINUTE, MINUTE, MINUTE), records) == [
        (MINUTE, "A", "a", "0"), (90_000, None, "c", "2"), (MINUTE, None, "d", "3"), (90_000, "D", "d", "3")]


def test_matches_come_in_time_order_within_the_window() -> None:
    join = WindowJoin("INNER", 100, 100, 1_000)
    got = feed(join, [rec(1, "k", 50, "late"), rec(1, "k", 10, "early"), rec(1, "k", 500, "outside"),
                      rec(0, "k", 60, "L")])
    assert got == [(60, "L", "early", "k"), (60, "L", "late", "k")]


def test_idle_keys_leave_the_state_once_no_record_can_match_them() -> None:
    join = WindowJoin("INNER", 10, 10, 0)
    store = MemoryStore()
    feed(join, [rec(0, "old", 0, "x"), rec(1, "old", 5, "y")], store)
    assert "kold" in store.values
    feed(join, [rec(0, "new", 100, "x"), rec(1, "new", 100, "y")], store)
    assert "kold" not in store.values and "knew" in store.values


def test_the_state_carries_over_to_a_new_operator_instance() -> None:
    """All a join needs between micro-batches is in its store (the checkpointed MapState): a new
    task object, as after a restart, continues exactly."""
    records = out_of_order(MINUTE)
    expected = feed(WindowJoin("LEFT", MINUTE, MINUTE, MINUTE), records)
    store = MemoryStore()
    got = feed(WindowJoin("LEFT", MINUTE, MINUTE, MINUTE), records[:3], store)
    got += feed(WindowJoin("LEFT", MINUTE, MINUTE, MINUTE), records[3:], store)
    assert got == expected


def test_arrival_order_keeps_each_partition_in_offset_order_and_takes_the_earliest_head() -> None:
    records = [rec(0, "k", 30, "l2", off=2), rec(0, "k", 50, "l1", off=1), rec(1, "k", 40, "r1", off=7),
               rec(1, "k", 40, "r0", off=6, part=1), rec(0, "k", 40, "l3", off=3)]
    # left partition 0 starts with offset 1 (time 50): the right side's time-40 heads go first
    # (right before left at equal times), then the left partition in offset order
    assert [r[6] for r in arrival_order(records)] == ["r1", "r0", "l1", "l2", "l3"]


def test_a_stream_table_join_sees_the_table_as_of_each_record() -> None:
    join = StreamTableJoin("LEFT")
    got = feed(join, [rec(0, "k", 1, "s0", off=0), rec(1, "k", 2, "t1", off=0), rec(0, "k", 3, "s1", off=1),
                      rec(1, "k", 4, "", off=1, tomb=True), rec(0, "k", 5, "s2", off=2)], batch=5)
    assert got == [(1, "s0", None, "k"), (3, "s1", "t1", "k"), (5, "s2", None, "k")]
    assert feed(StreamTableJoin("INNER"), [rec(0, "k", 1, "s0"), rec(1, "k", 2, "t1"), rec(0, "k", 3, "s1")]) == [
        (3, "s1", "t1", "k")]


def test_a_table_table_join_emits_each_change_and_a_tombstone_when_the_row_goes() -> None:
    join = TableTableJoin("INNER")
    store = MemoryStore()
    state = BucketState(store)
    out = run(join, [rec(0, "k", 1, "l1"), rec(1, "k", 2, "r1", off=0), rec(0, "k", 3, "del", off=1, tomb=True)],
              state)
    # each row carries the headers of the record that produced it: the right update, then the left
    # delete's own (not those of the last left row)
    assert [(ts, left, right, deleted, trigger) for ts, _s, left, right, deleted, _k, trigger in out] == [
        (2, "l1", "r1", False, "r1"), (3, "l1", "r1", True, "del")]


def test_a_windowed_join_row_carries_the_headers_of_the_record_that_produced_it() -> None:
    """ksqlDB's headers case: the left record, then the right one joins it; the row carries the
    right record's headers (Kafka Streams forwards the current record's), an unmatched row its own."""
    state = BucketState(MemoryStore())
    out = run(WindowJoin("LEFT", 10_000, 10_000, None), [rec(0, "0", 10, "L"), rec(1, "0", 11, "R", off=0),
                                                        rec(0, "1", 12, "M", off=1)], state)
    assert [(ts, left, right, trigger) for ts, _s, left, right, _d, _k, trigger in out] == [
        (10, "L", None, "L"), (11, "L", "R", "R"), (12, "M", None, "M")]


def test_a_row_emitted_when_its_window_closes_carries_the_headers_of_the_record_that_closed_it() -> None:
    """Kafka Streams emits the waiting outer rows while processing the record that moved stream
    time past their window, and forwards them with that record's headers."""
    state = BucketState(MemoryStore())
    out = run(WindowJoin("LEFT", MINUTE, MINUTE, MINUTE), [rec(0, "k", 0, "L0"), rec(1, "x", 3 * MINUTE, "late")],
              state)
    assert [(ts, left, right, trigger) for ts, _s, left, right, _d, _k, trigger in out] == [(0, "L0", None, "late")]


def test_the_output_names_the_side_that_produced_a_row_and_keeps_other_triggers_json() -> None:
    """Spark reads a joined row's headers from the left or right row when that row produced it
    (``__TRIGSIDE``) and parses ``__TRIG`` only for a delete or a window closed by another record."""
    import pandas as pd

    from streamsql.physical.joins import _output

    left, right, other = '{"A":1}', '{"B":2}', '{"C":3}'
    out = [(1, 0, left, right, False, "k", left), (2, 1, left, right, False, "k", right),
           (3, 2, left, None, True, "k", other), (4, 3, None, right, False, "k", '{"B":2}'),
           (5, 4, None, None, True, "k", None)]
    frame = next(_output(out))
    assert [None if v is pd.NA else v for v in frame["__TRIGSIDE"].tolist()] == [0, 1, None, 1, 0]
    assert frame["__TRIG"].tolist() == [None, None, other, None, None]
    assert frame["__ROWS"].tolist() == ['{"L":{"A":1},"R":{"B":2}}', '{"L":{"A":1},"R":{"B":2}}',
                                        '{"L":{"A":1},"R":null}', '{"L":null,"R":{"B":2}}', '{"L":null,"R":null}']


def test_input_frames_become_records_with_python_values() -> None:
    import pandas as pd

    from streamsql.physical.joins import _input_records

    frame = pd.DataFrame({"__SIDE": pd.Series([0, 1], dtype="int32"), "__JK": ["a", None],
                          "__TS": [10, 20], "__PART": pd.Series([1, 0], dtype="int32"), "__OFF": [5, 6],
                          "__TOMB": [False, True], "__ROW": ['{"X":1}', '{"X":2}']})
    records = _input_records(iter([frame]))
    assert records == [(0, 1, 5, 10, False, "a", '{"X":1}'), (1, 0, 6, 20, True, None, '{"X":2}')]
    assert all(type(v) is int for v in records[0][:4]) and type(records[1][4]) is bool


class _CountingStore(MemoryStore):
    """A store that remembers which names each batch read."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    def get_many(self, names: list[str]) -> list[bytes | None]:
        self.reads += names
        return super().get_many(names)


def test_a_stream_table_join_reads_only_keys_whose_first_record_is_a_stream_record() -> None:
    """A key whose table row comes first in the batch is written before it is read: no read."""
    store = _CountingStore()
    join = StreamTableJoin("LEFT")
    assert feed(join, [rec(1, "a", 1, "ta"), rec(1, "b", 1, "tb", off=1), rec(0, "a", 2, "s1"),
                       rec(0, "c", 3, "s2", off=1)], store, batch=4) == [(2, "s1", "ta", "a"), (3, "s2", None, "c")]
    assert sorted(n for n in store.reads if n.startswith("k")) == ["kc"]
    # the next batch reads what the first one wrote
    store.reads.clear()
    assert feed(join, [rec(0, "b", 4, "s3", off=2), rec(1, "a", 5, "ta2", off=2), rec(0, "a", 6, "s4", off=3)],
                store, batch=3) == [(4, "s3", "tb", "b"), (6, "s4", "ta2", "a")]
    assert sorted(n for n in store.reads if n.startswith("k")) == ["kb"]
