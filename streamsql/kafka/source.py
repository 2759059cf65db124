"""The streaming Kafka source: the readers Spark's Python data source API asks for.

Where each part runs (research/spark.md §1.1): ``initialOffset``/``latestOffset``/
``partitions``/``commit`` run in one long-lived Python process on the driver, which keeps an
:class:`~streamsql.kafka.admin.EndOffsets` (a consumer + admin client) for the whole query
(``kafka/offsets.py``). ``read()`` runs in executor Python workers on a *pickled copy* of the
reader, so clients are never pickled; workers read exact offset ranges with the consumers they
keep (``kafka/reading.py``), decoded into Arrow batches (``kafka/decoding.py``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from streamsql.kafka.decoding import source_schema
from streamsql.kafka.offsets import DriverOffsets, KafkaInputPartition, decode_offsets, encode_offsets, rate_limit
from streamsql.kafka.options import SourceOptions
from streamsql.kafka.pipe import ReaderPipe
from streamsql.kafka.reading import read_range


def _report_crashes() -> None:
    """Made in Spark's streaming source runner, a process of its own whose death the JVM sees
    only as end-of-file: a fatal signal there (a crash in a native client) prints every
    thread's Python stack to its stderr, which Spark copies to the engine's."""
    import faulthandler

    if not faulthandler.is_enabled():
        faulthandler.enable(all_threads=True)


class KafkaStreamReader(DriverOffsets, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("streamsql_kafka")``."""

    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        _report_crashes()
        self.opts = opts
        self.schema = schema
        self._ends = None
        self._target: dict[int, int] | None = None  # availableNow: stop here
        self._latest: dict[int, int] | None = None
        self._initial: dict[str, int] | None = None

    # -- driver ---------------------------------------------------------------------------------

    def initialOffset(self) -> dict[str, int]:
        """Computed once and remembered: Spark calls this twice on a first start
        (research/spark.md §1.2), and with ``latest`` two calls could see different ends."""
        if self._initial is None:
            tracker = self._tracker()
            parts = tracker.partitions()
            self._initial = encode_offsets(self._start(tracker, parts))
        return dict(self._initial)

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.opts.max_records) if self.opts.max_records else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """availableNow reads up to the end as of the query start, in limited batches."""
        self._target = self._tracker().ends()

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        tracker = self._tracker()
        begin = decode_offsets(start)
        ends = tracker.ends()
        self._latest = dict(ends)
        new = [p for p in ends if p not in begin]
        if new:  # partitions added since: start at earliest
            begin.update(tracker.earliest(new))
        if self._target is not None:
            ends = {p: min(e, self._target.get(p, begin[p])) for p, e in ends.items()}
        ends = {p: max(e, begin[p]) for p, e in ends.items()}
        if isinstance(limit, ReadMaxRows):
            ends = rate_limit(begin, ends, limit.max_rows)
        # never drop a partition that ``start`` knows (offsets only move forward)
        return encode_offsets({**decode_offsets(start), **ends})

    def reportLatestOffset(self) -> dict[str, int] | None:
        return encode_offsets(self._latest) if self._latest is not None else None

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        return self._partitions(decode_offsets(start), decode_offsets(end))

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to do: progress lives in Spark's checkpoint. (Called one batch late and
        never for the last batch of an availableNow run, research/spark.md §1.2.)"""

    # -- workers --------------------------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, KafkaInputPartition)
        if self.opts.pipe is not None:  # the query's step and sink run here (kafka/pipe.py)
            batches = read_range(self.opts, source_schema(self.opts), partition.partition, partition.start,
                                 partition.end)
            return ReaderPipe.parse(self.opts.pipe).run(batches)
        return read_range(self.opts, self.schema, partition.partition, partition.start, partition.end)


class KafkaBatchReader(DriverOffsets, DataSourceReader):
    """``spark.read.format("streamsql_kafka")``: the topic from earliest (or ``startingOffsets``)
    to its end at planning time; for tests, PRINT-like tools and backfills."""

    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        _report_crashes()
        self.opts = opts
        self.schema = schema
        self._ends = None

    def partitions(self) -> Sequence[InputPartition]:
        tracker = self._tracker()
        parts = tracker.partitions()
        end = tracker.ends(parts)
        return self._partitions(self._start(tracker, parts), end)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, KafkaInputPartition)
        return read_range(self.opts, self.schema, partition.partition, partition.start, partition.end)
