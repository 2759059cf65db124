"""Exactly-once writes: ``processing.guarantee=exactly_once_v2``.

ksqlDB (Kafka Streams) commits a task's output records and its input offsets in one Kafka
transaction. Here the input offsets live in Spark's checkpoint, which Kafka cannot commit, so a
micro-batch that was written but not yet committed by Spark is replayed after a crash. What makes
the replay harmless is a marker committed *inside* the same transaction as the records:

* every write task of a micro-batch is one transaction, whose ``transactional.id`` names the
  Spark query (its id, kept in the checkpoint: a reset checkpoint is a new writer), the output
  topic and the task's partition (the same on a replay: Spark replays a batch over the same
  offset ranges, and an aggregation's output over the same shuffle partitions);
* the transaction also commits, for a consumer group of that same name, the offset
  ``batch + 1`` on partition 0 of the output topic (``send_offsets_to_transaction``): Kafka makes
  it visible exactly when the records are, and never if the transaction aborts;
* a task first reads that offset (``committed``, stable offsets only): when it already passed
  the batch, the batch's records are in the topic and the task writes nothing.

A task killed half-way leaves an open transaction; the next producer with its id (the retry, or
the replay after a restart) fences it, and Kafka aborts it. Two attempts of one task never both
commit: the later one's ``init_transactions`` fences the earlier. Consumers that read the output
with ``isolation.level=read_committed`` (streamsql's own, under this guarantee) see each record
once.

The marker is an ordinary committed offset: it expires with the group's offsets
(``offsets.retention.minutes``, 7 days by default) when the query writes nothing for that long,
after which a replay of the last batch would write it again (docs/reliability.md).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from streamsql.errors import ConfigError, KafkaError

if TYPE_CHECKING:
    from confluent_kafka import Consumer, Producer

#: the property, as ksqlDB names it (``ksql.streams.`` may prefix it)
GUARANTEE_PROPERTY = "processing.guarantee"
AT_LEAST_ONCE = "at_least_once"
EXACTLY_ONCE_V2 = "exactly_once_v2"
#: Kafka Streams' older names for the same guarantee (deprecated there, accepted as v2 here)
_EXACTLY_ONCE_ALIASES = ("exactly_once", "exactly_once_beta")
#: the sink option that turns transactions on
OPTION = "exactlyOnce"
#: Spark's local properties every task of a micro-batch carries
_BATCH_ID_PROPERTY = "streaming.sql.batchId"
_QUERY_ID_PROPERTY = "sql.streaming.queryId"
TIMEOUT_S = 60.0


def guarantee(value: str) -> str:
    """``processing.guarantee`` as ``at_least_once`` or ``exactly_once_v2`` (empty: the
    default, at-least-once), or a configuration error naming the property and the value."""
    choice = value.strip().lower() or AT_LEAST_ONCE
    if choice in _EXACTLY_ONCE_ALIASES:
        return EXACTLY_ONCE_V2
    if choice not in (AT_LEAST_ONCE, EXACTLY_ONCE_V2):
        raise ConfigError(f"Invalid value {value} for configuration {GUARANTEE_PROPERTY}: "
                          f"String must be one of: {AT_LEAST_ONCE}, {EXACTLY_ONCE_V2}")
    return choice


@dataclass(frozen=True)
class BatchTask:
    """Which write this task is: the Spark query (its id), the micro-batch, the task's partition."""

    query_id: str
    batch_id: int
    partition: int

    def transactional_id(self, topic: str) -> str:
        return f"streamsql-{self.query_id}-{topic}-{self.partition}"


def current_task() -> BatchTask:
    """The running Spark task's :class:`BatchTask`, from the local properties Spark gives every
    task of a streaming micro-batch (the ``foreachBatch`` writes' included)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    batch = ctx.getLocalProperty(_BATCH_ID_PROPERTY) if ctx is not None else None
    query = ctx.getLocalProperty(_QUERY_ID_PROPERTY) if ctx is not None else None
    if ctx is None or batch is None or query is None:
        raise KafkaError(f"{GUARANTEE_PROPERTY}={EXACTLY_ONCE_V2} writes only from a streaming query's tasks")
    return BatchTask(query, int(batch), ctx.partitionId())


_MARKER_READERS: dict[str, Consumer] = {}
_MARKER_READERS_LOCK = threading.Lock()


def _marker_reader(bootstrap: str, transactional_id: str, settings: dict[str, str]) -> Consumer:
    """This process's consumer of the group that holds ``transactional_id``'s marker (it reads
    the marker and gives the transaction the group's metadata; it never joins the group)."""
    from confluent_kafka import Consumer

    from streamsql.kafka.clients import client_config

    with _MARKER_READERS_LOCK:
        reader = _MARKER_READERS.get(transactional_id)
        if reader is None:
            reader = _MARKER_READERS[transactional_id] = Consumer(client_config(bootstrap, {
                **settings, "group.id": transactional_id, "enable.auto.commit": False,
                "isolation.level": "read_committed"}))
        return reader


def _producer(bootstrap: str, transactional_id: str, settings: dict[str, str]) -> Producer:
    """A new transactional producer: its ``init_transactions`` fences every earlier producer of
    the id (a killed attempt's, another Python worker's) and ends their open transactions. One
    per task and batch (~50 ms here): Spark runs a partition's tasks in whichever Python worker
    is free, so a producer kept per worker would be fenced by the other workers' in turn."""
    from confluent_kafka import Producer

    from streamsql.kafka.clients import producer_config

    producer = Producer(producer_config(bootstrap, {**settings, "transactional.id": transactional_id,
                                                    "transaction.timeout.ms": int(TIMEOUT_S * 1000)}))
    producer.init_transactions(TIMEOUT_S)
    return producer


def written_batches(bootstrap: str, topic: str, task: BatchTask, settings: dict[str, str] | None = None) -> int:
    """How many micro-batches of ``task``'s writer are in ``topic``: its marker (the next batch
    id to write), 0 when it never committed one."""
    from confluent_kafka import TopicPartition

    reader = _marker_reader(bootstrap, task.transactional_id(topic), dict(settings or {}))
    return max(reader.committed([TopicPartition(topic, 0)], timeout=TIMEOUT_S)[0].offset, 0)


def write_once(bootstrap: str, topic: str, settings: dict[str, str], batches: Iterable[Any],
               produce: Callable[[Producer, Iterable[Any]], int], task: BatchTask | None = None) -> int:
    """Write ``batches`` (through ``produce``, which sends them with the producer it is given and
    returns the count once every record is acknowledged) in one transaction with the task's
    marker, unless the marker says this batch is written already; returns the records written.
    A task with no rows writes nothing and no marker (its replay has no rows either)."""
    from confluent_kafka import KafkaException, TopicPartition

    rows = [b for b in batches if getattr(b, "num_rows", 1)]
    if not rows:
        return 0
    task = task or current_task()
    txn_id = task.transactional_id(topic)
    try:
        reader = _marker_reader(bootstrap, txn_id, settings)
        producer = _producer(bootstrap, txn_id, settings)
        if reader.committed([TopicPartition(topic, 0)], timeout=TIMEOUT_S)[0].offset > task.batch_id:
            return 0  # a replay of a batch this task committed before the crash
        producer.begin_transaction()
        try:
            count = produce(producer, rows)
            producer.send_offsets_to_transaction(
                [TopicPartition(topic, 0, task.batch_id + 1)], reader.consumer_group_metadata(), TIMEOUT_S)
            producer.commit_transaction(TIMEOUT_S)
        except BaseException:
            _abort(producer)
            raise
        return count
    except KafkaException as e:
        raise KafkaError(f"cannot write to topic '{topic}' in transaction '{txn_id}': {e.args[0].str()}") from None


def _abort(producer: Producer) -> None:
    """Abort the open transaction if Kafka still lets this producer do so (a fenced one cannot;
    the broker aborts it for the writer that fenced it)."""
    try:
        producer.abort_transaction(TIMEOUT_S)
    except Exception:  # noqa: BLE001 - the original failure is what the caller reports
        pass
