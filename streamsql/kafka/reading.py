"""Reading exact offset ranges on the workers: ``[start, end)`` of one partition, as Arrow
batches (``kafka/decoding.py``), through this process's pooled consumers.

A range read stops on position, not on a record count, so a range that ends on a transaction
marker or a compaction gap still ends, and the same range always yields the same rows (replays).
Workers keep their consumers (Spark reuses Python workers across tasks and batches); clients are
never pickled.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.types import StructType

from streamsql.errors import KafkaError
from streamsql.kafka.clients import consumer_config
from streamsql.kafka.decoding import BatchBuilder
from streamsql.kafka.options import SourceOptions

if TYPE_CHECKING:
    from confluent_kafka import Consumer

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


#: what a reader of batched records (``VALUE_COMPRESSION``) assumes before its first records: its
#: first Arrow batch asks for ``arrowBatchRows`` / 1,000 records (20 of them by default)
_PROBE_ROWS_PER_RECORD = 1000


def read_range(opts: SourceOptions, schema: StructType, partition: int, start: int, end: int
               ) -> Iterator[pa.RecordBatch]:
    """Yield Arrow batches holding exactly the records with ``start <= offset < end``.

    Stops on position, not on a record count, so a range that ends on a transaction marker or
    a compaction gap still ends. The same range always yields the same rows (replays).

    An Arrow batch holds about ``arrowBatchRows`` rows, not records: a ``VALUE_COMPRESSION``
    record is a batch of lines, each a row, so the reader asks for fewer records per batch. It
    learns the rows per record from what it has read, starting from a few records; without that,
    seed 003's first micro-batch put ~190,000 rows (9,400 records) in one Arrow batch and the
    task's worker held them all as Python objects at once (docs/performance.md)."""
    from confluent_kafka import KafkaError as CKError
    from confluent_kafka import TopicPartition

    if end <= start:
        return
    builder = BatchBuilder(opts, schema, partition)
    consumer = _checkout(opts)
    pos = start
    last_progress = time.monotonic()
    # rows per record, rounded up: 1 for a plain topic; a batched one's is learnt from a probe
    rows_per_record = _PROBE_ROWS_PER_RECORD if builder.splits_records else 1
    try:
        consumer.assign([TopicPartition(opts.topic, partition, start)])
        while pos < end:
            want = max(1, min(opts.batch_rows // rows_per_record, end - pos))
            msgs = consumer.consume(want, 0.2)
            rows = []
            went_back = False
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
                if off < pos:
                    # before the range, or read already: the consumer went back (an "offset out of
                    # range" answer resets it to the log start). Yielding it would duplicate or
                    # add a record, and counting it as progress kept such a reader going for ever
                    went_back = True
                    continue
                if off < end:
                    rows.append(m)
                pos = off + 1
            if went_back:
                consumer.assign([TopicPartition(opts.topic, partition, pos)])
            if rows:
                last_progress = time.monotonic()
                built = 0
                for batch in builder.build(rows):
                    built += batch.num_rows
                    yield batch
                if builder.splits_records and built:
                    rows_per_record = max(1, -(-built // len(rows)))
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


#: how long one wait for records of a followed topic lasts: the longest a row waits in the
#: client's queue before a follower hands it on, and how soon a closed follower notices
_FOLLOW_WAIT_S = 0.05
#: a follower's fetch waits at the broker up to this long for records (answered as soon as one
#: arrives): an idle followed topic costs the broker a fetch per this interval
_FOLLOW_FETCH_WAIT_MS = 250


def follow(opts: SourceOptions, schema: StructType, starts: dict[int, int], stopped: Callable[[], bool]
           ) -> Iterator[pa.RecordBatch]:
    """Yield Arrow batches of every record at or after ``starts`` (partition → offset; -2 is the
    earliest) as they arrive, until ``stopped()``: what a push query the server answers itself
    reads (``runtime/push.py``), decoded as the streaming source's tasks decode (bad records to
    the processing log, the pushed WHERE, record times). Partitions added after the start are not
    followed. Its own consumer, closed at the end: a follower lives as long as its client."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka import KafkaError as CKError

    builders = {p: BatchBuilder(opts, schema, p) for p in starts}
    # a follower waits at the broker for new records (a long poll), unlike a range reader
    consumer = Consumer({**reader_config(opts), "fetch.wait.max.ms": _FOLLOW_FETCH_WAIT_MS, **opts.kafka})
    try:
        consumer.assign([TopicPartition(opts.topic, p, o) for p, o in sorted(starts.items())])
        while not stopped():
            msgs = consumer.consume(opts.batch_rows, _FOLLOW_WAIT_S)
            by_partition: dict[int, list[Any]] = {}
            for m in msgs:
                err = m.error()
                if err is not None:
                    if err.code() == CKError._PARTITION_EOF or err.retriable() or err.code() == CKError._TRANSPORT:
                        continue
                    raise KafkaError(f"cannot read topic '{opts.topic}': {err.str()}")
                partition = m.partition()
                assert partition is not None  # a record always has one
                by_partition.setdefault(partition, []).append(m)
            for partition, rows in by_partition.items():
                yield from builders[partition].build(rows)
    finally:
        consumer.close()
