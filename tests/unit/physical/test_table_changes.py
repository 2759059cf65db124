"""The table-changes step's rule, without Spark: upserts pass, a removal becomes a tombstone only
for a key the table holds, the state is read only when a key's first change is a removal."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from streamsql.physical.table_changes import changes
from streamsql.physical.table_changes import key_text


def _rows(*rows: tuple[Any, str | None, int, bool]) -> pa.Table:
    return pa.table({
        "ID": pa.array([r[0] for r in rows], pa.int32()),
        "NAME": pa.array([r[1] for r in rows], pa.string()),
        "ROWTIME": pa.array([r[2] for r in rows], pa.int64()),
        "__WINDOWSTART": pa.array([None] * len(rows), pa.int64()),
        "__WINDOWEND": pa.array([None] * len(rows), pa.int64()),
        "__HAVING": pa.array([r[3] for r in rows], pa.bool_()),
    })


def _ident(key: int) -> str:
    return key_text([key], (None, None))


def test_tombstones_only_for_present_keys_and_reads_only_what_it_needs() -> None:
    held = {_ident(1)}
    reads: list[str] = []

    def present(idents: list[str]) -> list[bool]:
        reads.extend(idents)
        return [ident in held for ident in idents]

    kept, final = changes(_rows((1, None, 5, False),  # held before the batch: a tombstone
                                (2, None, 6, False),  # never held: nothing
                                (3, "c", 7, True),    # an upsert, then its removal: a tombstone
                                (3, None, 8, False),
                                (None, "x", 9, True)),  # no key: not a table row
                          ["ID"], present)
    assert list(zip(kept.column("ID").to_pylist(), kept.column("__TOMBSTONE").to_pylist())) == [
        (1, True), (3, False), (3, True)]
    assert reads == [_ident(1), _ident(2)]  # key 3 began with an upsert: no read
    # key 2 was read absent and stays absent: nothing to write
    assert final == {_ident(1): False, _ident(3): False}


def test_changes_follow_rowtime_order_stably() -> None:
    kept, final = changes(_rows((1, "late", 20, True), (1, "early", 10, True), (1, "same", 20, True)),
                          ["ID"], lambda idents: [False] * len(idents))
    assert kept.column("NAME").to_pylist() == ["early", "late", "same"]
    assert final == {_ident(1): True}


def test_a_key_read_and_ending_as_it_was_is_not_written_and_its_identity_is_made_once() -> None:
    import streamsql.physical.table_changes as tc

    made: list[Any] = []
    real = tc.key_text

    def counting(key: list[Any], window: tuple[int | None, int | None]) -> str:
        made.append(key)
        return real(key, window)

    held = {_ident(1), _ident(2)}
    tc.key_text = counting  # type: ignore[assignment]
    try:
        kept, final = changes(_rows((1, None, 1, False),  # held: a tombstone, then back: held as before
                                    (1, "a", 2, True),
                                    (2, "b", 3, False),  # held, removed: written
                                    (1, "c", 4, True)),
                              ["ID"], lambda idents: [i in held for i in idents])
    finally:
        tc.key_text = real  # type: ignore[assignment]
    assert list(zip(kept.column("ID").to_pylist(), kept.column("__TOMBSTONE").to_pylist())) == [
        (1, True), (1, False), (2, True), (1, False)]
    assert final == {_ident(2): False}
    assert made == [[1], [2]]


def test_float_keys_keep_negative_zero_apart() -> None:
    table = pa.table({"ID": pa.array([0.0, -0.0], pa.float64()), "ROWTIME": pa.array([1, 2], pa.int64()),
                      "__WINDOWSTART": pa.array([None, None], pa.int64()),
                      "__WINDOWEND": pa.array([None, None], pa.int64()), "__HAVING": pa.array([True, True])})
    _kept, final = changes(table, ["ID"], lambda idents: [False] * len(idents))
    assert sorted(final) == sorted([key_text([0.0], (None, None)), key_text([-0.0], (None, None))])
