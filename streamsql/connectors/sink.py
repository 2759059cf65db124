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
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa

from streamsql.kafka import processing_log
from streamsql.kafka.processing_log import LogTarget

log = logging.getLogger("streamsql.connectors")

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
        self.entries.append(processing_log.entry(self._logger, processing_log.DESERIALIZATION_ERROR, {
            "target": side, "errorMessage": message, "cause": [reason],
            "recordB64": base64.b64encode(raw).decode("ascii") if raw is not None else None,
            "topic": record.topic, "partition": record.partition, "offset": record.offset}))

    def rejected(self, record: RawRecord, reason: str) -> None:
        message = f"Connector {self.connector} could not write the record at {record.where()}: {reason}"
        self.entries.append(processing_log.entry(self._logger, processing_log.PRODUCTION_ERROR,
                                                 {"errorMessage": message}))

    @property
    def _logger(self) -> str:
        return f"connector.{self.connector}"

    def flush(self) -> None:
        self.target.publish(self.entries)
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
