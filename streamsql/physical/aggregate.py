"""The aggregate step inside Spark's executors: ksqlDB's aggregation semantics as a stateful
Spark operator, partitioned by key, with its state in Spark's state store.

Shape of the Spark plan the builder makes of an :class:`~streamsql.physical.steps.Aggregate`:

1. the pre-aggregation select (stateless Spark SQL: WHERE, grouping keys, aggregate arguments,
   ROWTIME/ROWPARTITION/ROWOFFSET) plus ``__BUCKET``, a hash of the grouping key;
2. :func:`pack`: the rows of each bucket in an Arrow batch become one BINARY value, an Arrow IPC
   stream (exact values: a nullable BIGINT, DECIMAL, DATE, nested structs survive, where
   pandas would turn a nullable BIGINT into a float; and no per-row serialisation);
3. ``groupBy(__BUCKET).transformWithStateInPandas(`` :class:`AggregateOperator` ``)``: the
   bucket's records of the micro-batch in offset order through the one implementation of
   ksqlDB's aggregation (:class:`streamsql.physical.aggregator.AggregationProcessor`), whose state
   (accumulators per group, previous table rows, stream time, held EMIT FINAL windows) lives in
   a RocksDB ``MapState`` of the bucket, checkpointed with the query's offsets;
4. :func:`unpacker`: the updates as typed columns (keys, results, previous results, window,
   rowtime), then the post-aggregation projection and HAVING (Spark SQL, in the builder).

Why a bucket and not the grouping key itself: Kafka Streams closes windows and drops late
records on *stream time*, the largest timestamp its task has seen across all keys of its
partition. A bucket is that task: one bucket per partition of the source topic (ksqlDB's
repartition topic has the source's partition count; ``streamsql.aggregation.buckets`` overrides),
each bucket a Spark state key placed on its own shuffle partition (``physical/buckets.py``), each
with one stream time. With one bucket stream time is exactly ksqlDB's over one partition.

Spark's own ``groupBy().agg()`` (``physical/spark_aggregate.py``) takes the shapes it computes
exactly; this operator takes the rest: it retracts a table row's old value, emits tombstones for
HAVING, runs SESSION windows with EMIT CHANGES and Python or collection aggregates
(docs/performance.md has the measured comparison and docs/differences.md the choice).
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.streaming import StatefulProcessor
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from streamsql import types as t
from streamsql.kafka.processing_log import LogTarget
from streamsql.physical.buckets import BUCKET_COL

if TYPE_CHECKING:
    from streamsql.planner.aggregation import AggregatePlan

ROW_COL = "__ROW"
OUT_COL = "__OUT"
#: previous results of an update (``__OLD__A0``, ...), for HAVING over the old value
OLD_PREFIX = "__OLD"
HAD_COL = "__HAD"
REMOVED_COL = "__REMOVED"
#: the state namespaces of AggregationProcessor, as one MapState key prefix each
_SEP = "\x00"


def pack(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow``: (columns…, __BUCKET) → (__BUCKET, __ROW): one output row per bucket of an
    input batch, holding that bucket's rows as an Arrow IPC stream (:func:`unpack_rows` reads
    it back). Columnar end to end: no Python object per input row is made here."""
    import pyarrow.compute as pc

    for batch in batches:
        if batch.num_rows == 0:
            continue
        buckets = batch.column(batch.schema.get_field_index(BUCKET_COL))
        rest = batch.drop_columns([BUCKET_COL])
        values = pc.unique(buckets).to_pylist()
        parts = [rest] if len(values) == 1 else [rest.filter(pc.equal(buckets, v)) for v in values]
        yield pa.RecordBatch.from_arrays([pa.array(values, type=pa.int64()),
                                          pa.array([ipc_bytes(part) for part in parts], type=pa.binary())],
                                         names=[BUCKET_COL, ROW_COL])


def ipc_bytes(batch: pa.RecordBatch) -> bytes:
    """One Arrow batch as an Arrow IPC stream (the packed value of a bucket)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def unpack_rows(blob: bytes) -> list[dict[str, Any]]:
    """The rows :func:`pack` wrote into one value, as dicts (Arrow's exact Python values)."""
    return pa.ipc.open_stream(blob).read_all().to_pylist()


class MapStateBackend:
    """AggregationProcessor's state over a ``MapState`` of the bucket (key: namespace + key text)."""

    def __init__(self, state: Any) -> None:
        self.state = state

    def state_get(self, namespace: str, key: str) -> bytes | None:
        # each MapState call is a round trip to the JVM's state server: getValue answers None
        # for a missing key, so no containsKey first
        value = self.state.getValue((namespace + _SEP + key,))
        return bytes(value[0]) if value is not None else None

    def apply(self, changes: list[tuple[str, str, bytes | None]]) -> None:
        """The batch's writes, many per exchange with the state server (a removal of a missing
        key is a no-op, RocksDB's delete)."""
        from streamsql.physical.map_state import MapCalls

        MapCalls(self.state).write_many(((ns + _SEP + key,), (blob,) if blob is not None else None)
                                        for ns, key, blob in changes)


class AggregateOperator(StatefulProcessor):
    """The ``StatefulProcessor`` of the aggregate step: one call per bucket and micro-batch."""

    def __init__(self, plan: AggregatePlan, limits: dict[str, int], cache: bool,
                 bootstrap: str | None, log_topic: str | None, dropped: Any = None,
                 udafs: dict[str, list[Any]] | None = None) -> None:
        from streamsql.functions.python.aggregate import loaded

        self.plan = plan
        #: the Python UDAFs the plan calls (the engine's: ``PythonFunctions.aggregates``), by
        #: value: a worker process never loaded them
        self.udafs = udafs if udafs is not None else loaded([c.function.name for c in plan.calls])
        #: a Spark accumulator: records dropped as late, for the driver's query statistics
        self.dropped = dropped
        self.limits = limits
        #: ksql.streams.cache.max.bytes.buffering > 0: the latest update per key per batch
        self.cache = cache
        #: made here, in the driver: it carries the cluster's client settings to the executors
        self.log_target = LogTarget(bootstrap, log_topic)

    def init(self, handle: Any) -> None:
        self.state = handle.getMapState("aggregation", StructType([StructField("k", StringType())]),
                                        StructType([StructField("b", BinaryType())]))

    def handleInputRows(self, key: Any, rows: Any, timerValues: Any = None) -> Iterator[Any]:
        import pandas as pd

        from streamsql.functions.python.aggregate import install
        from streamsql.physical.aggregator import AggregationProcessor

        install(self.udafs)
        records = [r for pdf in rows for blob in packed_values(pdf) for r in unpack_rows(blob)]
        backend = MapStateBackend(self.state)
        processor = AggregationProcessor(self.plan, backend, self.limits,
                                         _error_reporter(self.log_target), latest_only=self.cache)
        before = processor.dropped
        updates = processor.process(records)
        if self.dropped is not None and processor.dropped > before:
            self.dropped.add(processor.dropped - before)
        backend.apply(processor.state_changes())
        out = [pickle.dumps((u.key, u.window, u.results, u.previous, u.had, u.rowtime, u.removed),
                            protocol=pickle.HIGHEST_PROTOCOL) for u in updates]
        yield pd.DataFrame({OUT_COL: pd.Series(out, dtype=object)})

    def close(self) -> None:
        pass


def packed_values(pdf: Any) -> Any:
    """The packed values of one input chunk: the last of its (__BUCKET, __ROW) columns (Spark
    may name them by position, ``_0``/``_1``)."""
    if ROW_COL in pdf.columns:
        return pdf[ROW_COL]
    if len(pdf) == 0 or len(pdf.columns) == 0:
        return []
    return pdf.iloc[:, -1]


def _error_reporter(target: LogTarget) -> Any:
    """Where the aggregation reports a record it dropped (a failing Python UDAF, a DECIMAL
    overflow): the processing-log topic, naming the failing function."""
    from streamsql.functions.python.aggregate import FunctionError
    from streamsql.functions.python.runtime import ErrorLog

    errors = ErrorLog(target)

    def report(row: dict[str, Any], error: BaseException) -> None:
        function = error.function if isinstance(error, FunctionError) else "aggregation"
        cause = error.error if isinstance(error, FunctionError) else error
        errors.report(function, cause, [{k: v for k, v in row.items() if not k.startswith("__")}])

    return report


def output_schema() -> Any:
    return StructType([StructField(OUT_COL, BinaryType())])


def update_fields(plan: AggregatePlan) -> list[tuple[str, Any]]:
    """The typed columns :func:`unpacker` makes of an update: (name, Spark type)."""
    from pyspark.sql import types as st

    from streamsql.planner.aggregation import post_schema

    post = post_schema(plan)
    fields = [(f.name, f.dataType) for f in post.fields]
    fields += [(OLD_PREFIX + c.name, t.to_spark(c.function.result_type) if c.function.result_type is not None
                else st.StringType()) for c in plan.calls]
    fields += [(HAD_COL, st.BooleanType()), (REMOVED_COL, st.BooleanType())]
    return fields


def unpacker(plan: AggregatePlan) -> tuple[Any, Any]:
    """(``mapInArrow`` function, its output schema): pickled updates → typed columns."""
    from pyspark.sql import types as st
    from pyspark.sql.pandas.types import to_arrow_type

    fields = update_fields(plan)
    schema = st.StructType([st.StructField(n, ty) for n, ty in fields])
    arrow_types = [to_arrow_type(ty, timezone="UTC") for _, ty in fields]
    n_keys, n_calls = len(plan.keys), len(plan.calls)

    def unpack(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            cols: list[list[Any]] = [[] for _ in fields]
            for blob in batch.column(0).to_pylist():
                key, window, results, previous, had, rowtime, removed = pickle.loads(blob)
                results = results if results is not None else [None] * n_calls
                previous = previous if previous is not None else [None] * n_calls
                values = (list(key) + list(results) + [window[0], window[1], rowtime]
                          + list(previous) + [had, removed])
                for col, v in zip(cols, values):
                    col.append(v)
            assert len(cols) == n_keys + 2 * n_calls + 5
            yield pa.RecordBatch.from_arrays([pa.array(c, type=ty) for c, ty in zip(cols, arrow_types)],
                                             names=[n for n, _ in fields])

    return unpack, schema


def old_having(plan: AggregatePlan) -> str:
    """HAVING over an update's previous results (``__Ai`` → ``__OLD__Ai``)."""
    import re

    assert plan.having is not None
    names = {c.name for c in plan.calls}

    def swap(m: re.Match[str]) -> str:
        name = m.group(1)
        return f"`{OLD_PREFIX}{name}`" if name in names else m.group(0)

    return re.sub(r"`([^`]+)`", swap, plan.having)
