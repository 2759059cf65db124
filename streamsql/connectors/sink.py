"""The executor side of every sink connector: a micro-batch's raw Kafka records, partition by
partition, into the connector's writer, with bad records sent to the processing log.

The builder runs :func:`partition_task` through ``mapInArrow`` on each micro-batch: one Spark
task per Kafka partition of the batch, so a partition's records reach the external system in
offset order (the last write of a key wins, as with Connect's one task per partition), and no
record passes through the driver. The task returns one row (how many records it handled) so the
batch's write completes before Spark commits the batch's offsets: a batch that fails is written
again from its first record after a restart, which is why sinks write idempotently (document ids).
"""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa

log = logging.getLogger("streamsql.connectors")
processing_log = logging.getLogger("streamsql.processing")

#: the one row each task returns
RESULT_SCHEMA = "records BIGINT"


@dataclass(frozen=True)
class RawRecord:
    """One Kafka record as the source's raw mode reads it."""

    key: bytes | None
    value: bytes | None
    topic: str
    partition: int
    offset: int
    timestamp: int | None

    def where(self) -> str:
        return f"topic {self.topic} partition {self.partition} offset {self.offset}"


class PartitionWriter(Protocol):
    """What a sink connector's configuration makes in the executor: write records in order,
    reporting each record it cannot write to ``bad``; ``close`` flushes what it buffered."""

    def write(self, record: RawRecord, bad: BadRecords) -> None: ...

    def close(self, bad: BadRecords) -> None: ...


class SinkConfig(Protocol):
    """A sink connector's typed configuration (picklable: it travels to the executors)."""

    name: str

    def writer(self) -> PartitionWriter: ...

    def describe_writes(self) -> str: ...


@dataclass(frozen=True)
class LogTarget:
    """Where a connector's bad records are reported: the processing-log topic (None: the
    worker's log only)."""

    bootstrap: str
    topic: str | None


class BadRecords:
    """Collects one task's unwritable records and writes them to the processing log as ksqlDB's
    entries: a record the converter cannot read is a ``deserializationError`` (type 0), one the
    external system rejects a ``productionError`` (type 2)."""

    def __init__(self, connector: str, target: LogTarget) -> None:
        self.connector = connector
        self.target = target
        self.entries: list[dict[str, Any]] = []

    def unreadable(self, record: RawRecord, side: str, reason: str) -> None:
        raw = record.key if side == "key" else record.value
        message = f"Failed to deserialize {side} from topic: {record.topic}. {reason}"
        self._add(record, 0, {"deserializationError": {
            "target": side, "errorMessage": message, "cause": [reason],
            "recordB64": base64.b64encode(raw).decode("ascii") if raw is not None else None,
            "topic": record.topic, "partition": record.partition, "offset": record.offset}}, message)

    def rejected(self, record: RawRecord, reason: str) -> None:
        message = f"Connector {self.connector} could not write the record at {record.where()}: {reason}"
        self._add(record, 2, {"productionError": {"errorMessage": message}}, message)

    def _add(self, record: RawRecord, kind: int, body: dict[str, Any], message: str) -> None:
        processing_log.error("connector %s: dropped record at %s: %s", self.connector, record.where(), message)
        entry: dict[str, Any] = {"deserializationError": None, "recordProcessingError": None,
                                 "productionError": None, "serializationError": None, "kafkaStreamsThreadError": None}
        entry.update(body)
        self.entries.append({"level": "ERROR", "logger": f"connector.{self.connector}",
                             "time": int(time.time() * 1000), "message": {"type": kind, **entry}})

    def flush(self) -> None:
        if not self.entries or not self.target.topic:
            self.entries.clear()
            return
        from streamsql.kafka.sink import cached_producer

        try:
            producer = cached_producer(self.target.bootstrap, {})
            for e in self.entries:
                producer.produce(self.target.topic, value=json.dumps(e).encode("utf-8"))
            producer.flush(30)
        except Exception as exc:  # noqa: BLE001 - the log must not fail the connector
            log.error("cannot write to processing log topic '%s': %s", self.target.topic, exc)
        self.entries.clear()


def write_all(config: SinkConfig, records: Iterable[RawRecord], bad: BadRecords) -> int:
    """One task's work: every record through one writer, in order, then ``close``; how many."""
    writer = config.writer()
    count = 0
    for record in records:
        writer.write(record, bad)
        count += 1
    writer.close(bad)
    return count


def _records(batches: Iterator[pa.RecordBatch]) -> Iterator[RawRecord]:
    for batch in batches:
        columns = batch.to_pydict()
        for key, value, topic, partition, offset, timestamp in zip(
                columns["key"], columns["value"], columns["topic"], columns["partition"],
                columns["offset"], columns["timestamp"], strict=True):
            yield RawRecord(key, value, topic, partition, offset, timestamp)


def partition_task(config: SinkConfig, target: LogTarget) -> Any:
    """The ``mapInArrow`` function of one connector: :func:`write_all` over the task's records,
    then one row with the count."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        bad = BadRecords(config.name, target)
        try:
            count = write_all(config, _records(batches), bad)
        finally:
            bad.flush()
        yield pa.RecordBatch.from_pydict({"records": [count]}, schema=pa.schema([("records", pa.int64())]))

    return run
