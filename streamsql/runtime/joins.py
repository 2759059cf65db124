"""The streaming DataFrame of a join (planner/joins.py): two inputs, one stateful operator. An
input is a Kafka source or, in an n-way join, the DataFrame of the joins before it (one
``transformWithStateInPandas`` per JOIN, chained in one Spark query).

Both sides are read in one Spark query and unioned into a narrow shape: which side, the join key
(as text, so both sides group together), the record's time and offset, whether it is a tombstone,
and the whole row as JSON (``to_json``/``from_json`` round-trip every SQL type exactly, so the
stateful step only handles plain strings). ``transformWithStateInPandas`` (:class:`JoinOperator`)
then groups by join key and walks each key's records in time order, keeping per key:

* stream-table: the table's current row (a tombstone deletes it); a stream record emits itself
  with that row (INNER: only when there is one; LEFT: with nulls otherwise);
* stream-stream: the records of each side within the WITHIN window (plus grace); a record emits
  one joined row per record of the other side in range, in their arrival order (LEFT/RIGHT/FULL:
  a record with no match yet emits with nulls, as ksqlDB did before its spurious-result fix);
* table-table: both sides' current rows; every change of either emits the joined row, or a
  tombstone (carrying the last rows, so the key columns are set) when it stops existing.

Join columns (and a synthetic ROWKEY) are filled from the join key when their side is missing.

Spark checkpoints that state with the query's offsets, so a restarted query joins as if it had
never stopped. The output has the joined source's columns (``<ALIAS>_<COLUMN>``), each side's
pseudo columns, and the stream's ROWTIME/ROWPARTITION/ROWOFFSET/__HEADERS for the sink.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.streaming import StatefulProcessor
from pyspark.sql.types import BinaryType, StructField, StructType

from streamsql import types as t
from streamsql.planner.expressions import quote
from streamsql.planner.joins import SYNTHETIC_KEY, JoinSide, JoinSpec, leftmost_column, side_columns

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

HEADERS_COL = "__HEADERS"
TOMBSTONE_COL = "__TOMBSTONE"
#: within equal timestamps, table updates are applied before stream records (Kafka Streams
#: processes the table's record first when its timestamp is not later)
_TABLE_FIRST = {0: 1, 1: 0}
#: stream-stream joins keep records this long past the window when no GRACE PERIOD is given
DEFAULT_GRACE_MS = 24 * 3600 * 1000


def _narrow(df: DataFrame, side: JoinSide, tag: int) -> DataFrame:
    cols = [quote(name) for name, _ty, _joined in side_columns(side)] + [HEADERS_COL]
    return df.selectExpr(
        f"{tag} AS __SIDE",
        f"CAST({side.key_sql} AS STRING) AS __JK",
        f"CAST({t.ROWTIME} AS BIGINT) AS __TS",
        f"coalesce(CAST({t.ROWOFFSET} AS BIGINT), -1) AS __OFF",
        f"{TOMBSTONE_COL} AS __TOMB",
        f"to_json(struct({', '.join(cols)})) AS __ROW",
    )


def _row_schema(side: JoinSide, spark_type: Callable[[t.SqlType], str]) -> str:
    fields = [f"{quote(name)}: {spark_type(ty)}" for name, ty, _joined in side_columns(side)]
    fields.append(f"{HEADERS_COL}: array<struct<KEY: string, VALUE: binary>>")
    return f"struct<{', '.join(fields)}>"


def joined_dataframe(spec: JoinSpec, left_df: DataFrame, right_df: DataFrame) -> DataFrame:
    """The join's rows as a streaming DataFrame in the joined source's shape."""
    if spec.foreign_key:
        joined = _foreign_key_join(spec, left_df, right_df)
    else:
        joined = _key_join(spec, left_df, right_df)
    return _joined_rows(spec, joined)


def _key_join(spec: JoinSpec, left_df: DataFrame, right_df: DataFrame) -> DataFrame:
    """Both inputs by the join key, one operator."""
    union = _narrow(left_df, spec.left, 0).unionByName(_narrow(right_df, spec.right, 1))
    if spec.table_table:
        step = _table_table_step(spec.kind)
    elif spec.stream_table:
        step = _table_step(spec.kind)
    else:
        step = _window_step(spec)
    return union.groupBy("__JK").transformWithStateInPandas(
        statefulProcessor=JoinOperator(step), outputStructType=OUTPUT_SCHEMA, outputMode="Append", timeMode="None")


def _foreign_key_join(spec: JoinSpec, left_df: DataFrame, right_df: DataFrame) -> DataFrame:
    """A foreign-key table-table join, as Kafka Streams runs it with subscription topics: the
    left table's rows, by their primary key, become subscriptions to a foreign key
    (:class:`SubscriptionOperator`: a changed foreign key retracts the old one); subscriptions and
    the right table's rows, by foreign key, meet in :class:`ForeignKeyOperator`."""
    left = spec.left
    keys = ", ".join(quote(c.name) for c in left.source.key_columns)
    cols = [quote(name) for name, _ty, _joined in side_columns(left)] + [HEADERS_COL]
    lefts = left_df.selectExpr(
        f"to_json(struct({keys})) AS __PK", f"CAST({left.key_sql} AS STRING) AS __FK",
        f"CAST({t.ROWTIME} AS BIGINT) AS __TS", f"coalesce(CAST({t.ROWOFFSET} AS BIGINT), -1) AS __OFF",
        f"{TOMBSTONE_COL} AS __TOMB", f"to_json(struct({', '.join(cols)})) AS __ROW")
    subscriptions = lefts.groupBy("__PK").transformWithStateInPandas(
        statefulProcessor=SubscriptionOperator(), outputStructType=SUBSCRIPTION_SCHEMA, outputMode="Append",
        timeMode="None")
    rights = _narrow(right_df, spec.right, 1).selectExpr(
        "__SIDE", "__JK", "CAST(NULL AS STRING) AS __PK", "'' AS __KIND", "__TS", "__OFF", "__TOMB", "__ROW")
    union = subscriptions.selectExpr(
        "0 AS __SIDE", "__JK", "__PK", "__KIND", "__TS", "__OFF", "__KIND = 'delete' AS __TOMB", "__ROW",
    ).unionByName(rights)
    return union.groupBy("__JK").transformWithStateInPandas(
        statefulProcessor=ForeignKeyOperator(spec.kind), outputStructType=OUTPUT_SCHEMA, outputMode="Append",
        timeMode="None")


def _joined_rows(spec: JoinSpec, joined: DataFrame) -> DataFrame:
    """The join operator's rows in the joined source's shape."""

    def spark_type(ty: t.SqlType) -> str:
        return t.to_spark(ty).simpleString()

    parsed = joined.selectExpr(
        "__TS", "__SEQ", "__DEL", "__KEY",
        f"from_json(__L, '{_row_schema(spec.left, spark_type)}') AS __LROW",
        f"from_json(__R, '{_row_schema(spec.right, spark_type)}') AS __RROW",
    )
    exprs: list[str] = []
    if spec.synthetic_key is not None:
        exprs.append(f"CAST(__KEY AS {spark_type(spec.synthetic_key)}) AS {quote(SYNTHETIC_KEY)}")
    for side, row in ((spec.left, "__LROW"), (spec.right, "__RROW")):
        for name, ty, joined_name in side_columns(side):
            value = f"{row}.{quote(name)}"
            if joined_name in spec.key_candidates:  # a join column holds the join key even when its side is missing
                value = f"coalesce({value}, CAST(__KEY AS {spark_type(ty)}))"
            exprs.append(f"{value} AS {quote(joined_name)}")
    exprs += [
        f"__TS AS {t.ROWTIME}",
        # the first source's position, or the right one's when an outer join has no left row
        f"coalesce(__LROW.{quote(leftmost_column(spec.left, t.ROWPARTITION))}, __RROW.{t.ROWPARTITION}) "
        f"AS {t.ROWPARTITION}",
        f"coalesce(__LROW.{quote(leftmost_column(spec.left, t.ROWOFFSET))}, __RROW.{t.ROWOFFSET}) AS {t.ROWOFFSET}",
        f"coalesce(__LROW.{HEADERS_COL}, array()) AS {HEADERS_COL}",
        f"__DEL AS {TOMBSTONE_COL}",
    ]
    return parsed.selectExpr(*exprs)


# --- the stateful steps (run in Spark's Python workers) -------------------------------------------

#: what the join operator emits per joined row: its time, the input's offset, both sides' rows as
#: JSON, whether it is a tombstone, and the join key
OUTPUT_SCHEMA = "__TS long, __SEQ long, __L string, __R string, __DEL boolean, __KEY string"
#: the join state's layout in a checkpoint (``physical/builder.check_join_checkpoint``): one
#: pickled value per join key in a ``transformWithState`` ValueState. Earlier versions kept it in
#: ``applyInPandasWithState``'s group state, which Spark allows only once per query.
JOIN_STATE = "transformWithState-value-1"


class _KeyState:
    """The join steps' view of a key's state (``exists``, ``get``, ``update``, ``remove``) over a
    ``transformWithState`` ValueState holding one pickled value."""

    def __init__(self, value: Any) -> None:
        self._value = value

    @property
    def exists(self) -> bool:
        return bool(self._value.exists())

    @property
    def get(self) -> tuple[bytes]:
        return (self._value.get()[0],)

    def update(self, value: tuple[bytes]) -> None:
        self._value.update(value)

    def remove(self) -> None:
        self._value.clear()


#: the columns of the join operator's input, in ``_narrow``'s order
INPUT_COLUMNS = ("__SIDE", "__JK", "__TS", "__OFF", "__TOMB", "__ROW")
#: a foreign-key join's inputs: the left rows by primary key; subscriptions and right rows by
#: foreign key
SUBSCRIBE_COLUMNS = ("__PK", "__FK", "__TS", "__OFF", "__TOMB", "__ROW")
SUBSCRIPTION_SCHEMA = "__JK string, __PK string, __KIND string, __TS long, __OFF long, __ROW string"
FOREIGN_KEY_COLUMNS = ("__SIDE", "__JK", "__PK", "__KIND", "__TS", "__OFF", "__TOMB", "__ROW")


def _named(pdfs: Iterator[Any], columns: tuple[str, ...] = INPUT_COLUMNS) -> Iterator[Any]:
    """The input chunks with their column names (Spark may name them by position, ``_0``...)."""
    for pdf in pdfs:
        if columns[0] not in pdf.columns and len(pdf.columns) >= len(columns):
            pdf = pdf.iloc[:, -len(columns):]
            pdf.columns = list(columns)
        yield pdf


class SubscriptionOperator(StatefulProcessor):
    """A foreign-key join's first operator, per left primary key: which foreign key the left row
    refers to now. Each change becomes a subscription record for the second operator, sent to
    its foreign key: ``new`` (the key did not exist), ``update``, ``delete`` (to the foreign key
    it had), and ``retract`` (to the old foreign key, when the row moved to another)."""

    def init(self, handle: Any) -> None:
        self.state = handle.getValueState("subscription", StructType([StructField("s", BinaryType())]))

    def handleInputRows(self, key: Any, rows: Any, timerValues: Any = None) -> Iterator[Any]:
        import pandas as pd

        st = _KeyState(self.state)
        fk, exists = pickle.loads(st.get[0]) if st.exists else (None, False)
        records = sorted(((int(ts), int(off), None if f is None or f != f else str(f), bool(tomb), row)
                          for pdf in _named(rows, SUBSCRIBE_COLUMNS)
                          for f, ts, off, tomb, row in zip(pdf["__FK"], pdf["__TS"], pdf["__OFF"], pdf["__TOMB"],
                                                           pdf["__ROW"])), key=lambda r: (r[0], r[1]))
        out: list[tuple[Any, ...]] = []
        for ts, off, new_fk, tomb, row in records:
            if tomb:
                if exists:
                    out.append((fk, "delete", ts, off, row))
                fk, exists = None, False
                continue
            if exists and fk is not None and fk != new_fk:
                out.append((fk, "retract", ts, off, row))
            out.append((new_fk, "update" if exists else "new", ts, off, row))
            fk, exists = new_fk, True
        if exists:
            st.update((pickle.dumps((fk, exists)),))
        elif st.exists:
            st.remove()
        if out:
            jk, kind, ts_, off_, row_ = zip(*out)
            yield pd.DataFrame({"__JK": list(jk), "__PK": [key[0]] * len(out), "__KIND": list(kind),
                                "__TS": list(ts_), "__OFF": list(off_), "__ROW": list(row_)})

    def close(self) -> None:
        pass


class ForeignKeyOperator(StatefulProcessor):
    """A foreign-key join's second operator, per foreign key: the right row and the left rows
    subscribed to it. A left change emits its joined row (INNER without a right row: nothing for
    a new key, a tombstone for an updated one; LEFT: the row with nulls), a left delete a
    tombstone, and a right change one row per subscribed left row (INNER, right deleted:
    tombstones), at the changing record's time, as Kafka Streams' foreign-key join."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def init(self, handle: Any) -> None:
        self.state = handle.getValueState("foreign_key", StructType([StructField("s", BinaryType())]))

    def handleInputRows(self, key: Any, rows: Any, timerValues: Any = None) -> Iterator[Any]:
        st = _KeyState(self.state)
        right, lefts = pickle.loads(st.get[0]) if st.exists else (None, {})
        records = sorted(((int(side), str(kind), pk, int(ts), int(off), bool(tomb), row)
                          for pdf in _named(rows, FOREIGN_KEY_COLUMNS)
                          for side, kind, pk, ts, off, tomb, row in zip(
                              pdf["__SIDE"], pdf["__KIND"], pdf["__PK"], pdf["__TS"], pdf["__OFF"], pdf["__TOMB"],
                              pdf["__ROW"])),
                         key=lambda r: (r[3], _TABLE_FIRST[r[0]], r[4]))
        out: list[tuple[Any, ...]] = []
        left_join = self.kind == "LEFT"
        for side, kind, pk, ts, off, tomb, row in records:
            if side == 1:
                if key[0] is None:
                    continue
                right = None if tomb else row
                for lrow in lefts.values():
                    if right is not None or left_join:
                        out.append((ts, off, lrow, right, False))
                    else:
                        out.append((ts, off, lrow, None, True))
                continue
            if kind == "retract":
                lefts.pop(pk, None)
            elif kind == "delete":
                lefts.pop(pk, None)
                out.append((ts, off, row, None, True))
            else:
                if key[0] is not None:
                    lefts[pk] = row
                if key[0] is not None and right is not None:
                    out.append((ts, off, row, right, False))
                elif left_join:
                    out.append((ts, off, row, None, False))
                elif kind == "update":
                    out.append((ts, off, row, None, True))
        if right is None and not lefts:
            if st.exists:
                st.remove()
        else:
            st.update((pickle.dumps((right, lefts)),))
        yield from _output(out, key[0])

    def close(self) -> None:
        pass


class JoinOperator(StatefulProcessor):
    """The ``StatefulProcessor`` of one JOIN: one call per join key and micro-batch, running the
    step (stream-table, table-table or windowed stream-stream) over that key's new records. Spark
    runs several ``transformWithState`` operators in one query, so an n-way join chains one per
    JOIN."""

    def __init__(self, step: Callable[..., Iterator[Any]]) -> None:
        self.step = step

    def init(self, handle: Any) -> None:
        self.state = handle.getValueState("join", StructType([StructField("s", BinaryType())]))

    def handleInputRows(self, key: Any, rows: Any, timerValues: Any = None) -> Iterator[Any]:
        yield from self.step(key, _named(rows), _KeyState(self.state))

    def close(self) -> None:
        pass


def _records(pdfs: Iterator[Any]) -> list[tuple[int, int, int, bool, str]]:
    """This key's new records, in the order the join must see them."""
    rows: list[tuple[int, int, int, bool, str]] = []
    for pdf in pdfs:
        for side, ts, off, tomb, row in zip(pdf["__SIDE"], pdf["__TS"], pdf["__OFF"], pdf["__TOMB"], pdf["__ROW"]):
            rows.append((int(side), int(ts), int(off), bool(tomb), row))
    rows.sort(key=lambda r: (r[1], _TABLE_FIRST[r[0]], r[2]))
    return rows


def _output(out: list[tuple[Any, ...]], key: Any) -> Iterator[Any]:
    """Rows (ts, seq, left JSON, right JSON[, deleted]) of join key ``key`` as the step's output."""
    import pandas as pd

    if out:
        rows = [r if len(r) == 5 else (*r, False) for r in out]
        ts, seq, left, right, deleted = zip(*rows)
        yield pd.DataFrame({"__TS": list(ts), "__SEQ": list(seq), "__L": list(left), "__R": list(right),
                            "__DEL": list(deleted), "__KEY": [key] * len(rows)})


def _table_step(kind: str) -> Callable[..., Iterator[Any]]:
    def step(key: tuple[Any, ...], pdfs: Iterator[Any], state: Any) -> Iterator[Any]:
        current: str | None = pickle.loads(state.get[0]) if state.exists else None
        out: list[tuple[int, int, str | None, str | None]] = []
        changed = False
        for side, ts, off, tomb, row in _records(pdfs):
            if side == 1:  # table update
                if key[0] is None:
                    continue
                current = None if tomb else row
                changed = True
            elif key[0] is None or current is None:
                if kind == "LEFT" and not tomb:
                    out.append((ts, off, row, None))
            elif not tomb:
                out.append((ts, off, row, current))
        if changed:
            if current is None:
                state.remove()
            else:
                state.update((pickle.dumps(current),))
        yield from _output(out, key[0])

    return step


def _table_table_step(kind: str) -> Callable[..., Iterator[Any]]:
    """Both sides are tables: the joined row of a key changes whenever either side does; when it
    disappears (INNER: either side deleted; LEFT: the left deleted) a tombstone carries the key."""

    def step(key: tuple[Any, ...], pdfs: Iterator[Any], state: Any) -> Iterator[Any]:
        if key[0] is None:  # table records without a key are not rows
            for _ in pdfs:
                pass
            return
        st: dict[str, Any] = pickle.loads(state.get[0]) if state.exists else {
            "L": None, "R": None, "lts": 0, "rts": 0, "lastL": None, "lastR": None, "emitted": False}
        out: list[tuple[Any, ...]] = []
        for side, ts, off, tomb, row in _records(pdfs):
            name = "L" if side == 0 else "R"
            st[name] = None if tomb else row
            st["lts" if side == 0 else "rts"] = ts
            if not tomb:
                st["last" + name] = row
            left, right = st["L"] is not None, st["R"] is not None
            alive = {"INNER": left and right, "LEFT": left, "RIGHT": right, "FULL": left or right}[kind]
            if alive:
                when = max(st["lts"], st["rts"]) if left and right else (st["lts"] if left else st["rts"])
                out.append((when, off, st["L"], st["R"], False))
                st["emitted"] = True
            elif st["emitted"]:  # the tombstone carries the last rows, so the key columns are set
                out.append((ts, off, st["lastL"], st["lastR"], True))
                st["emitted"] = False
        state.update((pickle.dumps(st),))
        yield from _output(out, key[0])

    return step


def _window_step(spec: JoinSpec) -> Callable[..., Iterator[Any]]:
    before = spec.within_before_ms or 0
    after = spec.within_after_ms if spec.within_after_ms is not None else before
    keep = max(before, after) + (spec.grace_ms if spec.grace_ms is not None else DEFAULT_GRACE_MS)
    kind = spec.kind

    def step(key: tuple[Any, ...], pdfs: Iterator[Any], state: Any) -> Iterator[Any]:
        buffers: dict[str, Any] = pickle.loads(state.get[0]) if state.exists else {"L": [], "R": [], "max": None}
        out: list[tuple[int, int, str | None, str | None]] = []
        for side, ts, off, tomb, row in _records(pdfs):
            if key[0] is None or tomb:
                if not tomb and side == 0 and kind in ("LEFT", "FULL"):
                    out.append((ts, off, row, None))
                elif not tomb and side == 1 and kind in ("RIGHT", "FULL"):
                    out.append((ts, off, None, row))
                continue
            if side == 0:
                matches = [(rts, roff, r) for rts, roff, r in buffers["R"] if ts - before <= rts <= ts + after]
                for rts, _roff, r in matches:
                    out.append((max(ts, rts), off, row, r))
                if not matches and kind in ("LEFT", "FULL"):
                    out.append((ts, off, row, None))
                buffers["L"].append((ts, off, row))
            else:
                matched = False
                for lts, loff, lrow in buffers["L"]:
                    if lts - before <= ts <= lts + after:
                        out.append((max(ts, lts), loff, lrow, row))
                        matched = True
                if not matched and kind in ("RIGHT", "FULL"):
                    out.append((ts, off, None, row))
                buffers["R"].append((ts, off, row))
            newest = ts if buffers["max"] is None else max(buffers["max"], ts)
            buffers["max"] = newest
            horizon = newest - keep
            buffers["L"] = [b for b in buffers["L"] if b[0] >= horizon]
            buffers["R"] = [b for b in buffers["R"] if b[0] >= horizon]
        state.update((pickle.dumps(buffers),))
        yield from _output(out, key[0])

    return step

