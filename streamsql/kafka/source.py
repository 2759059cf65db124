"""The streaming Kafka source: offsets and admission control on the driver, ``read()`` of exact
offset ranges on the workers, decoding and the processing log in between.

Where each part runs (research/spark.md §1.1): ``initialOffset``/``latestOffset``/
``partitions``/``commit`` run in one long-lived Python process on the driver, which keeps an
:class:`~streamsql.kafka.admin.EndOffsets` (a consumer + admin client) for the whole query.
``read()`` runs in executor Python workers on a *pickled copy* of the reader, so clients are
never pickled; workers keep one consumer per process instead (workers are reused).

Offsets are ``{"<partition>": next_offset}``, partitions in ascending order, because Spark
compares offsets as JSON text: an unstable key order makes it plan an empty batch on every
trigger (research/spark.md §1.3).
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import struct
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from streamsql import types as T
from streamsql.errors import ConfigError, KafkaError
from streamsql.formats import schema_registry_settings as registry_settings
from streamsql.kafka import processing_log as plog
from streamsql.kafka.admin import common_settings
from streamsql.kafka.pipe import OPTION as PIPE_OPTION
from streamsql.kafka.pipe import ReaderPipe
from streamsql.types import HEADERS_COL, TOMBSTONE_COL

if TYPE_CHECKING:
    import pyarrow.compute as pc
    from confluent_kafka import Consumer, Message

    from streamsql.formats import FormatSpec, Serde
    from streamsql.kafka.admin import EndOffsets

log = logging.getLogger("streamsql.kafka.source")

#: Pseudo columns appended after the user's columns in decoded mode.

_HEADERS_TYPE = T.Array(T.Struct((T.StructField("KEY", T.STRING), T.StructField("VALUE", T.BYTES))))

RAW_SCHEMA = StructType([
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", LongType()),
    StructField("headers", ArrayType(StructType([StructField("key", StringType()),
                                                 StructField("value", BinaryType())]))),
])


# ---------------------------------------------------------------------------------------------
# options
# ---------------------------------------------------------------------------------------------

def _opt(options: Mapping[str, str], name: str, default: str | None = None) -> str | None:
    """Spark lower-cases option names; look them up case-insensitively either way."""
    low = {k.lower(): v for k, v in options.items()}
    return low.get(name.lower(), default)


def kafka_settings(options: Mapping[str, str]) -> dict[str, str]:
    """Pass-through ``kafka.*`` options (minus the bootstrap servers) as librdkafka settings.

    Spark lower-cases option names, which is harmless: librdkafka's names are lower case."""
    return {k[len("kafka."):]: v for k, v in options.items()
            if k.lower().startswith("kafka.") and k.lower() != "kafka.bootstrap.servers"}


@dataclass(frozen=True)
class SourceOptions:
    """Everything a source needs, parsed once; picklable (it travels inside partitions)."""

    bootstrap: str
    topic: str
    #: where a query without a checkpoint begins: ``earliest``, ``latest``, or ``pinned`` at
    #: ``start_at`` (partition → offset; Spark's -2/-1 mean earliest/latest for one partition)
    starting: str = "latest"
    start_at: dict[int, int] | None = None
    max_records: int | None = None
    key_spec: str | None = None
    value_spec: str | None = None
    header_columns: tuple[tuple[str, str, str, str | None], ...] = ()
    processing_log_topic: str | None = None
    #: ``ksql.logging.processing.rows.include``: an undecodable record's bytes go into its
    #: processing-log entry (``recordB64``); off by default, as in ksqlDB
    log_rows: bool = False
    query_id: str = "streamsql"
    batch_rows: int = 20000
    poll_timeout_s: float = 120.0
    kafka: dict[str, str] = field(default_factory=dict)
    #: a windowed source (TUMBLING/HOPPING/SESSION): keys end with Kafka Streams' window suffix,
    #: exposed as WINDOWSTART/WINDOWEND; time windows' ends are start + size
    window_type: str | None = None
    window_size_ms: int | None = None
    #: a BIGINT or TIMESTAMP column that is the record's time (ksqlDB's TIMESTAMP property);
    #: ``timestamp_throw``: a record without a usable time fails the query instead of being dropped
    timestamp_column: str | None = None
    timestamp_throw: bool = False
    #: the Schema Registry client configurations the formats need (formats/schema_registry_settings.py)
    registry_clients: str | None = None
    #: the WHERE conjuncts applied to each decoded batch (``planner/pushdown.py``'s JSON tree);
    #: Spark still applies the whole WHERE after the reader
    source_filter: str | None = None
    #: the query's whole stateless step and its sink, run in the reading task (``kafka/pipe.py``)
    pipe: str | None = None

    @staticmethod
    def parse(options: Mapping[str, str]) -> SourceOptions:
        bootstrap = _opt(options, "kafka.bootstrap.servers")
        topic = _opt(options, "topic")
        if not bootstrap:
            raise ConfigError("the Kafka source needs option 'kafka.bootstrap.servers'")
        if not topic:
            raise ConfigError("the Kafka source needs option 'topic'")
        starting, start_at = _starting_offsets(_opt(options, "startingOffsets", "latest") or "latest", topic)
        max_records = _opt(options, "maxRecordsPerBatch")
        if max_records is not None and int(max_records) < 1:
            raise ConfigError(f"maxRecordsPerBatch must be at least 1, not {max_records}")
        headers = json.loads(_opt(options, "headerColumns", "[]") or "[]")
        return SourceOptions(
            bootstrap=bootstrap, topic=topic, starting=starting, start_at=start_at,
            max_records=int(max_records) if max_records else None,
            key_spec=_opt(options, "keySpec"), value_spec=_opt(options, "valueSpec"),
            header_columns=tuple((n, t, r, h) for n, t, r, h in headers),
            processing_log_topic=_opt(options, "processingLogTopic") or None,
            log_rows=(_opt(options, "processingLogRows") or "").lower() == "true",
            query_id=_opt(options, "queryId", "streamsql") or "streamsql",
            batch_rows=int(_opt(options, "arrowBatchRows", "20000") or 20000),
            poll_timeout_s=float(_opt(options, "pollTimeoutMs", "120000") or 120000) / 1000.0,
            kafka=kafka_settings(options),
            window_type=(_opt(options, "windowType") or "").upper() or None,
            window_size_ms=int(_opt(options, "windowSizeMs") or 0) or None,
            timestamp_column=_opt(options, "timestampColumn") or None,
            timestamp_throw=(_opt(options, "timestampThrowOnInvalid") or "").lower() == "true",
            registry_clients=_opt(options, registry_settings.OPTION),
            source_filter=_opt(options, "sourceFilter") or None,
            pipe=_opt(options, PIPE_OPTION) or None,
        )

    @property
    def decoded(self) -> bool:
        return self.key_spec is not None or self.value_spec is not None


def _starting_offsets(text: str, topic: str) -> tuple[str, dict[int, int] | None]:
    """``earliest``, ``latest``, or Spark's JSON form ``{"topic": {"0": 23, "1": -1}}`` (offsets
    of this source's topic; -2 earliest, -1 latest) pinned."""
    value = text.strip()
    if value.lower() in ("earliest", "latest"):
        return value.lower(), None
    form = json.dumps({topic: {"<partition>": "<offset>"}}).replace('"<offset>"', "<offset>")
    problem = f"startingOffsets must be 'earliest', 'latest' or {form}, not '{value}'"
    try:
        given = json.loads(value)
    except ValueError:
        raise ConfigError(problem) from None
    offsets = given.get(topic) if isinstance(given, dict) and set(given) == {topic} else None
    if not isinstance(offsets, dict):
        raise ConfigError(problem)
    try:
        start_at = {int(p): int(o) for p, o in offsets.items()}
    except (TypeError, ValueError):
        raise ConfigError(problem) from None
    if any(p < 0 or o < -2 for p, o in start_at.items()):
        raise ConfigError(problem)
    return "pinned", start_at


def _spec(text: str | None) -> FormatSpec:
    """The FormatSpec of one side (no columns when absent). Imported lazily: raw mode must work
    without loading the formats package."""
    from streamsql.formats.base import FormatSpec

    return FormatSpec.from_json(text) if text else FormatSpec("NONE", ())


def header_type(role: str) -> T.SqlType:
    """Header columns have fixed types, whatever the type text says (ksqlDB enforces them)."""
    if role == "headers":
        return _HEADERS_TYPE
    if role == "header":
        return T.BYTES
    raise ConfigError(f"header column role must be 'headers' or 'header', not '{role}'")


def source_schema(opts: SourceOptions) -> StructType:
    """Raw mode: Kafka's own fields. Decoded mode: key columns, value columns, header columns,
    then ROWTIME, ROWPARTITION, ROWOFFSET, __HEADERS, __TOMBSTONE."""
    if not opts.decoded:
        return RAW_SCHEMA
    fields = [StructField(c.name, T.to_spark(c.type)) for spec in (_spec(opts.key_spec), _spec(opts.value_spec))
              for c in spec.columns]
    fields += [StructField(n, T.to_spark(header_type(role))) for n, _t, role, _k in opts.header_columns]
    if opts.window_type:
        fields += [StructField(T.WINDOWSTART, LongType()), StructField(T.WINDOWEND, LongType())]
    fields += [StructField(T.ROWTIME, LongType()), StructField(T.ROWPARTITION, IntegerType()),
               StructField(T.ROWOFFSET, LongType()), StructField(HEADERS_COL, T.to_spark(_HEADERS_TYPE)),
               StructField(TOMBSTONE_COL, BooleanType())]
    return StructType(fields)


# ---------------------------------------------------------------------------------------------
# offsets
# ---------------------------------------------------------------------------------------------

def encode_offsets(offsets: Mapping[int, int]) -> dict[str, int]:
    """``{"0": 5, "1": 7}``: string keys (JSON), ascending partition order (stable text)."""
    return {str(p): int(offsets[p]) for p in sorted(offsets)}


def decode_offsets(offsets: Mapping[str, Any] | None) -> dict[int, int]:
    return {int(p): int(o) for p, o in (offsets or {}).items()}


def rate_limit(start: Mapping[int, int], end: Mapping[int, int], max_rows: int) -> dict[int, int]:
    """Admit at most ``max_rows`` records, shared in proportion to each partition's backlog.

    Floors the proportional shares and hands the remainder out one record at a time (largest
    fractional share first), so a batch holds exactly ``min(max_rows, backlog)`` records and
    never stalls (Spark's own Kafka source rounds small shares up and can exceed the limit)."""
    backlog = {p: max(end[p] - start.get(p, 0), 0) for p in end}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(end)
    shares = {p: max_rows * n / total for p, n in backlog.items()}
    take = {p: int(s) for p, s in shares.items()}
    left = max_rows - sum(take.values())
    for p in sorted(backlog, key=lambda q: (-(shares[q] - take[q]), q)):
        if left <= 0:
            break
        if take[p] < backlog[p]:
            take[p] += 1
            left -= 1
    return {p: start.get(p, 0) + take[p] for p in end}


@dataclass
class KafkaInputPartition(InputPartition):
    """One Spark task: records ``[start, end)`` of one Kafka partition."""

    partition: int
    start: int
    end: int


class _OffsetsMixin:
    """Driver-side bookkeeping shared by the streaming and the batch reader."""

    opts: SourceOptions
    _ends: EndOffsets | None

    def _tracker(self) -> EndOffsets:
        from streamsql.kafka.admin import EndOffsets

        ends = getattr(self, "_ends", None)
        if ends is None:
            ends = self._ends = EndOffsets(self.opts.bootstrap, self.opts.topic, self.opts.kafka)
        return ends

    def __getstate__(self) -> dict[str, Any]:
        """Clients stay in the driver process; workers get options and schema only."""
        state = dict(self.__dict__)
        state["_ends"] = None
        return state

    def _start(self, tracker: EndOffsets, parts: list[int]) -> dict[int, int]:
        """Where a new query begins in each partition. Pinned offsets (resolved when the
        statement was accepted) name the partitions of that moment: one added since begins at
        its earliest offset, as one added while the query runs."""
        if self.opts.start_at is None:
            return tracker.earliest(parts) if self.opts.starting == "earliest" else tracker.ends(parts)
        given = self.opts.start_at
        latest = tracker.ends([p for p in parts if given.get(p) == -1])
        earliest = tracker.earliest([p for p in parts if given.get(p, -2) == -2])
        return {p: given[p] if given.get(p, -2) >= 0 else latest.get(p, earliest.get(p, 0)) for p in parts}

    def _partitions(self, start: Mapping[int, int], end: Mapping[int, int]) -> list[KafkaInputPartition]:
        # A partition missing from ``start`` appeared after the batch began: read it from 0
        # (earliest; the consumer skips to the oldest record if retention removed some).
        return [KafkaInputPartition(p, start.get(p, 0), e) for p, e in sorted(end.items()) if e > start.get(p, 0)]



def _report_crashes() -> None:
    """Made in Spark's streaming source runner, a process of its own whose death the JVM sees
    only as end-of-file: a fatal signal there (a crash in a native client) prints every
    thread's Python stack to its stderr, which Spark copies to the engine's."""
    import faulthandler

    if not faulthandler.is_enabled():
        faulthandler.enable(all_threads=True)

class KafkaStreamReader(_OffsetsMixin, DataSourceStreamReader, SupportsTriggerAvailableNow):
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


class KafkaBatchReader(_OffsetsMixin, DataSourceReader):
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


# ---------------------------------------------------------------------------------------------
# workers: read a range
# ---------------------------------------------------------------------------------------------

#: idle readers of this process, per cluster and settings. A read takes one out and puts it back
#: when done (:func:`_checkout`, :func:`_checkin`), so two threads of one process (concurrent pull
#: queries in the server) never assign the same consumer at once.
_IDLE: dict[tuple[str, tuple[tuple[str, str], ...], int], list[Consumer]] = {}
#: idle readers kept per key; more are closed when returned
_IDLE_PER_KEY = 2
_CONSUMERS_LOCK = threading.Lock()
#: topics whose metadata each cached consumer has (by ``id`` of the consumer)
_KNOWN_TOPICS: dict[int, set[str]] = {}


#: A range that ends at the log end leaves a fetch waiting at the broker for new data (up to
#: ``fetch.wait.max.ms``), and the next ``assign`` of the reused consumer waits for it to return:
#: at librdkafka's 100 ms, a micro-batch of a few records spent most of its read there. A backlog
#: is unaffected (the broker answers as soon as it has data), and the consumer is unassigned, so
#: not fetching at all, between ranges.
_READER_FETCH_WAIT_MS = 5
#: How far a reader fetches ahead of what it has consumed. librdkafka prefetches a partition up
#: to ``queued.min.messages`` (200,000 in :func:`consumer_config`) or 64 MB, but a range read
#: stops at its end offset and unassigns, which drops everything fetched past it: on a backlog
#: the broker served up to twice the records a query read, and each task worker kept the 64 MB
#: high-water mark. One Arrow batch of records (``arrowBatchRows``) or 8 MB ahead keeps the
#: fetches overlapping the decoding (W1 at 1M records, docs/performance.md: the broker's CPU
#: 2.8-3.6 → 1.0-1.4 s, each task worker's PSS ~170 → ~115 MB, the same records/s).
_READER_PREFETCH_KBYTES = 8192


def _reader_key(opts: SourceOptions) -> tuple[str, tuple[tuple[str, str], ...], int]:
    return (opts.bootstrap, tuple(sorted(opts.kafka.items())), opts.batch_rows)


def reader_config(opts: SourceOptions) -> dict[str, Any]:
    """The librdkafka settings of a range reader: :func:`consumer_config`'s, a short fetch wait
    and a bounded prefetch (see above); the query's own Kafka settings win."""
    from streamsql.kafka.admin import consumer_config

    return consumer_config(opts.bootstrap, {
        "fetch.wait.max.ms": _READER_FETCH_WAIT_MS, "queued.min.messages": opts.batch_rows,
        "queued.max.messages.kbytes": _READER_PREFETCH_KBYTES, **opts.kafka})


def _checkout(opts: SourceOptions) -> Consumer:
    """An idle reader of ``opts``' cluster and settings, or a new one: creating one costs a
    metadata round trip, and Spark reuses Python workers across tasks and batches. Give it back
    with :func:`_checkin`."""
    from confluent_kafka import Consumer

    with _CONSUMERS_LOCK:
        idle = _IDLE.get(_reader_key(opts))
        c = idle.pop() if idle else None
    if c is None:
        c = Consumer(reader_config(opts))
    with _CONSUMERS_LOCK:
        known = _KNOWN_TOPICS.setdefault(id(c), set())
    if opts.topic not in known:
        # A long-lived consumer learns a topic assigned after its start only at its next
        # periodic metadata scan (~1 s in librdkafka): ask for the topic's metadata now.
        try:
            c.list_topics(opts.topic, timeout=opts.poll_timeout_s)
            known.add(opts.topic)
        except Exception:  # noqa: BLE001 - the read itself reports an unreachable broker
            pass
    return c


def _checkin(opts: SourceOptions, consumer: Consumer) -> None:
    """Keep ``consumer`` (unassigned) for the next read of the same cluster and settings, or
    close it when enough are kept."""
    with _CONSUMERS_LOCK:
        idle = _IDLE.setdefault(_reader_key(opts), [])
        if len(idle) < _IDLE_PER_KEY:
            idle.append(consumer)
            return
        _KNOWN_TOPICS.pop(id(consumer), None)
    consumer.close()


def close_consumers(bootstrap: str) -> None:
    """Close this process's idle readers of the cluster at ``bootstrap``.

    For a cluster that is gone while the process lives on (an embedded broker stopped):
    librdkafka would otherwise try to reconnect to it, and log each failure, until the process
    ends. And before this process deletes a topic (:meth:`KafkaAdmin.delete_topic`): on tansu, a
    consumer that fetched a topic in the last few tens of milliseconds before its deletion gets
    a fetch answer that crashes librdkafka, and with it the process (docs/reliability.md)."""
    with _CONSUMERS_LOCK:
        closing = [c for key in [k for k in _IDLE if k[0] == bootstrap] for c in _IDLE.pop(key)]
        for consumer in closing:
            _KNOWN_TOPICS.pop(id(consumer), None)
    for consumer in closing:
        consumer.close()


def read_range(opts: SourceOptions, schema: StructType, partition: int, start: int, end: int
               ) -> Iterator[pa.RecordBatch]:
    """Yield Arrow batches holding exactly the records with ``start <= offset < end``.

    Stops on position, not on a record count, so a range that ends on a transaction marker or
    a compaction gap still ends. The same range always yields the same rows (replays)."""
    from confluent_kafka import KafkaError as CKError
    from confluent_kafka import TopicPartition

    if end <= start:
        return
    builder = BatchBuilder(opts, schema, partition)
    consumer = _checkout(opts)
    pos = start
    last_progress = time.monotonic()
    try:
        consumer.assign([TopicPartition(opts.topic, partition, start)])
        while pos < end:
            want = min(opts.batch_rows, end - pos)
            msgs = consumer.consume(want, 0.2)
            rows = []
            for m in msgs:
                err = m.error()
                if err is not None:
                    if err.code() == CKError._PARTITION_EOF:
                        eof = m.offset()
                        assert eof is not None  # an EOF event carries the end offset
                        pos = max(pos, eof)
                        continue
                    if err.retriable() or err.code() == CKError._TRANSPORT:
                        continue
                    raise KafkaError(f"cannot read topic '{opts.topic}' partition {partition}: {err.str()}")
                off = m.offset()
                assert off is not None  # a record always has one (the stubs allow None for error events)
                if off < end:
                    rows.append(m)
                pos = max(pos, off + 1)
            if rows:
                last_progress = time.monotonic()
                yield from builder.build(rows)
            elif pos < end:
                # gaps (transaction markers, compaction) advance the position without records
                (cur,) = consumer.position([TopicPartition(opts.topic, partition)])
                if cur.offset is not None and cur.offset >= 0:
                    if cur.offset > pos:
                        last_progress = time.monotonic()
                    pos = max(pos, cur.offset)
                if time.monotonic() - last_progress > opts.poll_timeout_s:
                    raise KafkaError(
                        f"timed out reading topic '{opts.topic}' partition {partition}: stuck at offset {pos}, "
                        f"expected records up to {end} (were they deleted by retention?)")
    finally:
        try:
            consumer.unassign()
        except Exception:  # noqa: BLE001 - the next assign() resets anyway
            pass
        _checkin(opts, consumer)


class BatchBuilder:
    """Turns confluent-kafka messages into Arrow batches of the source schema."""

    def __init__(self, opts: SourceOptions, schema: StructType, partition: int) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        self.opts = opts
        self.partition = partition
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")
        if opts.decoded:
            self.key_spec = _spec(opts.key_spec)
            self.value_spec = _spec(opts.value_spec)
        self._serdes: tuple[Serde | None, Serde | None] | None = None
        #: the rows a pushed WHERE keeps (tombstones always), applied after decoding, the
        #: processing log and the record times, so a dropped row has had all three
        self.kept = compile_filter(opts.source_filter) if opts.source_filter else None

    def build(self, msgs: list[Any]) -> Iterator[pa.RecordBatch]:
        if self.opts.decoded:
            batch = self._decoded(msgs)
        else:
            batch = self._raw(msgs)
        if batch is not None and batch.num_rows:
            yield batch

    # -- raw ------------------------------------------------------------------------------------

    def _raw(self, msgs: list[Any]) -> pa.RecordBatch:
        n = len(msgs)
        s = self.arrow_schema
        arrays = [
            pa.array([m.key() for m in msgs], pa.binary()),
            pa.array([m.value() for m in msgs], pa.binary()),
            pa.repeat(pa.scalar(self.opts.topic, pa.string()), n),
            pa.repeat(pa.scalar(self.partition, pa.int32()), n),
            pa.array([m.offset() for m in msgs], pa.int64()),
            pa.array([m.timestamp()[1] for m in msgs], pa.int64()),
            headers_array([m.headers() for m in msgs], s.field("headers").type),
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=s)

    # -- decoded --------------------------------------------------------------------------------

    def _serde_pair(self) -> tuple[Serde | None, Serde | None]:
        if self._serdes is None:
            from streamsql.formats import serde_for

            registry_settings.configure_from_option(self.opts.registry_clients)
            self._serdes = (serde_for(self.key_spec) if self.key_spec.columns else None,
                            serde_for(self.value_spec) if self.value_spec.columns else None)
        return self._serdes

    def _decoded(self, msgs: list[Any]) -> pa.RecordBatch | None:
        key_serde, value_serde = self._serde_pair()
        if value_serde is not None and hasattr(value_serde, "inner"):  # VALUE_COMPRESSION: batches of lines
            msgs = self._split_compressed(msgs)
            value_serde = value_serde.inner
        n = len(msgs)
        s = self.arrow_schema
        keys = [m.key() for m in msgs]
        values = [m.value() for m in msgs]
        raw_headers = [m.headers() for m in msgs]
        arrays: list[pa.Array] = []
        bad: dict[int, tuple[str, str]] = {}  # row -> (target, reason)
        if self.opts.window_type:
            keys, starts, ends = split_windowed_keys(keys, self.opts.window_type, self.opts.window_size_ms, bad)
        for serde, spec, data, target in ((key_serde, self.key_spec, keys, "key"),
                                          (value_serde, self.value_spec, values, "value")):
            if serde is None:
                continue
            result = serde.decode(data)
            for i, err in enumerate(result.errors):
                if err is not None and i not in bad:
                    bad[i] = (target, err)
            arrays.extend(result.columns[:len(spec.columns)])
        for name, _t, role, hkey in self.opts.header_columns:
            ftype = s.field(name).type
            if role == "headers":
                arrays.append(headers_array(raw_headers, ftype))
            else:
                arrays.append(pa.array([_last_header(h, hkey) for h in raw_headers], ftype))
        if self.opts.window_type:
            arrays += [pa.array(starts, pa.int64()), pa.array(ends, pa.int64())]
        arrays += [
            pa.array([m.timestamp()[1] for m in msgs], pa.int64()),
            pa.repeat(pa.scalar(self.partition, pa.int32()), n),
            pa.array([m.offset() for m in msgs], pa.int64()),
            headers_array(raw_headers, s.field(HEADERS_COL).type),
            pa.array([v is None for v in values], pa.bool_()),
        ]
        arrays = [a if a.type == f.type else a.cast(f.type) for a, f in zip(arrays, s)]
        batch = pa.RecordBatch.from_arrays(arrays, schema=s)
        if bad:
            report_bad_records(self.opts, [(msgs[i], *bad[i]) for i in sorted(bad)])
        untimed: dict[int, str] = {}
        if self.opts.timestamp_column:
            batch, untimed = self._column_times(batch, [v is None for v in values], bad)
        if bad or untimed:
            batch = batch.filter(pa.array([i not in bad and i not in untimed for i in range(n)], pa.bool_()))
        if self.kept is not None:
            batch = batch.filter(self.kept)
        return batch

    def _column_times(self, batch: pa.RecordBatch, tombstones: list[bool], bad: Mapping[int, Any],
                      ) -> tuple[pa.RecordBatch, dict[int, str]]:
        """ROWTIME from the TIMESTAMP column; the rows without a usable time (besides the
        undecodable ones and tombstones, which keep their record's time) go to the processing
        log (kafka/timestamps.py)."""
        import pyarrow.compute as pc

        from streamsql.kafka import timestamps

        column = self.opts.timestamp_column or ""
        values = batch.column(batch.schema.get_field_index(column))
        times = timestamps.column_times(values)
        kept = pa.array(tombstones, pa.bool_())
        rowtime = batch.schema.get_field_index(T.ROWTIME)
        times = pc.if_else(kept, batch.column(rowtime), times)
        untimed = {i: why for i, why in timestamps.problems(times, values, column, None).items() if i not in bad}
        batch = batch.set_column(rowtime, T.ROWTIME, times)
        if untimed:
            entries = timestamps.entries(batch, untimed, self.opts.query_id, at_sink=False)
            publish(self.opts, entries)
            if self.opts.timestamp_throw:
                timestamps.fail_if_unextractable(times, untimed, entries)
        return batch, untimed

    def _split_compressed(self, msgs: list[Any]) -> list[Any]:
        """Each message becomes one record per line of its decompressed value; messages that
        do not decompress go to the processing log."""
        from streamsql.formats.compression import split_batches

        records, origin, failed = split_batches([m.value() for m in msgs])
        if failed:
            report_bad_records(self.opts, [(msgs[i], "value", reason) for i, reason in sorted(failed.items())])
        return [_BatchedRecord(msgs[i], rec) for rec, i in zip(records, origin)]


@functools.lru_cache(maxsize=64)
def compile_filter(tree_json: str) -> pc.Expression:
    """The pyarrow expression of a pushed WHERE (``planner/pushdown.py`` says which conjuncts
    are pushed and why each evaluates as Spark's would); a tombstone row is always kept.
    Compiled once per worker process and filter (a range read builds a batch builder per
    partition and micro-batch); an expression is immutable, so the readers share it."""
    import pyarrow.compute as pc

    return pc.or_kleene(filter_expression(tree_json), pc.field(TOMBSTONE_COL))


def filter_expression(tree_json: str) -> pc.Expression:
    """The pyarrow expression of ``planner/pushdown.py``'s JSON tree (a null result drops the
    row, as SQL's WHERE does)."""
    import pyarrow.compute as pc

    return _filter_tree(json.loads(tree_json), pc.field, pc.scalar)


def filter_mask(tree_json: str, batch: pa.RecordBatch) -> pa.Array:
    """The same tree evaluated now over ``batch``'s columns, by the same compute functions as
    :func:`filter_expression`'s: which rows it keeps (true), drops (false) or nulls. For a
    small batch (a pull query's few stored rows) this skips building an Acero plan, which
    costs ~0.4 ms per filter."""
    import pyarrow as pa

    return _filter_tree(json.loads(tree_json), batch.column, pa.scalar)


def _filter_tree(node: dict[str, Any], column: Any, scalar: Any) -> Any:
    """One tree, two evaluations: ``column``/``scalar`` make its leaves (expression fields and
    scalars, or a batch's arrays and scalars); the compute functions are the same either way."""
    import pyarrow.compute as pc

    if "column" in node:
        return column(node["column"])
    if "value" in node:
        return scalar(node["value"])
    op, args = node["op"], [_filter_tree(a, column, scalar) for a in node["args"]]
    if op == "and":
        return functools.reduce(pc.and_kleene, args)
    if op == "or":
        return functools.reduce(pc.or_kleene, args)
    if op == "is_null":
        return pc.is_null(args[0])
    if op == "is_valid":
        return pc.is_valid(args[0])
    if op == "java_remainder":  # pyarrow's modulo floors; Java's remainder has the dividend's sign
        value, divisor = args
        floored = pc.modulo(value, divisor)
        return pc.if_else(pc.and_kleene(pc.less(value, 0), pc.not_equal(floored, 0)),
                          pc.subtract(floored, divisor), floored)
    compared = getattr(pc, op)(*args)
    if node.get("nan_kept"):  # Spark orders NaN above every number; pyarrow's comparison is false
        compared = pc.or_kleene(compared, pc.is_nan(args[0]))
    return compared


class _BatchedRecord:
    """One line of a compressed batch: the message's metadata with the line as its value."""

    __slots__ = ("_msg", "_value")

    def __init__(self, msg: Message, value: bytes | None) -> None:
        self._msg, self._value = msg, value

    def value(self) -> bytes | None:
        return self._value

    def __getattr__(self, name: str) -> Any:  # key(), offset(), timestamp(), headers(), ...
        return getattr(self._msg, name)


def split_windowed_keys(
        keys: list[bytes | None], window_type: str, size_ms: int | None, bad: dict[int, tuple[str, str]],
) -> tuple[list[bytes | None], list[int | None], list[int | None]]:
    """Kafka Streams' windowed keys: inner key bytes, then the window start (8 bytes, time
    windows) or the window end and start (16 bytes, session windows)."""
    session = window_type == "SESSION"
    suffix = 16 if session else 8
    inner: list[bytes | None] = []
    starts: list[int | None] = []
    ends: list[int | None] = []
    for i, k in enumerate(keys):
        if k is None or len(k) < suffix:
            if k is not None and i not in bad:
                bad[i] = ("key", f"windowed key of {len(k)} bytes is shorter than its {suffix}-byte window suffix")
            inner.append(None)
            starts.append(None)
            ends.append(None)
            continue
        if session:
            end, start = struct.unpack(">qq", k[-16:])
        else:
            (start,) = struct.unpack(">q", k[-8:])
            end = start + size_ms if size_ms else None
        inner.append(k[:-suffix])
        starts.append(start)
        ends.append(end)
    return inner, starts, ends


def _last_header(headers: list[tuple[str, bytes | None]] | None, key: str | None) -> bytes | None:
    """ksqlDB's ``HEADER('k')`` column: the value of the last header named ``k``."""
    found = None
    for k, v in headers or ():
        if k == key:
            found = v
    return found


def headers_array(headers: Sequence[list[tuple[str, bytes | None]] | None], list_type: pa.DataType) -> pa.Array:
    """ARRAY<STRUCT<key, value>> of each record's headers; a record without headers gets an
    empty array (ksqlDB shows ``[]``)."""
    n = len(headers)
    if not any(headers):  # the common case, without building Python objects
        offsets = pa.array([0] * (n + 1), pa.int32())
        return pa.ListArray.from_arrays(offsets, pa.array([], list_type.value_type), type=list_type)
    kname, vname = (f.name for f in list_type.value_type)
    return pa.array([[{kname: k, vname: v} for k, v in (h or ())] for h in headers], list_type)


# ---------------------------------------------------------------------------------------------
# processing log
# ---------------------------------------------------------------------------------------------

def processing_log_record(opts: SourceOptions, msg: Any, target: str, reason: str) -> dict[str, Any]:
    """ksqlDB's processing-log shape for a deserialization error (research/ksqldb.md §1.10)."""
    raw = msg.key() if target == "key" else msg.value()
    return plog.entry(opts.query_id, plog.DESERIALIZATION_ERROR, {
        "target": target,
        "errorMessage": f"Failed to deserialize {target} from topic: {msg.topic()}. {reason}",
        "recordB64": base64.b64encode(raw).decode("ascii") if raw is not None and opts.log_rows else None,
        "cause": [reason],
        "topic": msg.topic(),
        "partition": msg.partition(),
        "offset": msg.offset(),
    })


def report_bad_records(opts: SourceOptions, bad: list[tuple[Any, str, str]]) -> None:
    """Log each undecodable record, and write it to the processing-log topic when configured."""
    publish(opts, [processing_log_record(opts, m, target, reason) for m, target, reason in bad])


def publish(opts: SourceOptions, entries: list[dict[str, Any]]) -> None:
    plog.LogTarget(opts.bootstrap, opts.processing_log_topic).publish(entries, common_settings(opts.kafka))
