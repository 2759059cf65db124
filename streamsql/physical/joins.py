"""The join step in Spark's executors (:class:`~streamsql.physical.steps.Join`, planned in
planner/joins.py): two inputs, one stateful operator. An input is a Kafka source or, in an n-way
join, the DataFrame of the joins before it (one ``transformWithStateInPandas`` per JOIN, chained in
one Spark query); the builder (``physical/builder.py``) reads the inputs and calls
:func:`key_join` or :func:`foreign_key_join`.

Both sides are read in one Spark query and unioned into a narrow shape: which side, the join key
(as text, so both sides group together), the record's time, partition and offset, whether it is
a tombstone, and the whole row as JSON (``to_json``/``from_json`` round-trip every SQL type
exactly, so the stateful step only handles plain strings).

The operator (:class:`JoinOperator`) is grouped by *bucket*, a hash of the join key, not by the
key: a bucket is a Kafka Streams task of ksqlDB's join (one per partition of the joined sources,
:func:`join_buckets`; ``physical/buckets.py``), with one stream time, which a stream-stream join's window close needs.
Each call gets a bucket's new records of the micro-batch, puts them in a task's arrival order
(:func:`arrival_order`) and runs the join task over them, reading each join key's state from the
bucket's ``MapState`` once and writing it back at the end (:class:`BucketState`):

* stream-table (:class:`StreamTableJoin`): the table's current row per key;
* table-table (:class:`TableTableJoin`): both sides' current rows;
* stream-stream (:class:`WindowJoin`): each side's records within the window and grace, and,
  with a GRACE PERIOD, the unmatched records of an outer side until their window closes.

Join columns (and a synthetic ROWKEY) are filled from the join key when their side is missing.

Spark checkpoints that state with the query's offsets, so a restarted query joins as if it had
never stopped. The output has the joined source's columns (``<ALIAS>_<COLUMN>``), each side's
pseudo columns, and the stream's ROWTIME/ROWPARTITION/ROWOFFSET/__HEADERS for the sink.
"""

from __future__ import annotations

import bisect
import heapq
import pickle
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.streaming import StatefulProcessor
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from streamsql import types as t
from streamsql.physical.map_state import MapCalls
from streamsql.types import HEADERS_COL, TOMBSTONE_COL

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from streamsql.planner.joins import JoinSide, JoinSpec

# The planner's helpers (and sqlglot with them) are imported inside the functions the driver
# runs: Spark's Python workers import this module for the operators alone, on a task's first
# batch (the planner's import took ~0.3 s of each new worker's CPU).

#: within equal timestamps, table updates are applied before stream records (Kafka Streams
#: processes the table's record first when its timestamp is not later)
_TABLE_FIRST = {0: 1, 1: 0}
#: stream-stream joins keep records this long past the window when no GRACE PERIOD is given
DEFAULT_GRACE_MS = 24 * 3600 * 1000


#: in a join of windowed sources, what separates the window from the key in the join key text
#: (a window's text never holds it; the key's may, so the key comes last)
_WINDOW_SEPARATOR = "char(0)"


def _join_key(spec: JoinSpec, side: JoinSide) -> str:
    """The join key as text: the ON expression's value, and in a join of windowed sources the
    window before it (its start, and for SESSION windows its end too: what Kafka Streams
    compares of two windowed keys)."""
    key = (f"to_json({side.key_sql})" if isinstance(side.key_type, (t.Struct, t.Array, t.Map))
           else f"CAST({side.key_sql} AS STRING)")
    if spec.window is None:
        return key
    bounds = (f"CAST({t.WINDOWSTART} AS STRING), ':', CAST({t.WINDOWEND} AS STRING)"
              if spec.window == "SESSION" else f"CAST({t.WINDOWSTART} AS STRING)")
    return f"concat({bounds}, {_WINDOW_SEPARATOR}, {key})"


def _key_of(spec: JoinSpec, column: str) -> str:
    """The ON expression's value in a join key text column (:func:`_join_key`)."""
    if spec.window is None:
        return column
    return f"substring({column}, instr({column}, {_WINDOW_SEPARATOR}) + 1)"


def _window_bounds(spec: JoinSpec, side: JoinSide) -> list[str]:
    """The window bound columns a side's row carries besides its columns: in a join of windowed
    sources, an earlier join's (its result's window, which this join's result may take); a
    source's are among its columns already (``side_source_columns``)."""
    if spec.window is None or getattr(side.source, "join", None) is None:
        return []
    return [t.WINDOWSTART, t.WINDOWEND]


def _narrow(df: DataFrame, spec: JoinSpec, side: JoinSide, tag: int) -> DataFrame:
    from streamsql.planner.expressions import quote
    from streamsql.planner.joins import side_columns

    cols = [quote(name) for name, _ty, _joined in side_columns(side)] + [HEADERS_COL] + _window_bounds(spec, side)
    return df.selectExpr(
        f"{tag} AS __SIDE",
        f"{_join_key(spec, side)} AS __JK",
        f"CAST({t.ROWTIME} AS BIGINT) AS __TS",
        f"coalesce(CAST({t.ROWPARTITION} AS INT), -1) AS __PART",
        f"coalesce(CAST({t.ROWOFFSET} AS BIGINT), -1) AS __OFF",
        f"{TOMBSTONE_COL} AS __TOMB",
        f"to_json(struct({', '.join(cols)})) AS __ROW",
    )


_HEADERS_TYPE = "array<struct<KEY: string, VALUE: binary>>"
#: the part of a row's JSON the joined row takes from the record that produced it
_HEADERS_ONLY = f"struct<{HEADERS_COL}: {_HEADERS_TYPE}>"


def _row_schema(spec: JoinSpec, side: JoinSide, spark_type: Callable[[t.SqlType], str]) -> str:
    from streamsql.planner.expressions import quote
    from streamsql.planner.joins import side_columns

    fields = [f"{quote(name)}: {spark_type(ty)}" for name, ty, _joined in side_columns(side)]
    fields.append(f"{HEADERS_COL}: {_HEADERS_TYPE}")
    fields += [f"{bound}: bigint" for bound in _window_bounds(spec, side)]
    return f"struct<{', '.join(fields)}>"


def key_join(spec: JoinSpec, left_df: DataFrame, right_df: DataFrame, bucket_sql: str) -> DataFrame:
    """The join's rows: both inputs by bucket (``bucket_sql``, Spark SQL over the narrow columns:
    the task of the record's partition, or of a hash of its join key), one :class:`JoinOperator`."""
    union = _narrow(left_df, spec, spec.left, 0).unionByName(_narrow(right_df, spec, spec.right, 1))
    keyed = union.selectExpr(f"{bucket_sql} AS __BUCKET", *INPUT_COLUMNS)
    task: JoinTask
    if spec.table_table:
        task = TableTableJoin(spec.kind)
    elif spec.stream_table:
        task = StreamTableJoin(spec.kind)
    else:
        task = WindowJoin.of(spec)
    joined = keyed.groupBy("__BUCKET").transformWithStateInPandas(
        statefulProcessor=JoinOperator(task), outputStructType=OUTPUT_SCHEMA, outputMode="Append", timeMode="None")
    return _joined_rows(spec, joined)


def foreign_key_join(spec: JoinSpec, left_df: DataFrame, right_df: DataFrame) -> DataFrame:
    """A foreign-key table-table join, as Kafka Streams runs it with subscription topics: the
    left table's rows, by their primary key, become subscriptions to a foreign key
    (:class:`SubscriptionOperator`: a changed foreign key retracts the old one); subscriptions and
    the right table's rows, by foreign key, meet in :class:`ForeignKeyOperator`."""
    from streamsql.planner.expressions import quote
    from streamsql.planner.joins import side_columns

    left = spec.left
    keys = ", ".join(quote(c.name) for c in left.source.key_columns)
    cols = [quote(name) for name, _ty, _joined in side_columns(left)] + [HEADERS_COL]
    lefts = left_df.selectExpr(
        f"to_json(struct({keys})) AS __PK", f"{_join_key(spec, left)} AS __FK",
        f"CAST({t.ROWTIME} AS BIGINT) AS __TS", f"coalesce(CAST({t.ROWOFFSET} AS BIGINT), -1) AS __OFF",
        f"{TOMBSTONE_COL} AS __TOMB", f"to_json(struct({', '.join(cols)})) AS __ROW")
    subscriptions = lefts.groupBy("__PK").transformWithStateInPandas(
        statefulProcessor=SubscriptionOperator(), outputStructType=SUBSCRIPTION_SCHEMA, outputMode="Append",
        timeMode="None")
    rights = _narrow(right_df, spec, spec.right, 1).selectExpr(
        "__SIDE", "__JK", "CAST(NULL AS STRING) AS __PK", "'' AS __KIND", "__TS", "__OFF", "__TOMB", "__ROW")
    union = subscriptions.selectExpr(
        "0 AS __SIDE", "__JK", "__PK", "__KIND", "__TS", "__OFF", "__KIND = 'delete' AS __TOMB", "__ROW",
    ).unionByName(rights)
    joined = union.groupBy("__JK").transformWithStateInPandas(
        statefulProcessor=ForeignKeyOperator(spec.kind), outputStructType=OUTPUT_SCHEMA, outputMode="Append",
        timeMode="None")
    return _joined_rows(spec, joined)


def _joined_rows(spec: JoinSpec, joined: DataFrame) -> DataFrame:
    """The join operator's rows in the joined source's shape."""
    from streamsql.planner.expressions import quote
    from streamsql.planner.joins import leftmost_column, side_columns

    def spark_type(ty: t.SqlType) -> str:
        return t.to_spark(ty).simpleString()

    # both rows in one parse (``__ROWS``, :func:`_output`): Spark's from_json makes a parser and
    # its 8 KB buffer per call
    both = (f"struct<L: {_row_schema(spec, spec.left, spark_type)}, "
            f"R: {_row_schema(spec, spec.right, spark_type)}>")
    parsed = joined.selectExpr(
        "__TS", "__SEQ", "__DEL", "__KEY", "__TRIG", "__TRIGSIDE", f"from_json(__ROWS, '{both}') AS __BOTH",
    ).selectExpr("__TS", "__SEQ", "__DEL", "__KEY", "__TRIG", "__TRIGSIDE", "__BOTH.L AS __LROW",
                 "__BOTH.R AS __RROW")
    exprs: list[str] = []
    key = _key_of(spec, "__KEY")

    def key_as(ty: t.SqlType) -> str:
        """The join key text (:func:`_join_key`) back as a value of ``ty``."""
        if isinstance(ty, (t.Struct, t.Array, t.Map)):
            return f"from_json({key}, '{spark_type(ty)}')"
        return f"CAST({key} AS {spark_type(ty)})"

    if spec.synthetic_key is not None:
        exprs.append(f"{key_as(spec.synthetic_key)} AS {quote(spec.synthetic_name)}")
    for side, row in ((spec.left, "__LROW"), (spec.right, "__RROW")):
        for name, ty, joined_name in side_columns(side):
            value = f"{row}.{quote(name)}"
            if joined_name in spec.key_candidates:  # a join column holds the join key even when its side is missing
                value = f"coalesce({value}, {key_as(ty)})"
            exprs.append(f"{value} AS {quote(joined_name)}")
    if spec.window is not None:  # the result's window: the left row's, or the right's in an outer join
        exprs += [f"coalesce(__LROW.{w}, __RROW.{w}) AS {w}" for w in (t.WINDOWSTART, t.WINDOWEND)]
    exprs += [
        f"__TS AS {t.ROWTIME}",
        # the first source's position, or the right one's when an outer join has no left row
        f"coalesce(__LROW.{quote(leftmost_column(spec.left, t.ROWPARTITION))}, __RROW.{t.ROWPARTITION}) "
        f"AS {t.ROWPARTITION}",
        f"coalesce(__LROW.{quote(leftmost_column(spec.left, t.ROWOFFSET))}, __RROW.{t.ROWOFFSET}) AS {t.ROWOFFSET}",
        # the headers of the record that produced the row (Kafka Streams forwards the current
        # record's: a delete's own, a closed window's row those of the record that closed it):
        # the left or right row's when it is that row (``__TRIGSIDE``, :func:`_output`), parsed
        # from ``__TRIG`` only otherwise (CASE evaluates only the branch taken)
        f"coalesce(CASE __TRIGSIDE WHEN 0 THEN __LROW.{HEADERS_COL} WHEN 1 THEN __RROW.{HEADERS_COL} "
        f"ELSE from_json(__TRIG, '{_HEADERS_ONLY}').{HEADERS_COL} END, array()) AS {HEADERS_COL}",
        f"__DEL AS {TOMBSTONE_COL}",
    ]
    return parsed.selectExpr(*exprs)


# --- the stateful steps (run in Spark's Python workers) -------------------------------------------

#: what the join operator emits per joined row: its time, the input's offset, both sides' rows as
#: one JSON object (``{"L": left row, "R": right row}``, a missing side null), whether it is a
#: tombstone, the join key, and the record that produced it: ``__TRIGSIDE`` 0 or 1 when it is the
#: left or right row (almost always), else its row JSON in ``__TRIG``
OUTPUT_SCHEMA = ("__TS long, __SEQ long, __ROWS string, __DEL boolean, __KEY string, __TRIG string, "
                 "__TRIGSIDE int")
#: the join state's layout in a checkpoint (``physical/builder.check_join_checkpoint``): per
#: bucket a ``transformWithState`` MapState of pickled values, one per join key and one for the
#: bucket. Earlier versions kept one value per join key (``transformWithState-value-1``) or used
#: ``applyInPandasWithState``'s group state, which Spark allows only once per query.
JOIN_STATE = "transformWithState-bucket-2"


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
INPUT_COLUMNS = ("__SIDE", "__JK", "__TS", "__PART", "__OFF", "__TOMB", "__ROW")
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
                        out.append((ts, off, lrow, right, False, row))
                    else:
                        out.append((ts, off, lrow, None, True, row))
                continue
            if kind == "retract":
                lefts.pop(pk, None)
            elif kind == "delete":
                lefts.pop(pk, None)
                out.append((ts, off, row, None, True, row))
            else:
                if key[0] is not None:
                    lefts[pk] = row
                if key[0] is not None and right is not None:
                    out.append((ts, off, row, right, False, row))
                elif left_join:
                    out.append((ts, off, row, None, False, row))
                elif kind == "update":
                    out.append((ts, off, row, None, True, row))
        if right is None and not lefts:
            if st.exists:
                st.remove()
        else:
            st.update((pickle.dumps((right, lefts)),))
        yield from _output([(ts, off, lrow, rrow, deleted, key[0], trigger)
                            for ts, off, lrow, rrow, deleted, trigger in out])

    def close(self) -> None:
        pass


# --- key joins: one operator per bucket -----------------------------------------------------------

#: one output row of a join: its time, the input's offset, both sides' rows as JSON, whether it
#: is a tombstone, the join key, and the row JSON of the record that produced it (its headers
#: are the joined row's)
Out = tuple[int, int, "str | None", "str | None", bool, "str | None", "str | None"]
#: one input record: side (0 left, 1 right), partition, offset, time, tombstone, join key, row JSON
Record = tuple[int, int, int, int, bool, "str | None", str]


def join_buckets(spec: JoinSpec) -> int:
    """How many state buckets (Kafka Streams tasks) a join runs on: one per partition of its
    first source, as ksqlDB's join has one task per partition of its co-partitioned inputs."""
    return max(1, int(getattr(spec.leaves()[0].source, "partitions", 1) or 1))


def by_partition(spec: JoinSpec) -> bool:
    """Whether both inputs are partitioned by the join key already (each joins on its one key
    column, of the same type, with as many partitions as buckets): then a bucket is a partition,
    as ksqlDB's task, and no record changes task. Otherwise (ksqlDB repartitions by the join key)
    a bucket is a hash of the join key."""
    from streamsql.planner.expressions import quote

    def keyed(side: JoinSide) -> bool:
        keys = side.source.key_columns
        return (bool(side.alias) and len(keys) == 1 and side.key_sql.strip() == quote(keys[0].name)
                and int(side.source.partitions or 1) == join_buckets(spec))

    return keyed(spec.left) and keyed(spec.right) and spec.left.key_type == spec.right.key_type


def arrival_order(records: list[Record]) -> list[Record]:
    """A bucket's new records in the order a Kafka Streams task would process them: each input
    partition in offset order; across partitions, the one whose next record has the smallest
    timestamp (at equal timestamps the right side, a stream-table join's table, first)."""
    queues: dict[tuple[int, int], list[Record]] = {}
    for r in records:
        queues.setdefault((r[0], r[1]), []).append(r)
    heap: list[tuple[int, int, int, int]] = []
    for (side, part), queue in queues.items():
        queue.sort(key=lambda r: r[2])
        heap.append((queue[0][3], 1 - side, part, 0))
    heapq.heapify(heap)
    ordered: list[Record] = []
    while heap:
        _ts, flipped, part, i = heapq.heappop(heap)
        queue = queues[(1 - flipped, part)]
        ordered.append(queue[i])
        if i + 1 < len(queue):
            heapq.heappush(heap, (queue[i + 1][3], flipped, part, i + 1))
    return ordered


class MemoryStore:
    """A bucket's state as a dict (the unit tests' store; the operator's is :class:`_MapStore`)."""

    def __init__(self) -> None:
        self.values: dict[str, bytes] = {}

    def get_many(self, names: list[str]) -> list[bytes | None]:
        return [self.values.get(name) for name in names]

    def put_many(self, entries: list[tuple[str, bytes | None]]) -> None:
        for name, blob in entries:
            if blob is None:
                self.values.pop(name, None)
            else:
                self.values[name] = blob


class _MapStore:
    """A bucket's state in a ``transformWithState`` MapState (name → pickled value), read and
    written many names at a time (:class:`~streamsql.physical.map_state.MapCalls`)."""

    def __init__(self, state: Any) -> None:
        self.calls = MapCalls(state)

    def get_many(self, names: list[str]) -> list[bytes | None]:
        return [bytes(v[0]) if v is not None else None for v in self.calls.get_many([(n,) for n in names])]

    def put_many(self, entries: list[tuple[str, bytes | None]]) -> None:
        self.calls.write_many(((name,), (blob,) if blob is not None else None) for name, blob in entries)


class BucketState:
    """What a join task sees of its bucket during one micro-batch: a value per join key and one
    for the bucket itself (stream time, records waiting for their window to close), each read
    from the store once (the batch's keys together, :meth:`preload`) and written back by
    :meth:`flush`."""

    _BUCKET = "\x00bucket"

    def __init__(self, store: Any) -> None:
        self.store = store
        self._cache: dict[str, Any] = {}
        self._dirty: set[str] = set()

    def preload(self, join_keys: Iterable[str | None]) -> None:
        """Read the bucket's value and these join keys' values in one exchange with the store."""
        names = list(dict.fromkeys([self._BUCKET, *("k" + jk for jk in join_keys if jk is not None)]))
        names = [n for n in names if n not in self._cache]
        for name, blob in zip(names, self.store.get_many(names)):
            self._cache[name] = pickle.loads(blob) if blob is not None else None

    def _get(self, name: str) -> Any:
        if name not in self._cache:
            [blob] = self.store.get_many([name])
            self._cache[name] = pickle.loads(blob) if blob is not None else None
        return self._cache[name]

    def key(self, jk: str) -> Any:
        return self._get("k" + jk)

    def set_key(self, jk: str, value: Any) -> None:
        self._cache["k" + jk] = value
        self._dirty.add("k" + jk)

    def bucket(self, initial: Callable[[], Any]) -> Any:
        """The bucket's value (``initial()`` the first time), to be changed in place."""
        value = self._get(self._BUCKET)
        if value is None:
            value = self._cache[self._BUCKET] = initial()
        self._dirty.add(self._BUCKET)
        return value

    def flush(self) -> None:
        self.store.put_many([(name, None if self._cache[name] is None
                              else pickle.dumps(self._cache[name], protocol=pickle.HIGHEST_PROTOCOL))
                             for name in self._dirty])
        self._dirty.clear()


class StreamTableJoin:
    """Stream ⋈ table: the table's current row per key (a tombstone deletes it); a stream record
    emits itself with that row (INNER: only when there is one; LEFT: with nulls otherwise)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    @staticmethod
    def keys_to_read(ordered: list[Record]) -> list[str]:
        """The join keys whose table row the batch needs from the store: those whose first
        record (in arrival order) is a stream record. A key whose table row is updated first
        is written before it is read (W5's first batch: every customer before any order)."""
        first: dict[str, int] = {}
        for side, _part, _off, _ts, _tomb, jk, _row in ordered:
            if jk is not None and jk not in first:
                first[jk] = side
        return [jk for jk, side in first.items() if side == 0]

    def process(self, rec: Record, state: BucketState, out: list[Out]) -> None:
        side, _part, off, ts, tomb, jk, row = rec
        if side == 1:  # a table update; records without a key are not rows
            if jk is not None:
                state.set_key(jk, None if tomb else row)
            return
        if tomb:
            return
        current = state.key(jk) if jk is not None else None
        if current is not None:
            out.append((ts, off, row, current, False, jk, row))
        elif self.kind == "LEFT":
            out.append((ts, off, row, None, False, jk, row))


class TableTableJoin:
    """Table ⋈ table: the joined row of a key changes whenever either side does; when it
    disappears (INNER: either side deleted; LEFT: the left deleted) a tombstone carries the key
    and the last rows (so the key columns are set)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def process(self, rec: Record, state: BucketState, out: list[Out]) -> None:
        side, _part, off, ts, tomb, jk, row = rec
        if jk is None:  # table records without a key are not rows
            return
        st = state.key(jk) or {"L": None, "R": None, "lts": 0, "rts": 0, "lastL": None, "lastR": None,
                               "emitted": False}
        name = "L" if side == 0 else "R"
        st[name] = None if tomb else row
        st["lts" if side == 0 else "rts"] = ts
        if not tomb:
            st["last" + name] = row
        left, right = st["L"] is not None, st["R"] is not None
        alive = {"INNER": left and right, "LEFT": left, "RIGHT": right, "FULL": left or right}[self.kind]
        if alive:
            when = max(st["lts"], st["rts"]) if left and right else (st["lts"] if left else st["rts"])
            out.append((when, off, st["L"], st["R"], False, jk, row))
            st["emitted"] = True
        elif st["emitted"]:
            out.append((ts, off, st["lastL"], st["lastR"], True, jk, row))
            st["emitted"] = False
        state.set_key(jk, st)


class WindowJoin:
    """Stream ⋈ stream WITHIN a window, as Kafka Streams' KStreamKStreamJoin on one task.

    * Each side's records are kept per key (its window store) for ``before + after + grace``
      behind the largest time that side has seen; a record matches the other side's records in
      ``[ts − before, ts + after]`` (mirrored for the right side) that are not expired, in time
      order, each joined row at the later of the two times.
    * An outer side's record with no match: with a GRACE PERIOD it waits in the bucket until its
      window closes (stream time, the largest time of either side, passes ``ts + after + grace``;
      ``before`` for the right side) and is emitted then with nulls, unless a match arrives
      first (Kafka Streams' spurious-result fix); a record whose window is already behind stream
      time is emitted at once. Without a GRACE PERIOD it is emitted at once (ksqlDB's behaviour
      before the fix, which it keeps for joins without one).
    """

    def __init__(self, kind: str, before_ms: int, after_ms: int, grace_ms: int | None) -> None:
        self.before, self.after = before_ms, after_ms
        self.grace = grace_ms if grace_ms is not None else DEFAULT_GRACE_MS
        self.retention = self.before + self.after + self.grace
        self.outer_sides = {"INNER": (), "LEFT": (0,), "RIGHT": (1,), "FULL": (0, 1)}[kind]
        self.hold = grace_ms is not None and bool(self.outer_sides)

    @classmethod
    def of(cls, spec: JoinSpec) -> WindowJoin:
        before = spec.within_before_ms or 0
        return cls(spec.kind, before, spec.within_after_ms if spec.within_after_ms is not None else before,
                   spec.grace_ms)

    @staticmethod
    def _new_bucket() -> dict[str, Any]:
        # st: stream time; seen: each side's largest time (its window store's); waiting: unmatched
        # outer records (time, side bit, key, n, side, offset, row) in Kafka Streams' store order;
        # min: the time its emission check starts from; newest: each key's newest time (expiry)
        return {"st": None, "seen": [None, None], "waiting": [], "min": None, "n": 0, "newest": {}}

    @staticmethod
    def _unmatched(side: int, ts: int, off: int, row: str, jk: str | None, trigger: str) -> Out:
        """A row with nulls for the other side; ``trigger`` the record that emits it (the row's own,
        or the one whose time closed its window)."""
        return (ts, off, row, None, False, jk, trigger) if side == 0 else (ts, off, None, row, False, jk, trigger)

    def process(self, rec: Record, state: BucketState, out: list[Out]) -> None:
        side, _part, off, ts, tomb, jk, row = rec
        b = state.bucket(self._new_bucket)
        b["st"] = ts if b["st"] is None else max(b["st"], ts)
        outer = side in self.outer_sides
        if jk is None or tomb:  # not joinable; an outer side's keyless record joins nothing
            if outer and jk is None and not tomb:
                out.append(self._unmatched(side, ts, off, row, jk, row))
            return
        seen = b["seen"]
        seen[side] = ts if seen[side] is None else max(seen[side], ts)
        windows: tuple[list[tuple[int, int, str]], ...] = state.key(jk) or ([], [])
        expired = seen[side] - self.retention
        if ts > expired:
            windows[side].append((ts, off, row))
        if self.hold and ts == b["st"]:
            self._emit_closed(b, side, row, out)
        before, after = (self.before, self.after) if side == 0 else (self.after, self.before)
        low, high = max(0, ts - before), max(0, ts + after)
        if seen[1 - side] is not None:
            low = max(low, seen[1 - side] - self.retention + 1)
        matches = sorted((e for e in windows[1 - side] if low <= e[0] <= high), key=lambda e: e[0])
        for other_ts, _other_off, other_row in matches:
            if self.hold:
                bit = 1 if side == 1 else 0  # the other side's bit: left 1, right 0
                b["waiting"] = [w for w in b["waiting"] if not (w[0] == other_ts and w[1] == bit and w[2] == jk)]
            left, right = (row, other_row) if side == 0 else (other_row, row)
            out.append((max(ts, other_ts), off, left, right, False, jk, row))
        if not matches and outer:
            if not self.hold or high < b["st"]:
                out.append(self._unmatched(side, ts, off, row, jk, row))
            else:
                b["min"] = ts if b["min"] is None else min(b["min"], ts)
                b["n"] += 1
                bisect.insort(b["waiting"], (ts, 1 if side == 0 else 0, jk, b["n"], side, off, row))
        windows = tuple([e for e in w if e[0] > seen[s] - self.retention] if seen[s] is not None else w
                        for s, w in enumerate(windows))
        state.set_key(jk, windows)
        b["newest"][jk] = max(ts, b["newest"].get(jk, ts))

    def _emit_closed(self, b: dict[str, Any], side: int, trigger: str, out: list[Out]) -> None:
        """Emit the waiting records whose window has closed, as Kafka Streams does when a record
        moves stream time: skipped while the earliest it tracks is still open, then every
        waiting record checked in store order (its tracked time ends as the last one seen)."""
        join_after = self.after if side == 0 else self.before
        if b["min"] is not None and b["min"] + join_after + self.grace >= b["st"]:
            return
        b["min"] = None
        keep = []
        for entry in b["waiting"]:
            ts, _bit, jk, _n, entry_side, off, row = entry
            b["min"] = ts
            look_back = self.after if entry_side == 0 else self.before
            if ts + look_back + self.grace >= b["st"]:
                keep.append(entry)
            else:
                out.append(self._unmatched(entry_side, ts, off, row, jk, trigger))
        b["waiting"] = keep

    def expire(self, state: BucketState) -> None:
        """Drop the keys none of whose records either side could still match (their newest record
        is older than both window stores keep), so idle keys do not stay in the state store."""
        b = state.bucket(self._new_bucket)
        seen = [s for s in b["seen"] if s is not None]
        if not seen:
            return
        horizon = min(seen) - self.retention
        idle = [jk for jk, newest in b["newest"].items() if newest <= horizon]
        for jk in idle:
            state.set_key(jk, None)
            del b["newest"][jk]


JoinTask = StreamTableJoin | TableTableJoin | WindowJoin


class JoinOperator(StatefulProcessor):
    """The ``StatefulProcessor`` of one JOIN: one call per bucket and micro-batch, running the
    join task (stream-table, table-table or windowed stream-stream) over the bucket's new records
    in arrival order. Spark runs several ``transformWithState`` operators in one query, so an
    n-way join chains one per JOIN."""

    def __init__(self, task: JoinTask) -> None:
        self.task = task

    def init(self, handle: Any) -> None:
        self.state = handle.getMapState("join", StructType([StructField("k", StringType())]),
                                        StructType([StructField("b", BinaryType())]))

    def handleInputRows(self, key: Any, rows: Any, timerValues: Any = None) -> Iterator[Any]:
        state = BucketState(_MapStore(self.state))
        out = run(self.task, _input_records(rows), state)
        state.flush()
        yield from _output(out)

    def close(self) -> None:
        pass


def run(task: JoinTask, records: list[Record], state: BucketState) -> list[Out]:
    """One micro-batch of a bucket through its join task: the joined rows, in emission order."""
    out: list[Out] = []
    ordered = arrival_order(records)
    state.preload(task.keys_to_read(ordered) if isinstance(task, StreamTableJoin) else (r[5] for r in records))
    for rec in ordered:
        task.process(rec, state, out)
    if isinstance(task, WindowJoin):
        task.expire(state)
    return out


def _input_records(pdfs: Iterator[Any]) -> list[Record]:
    """A bucket's input frames as records: whole columns to Python lists (``tolist`` gives
    Python ints and bools at once), then one tuple per row."""
    rows: list[Record] = []
    for pdf in _named(pdfs):
        keys = [None if jk is None or jk != jk else str(jk) for jk in pdf["__JK"].tolist()]
        rows.extend(zip(pdf["__SIDE"].astype("int64").tolist(), pdf["__PART"].astype("int64").tolist(),
                        pdf["__OFF"].astype("int64").tolist(), pdf["__TS"].astype("int64").tolist(),
                        pdf["__TOMB"].astype(bool).tolist(), keys, pdf["__ROW"].tolist()))
    return rows


def _trigger_sides(out: list[Out]) -> tuple[list[int | None], list[str | None]]:
    """Per joined row, which of its rows produced it (0 left, 1 right), or None and that
    record's row JSON when neither did (a delete, a window closed by another record): Spark then
    parses a row JSON for the headers only when no side carries them."""
    sides: list[int | None] = []
    triggers: list[str | None] = []
    for _ts, _seq, left, right, _deleted, _key, trigger in out:
        if trigger is left or (trigger is not None and trigger == left):
            sides.append(0)
            triggers.append(None)
        elif trigger is right or (trigger is not None and trigger == right):
            sides.append(1)
            triggers.append(None)
        else:
            sides.append(None)
            triggers.append(trigger)
    return sides, triggers


def _output(out: list[Out]) -> Iterator[Any]:
    """The joined rows as the operator's output frame."""
    import pandas as pd

    if out:
        ts, seq, left, right, deleted, key, _trigger = zip(*out)
        sides, triggers = _trigger_sides(out)
        rows = [f'{{"L":{"null" if lrow is None else lrow},"R":{"null" if rrow is None else rrow}}}'
                for lrow, rrow in zip(left, right)]
        yield pd.DataFrame({"__TS": list(ts), "__SEQ": list(seq), "__ROWS": rows,
                            "__DEL": list(deleted), "__KEY": list(key), "__TRIG": triggers,
                            "__TRIGSIDE": pd.array(sides, dtype="Int32")})
