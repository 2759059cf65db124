"""The range reader's loop (kafka/reading.read_range) against a consumer that goes back, as
librdkafka's does when a fetch is answered "offset out of range" and ``auto.offset.reset=earliest``
moves it to the log start. No broker: tansu waits at a fetch past the log end instead of
answering so (so a real-broker test cannot make the reset happen), and Apache Kafka answers so
only for a range its leader does not hold. The messages are confluent_kafka's own."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Message, TopicPartition

from streamsql.errors import KafkaError
from streamsql.kafka import reading
from streamsql.kafka.decoding import source_schema
from streamsql.kafka.options import SourceOptions


def _record(offset: int) -> Message:
    return Message(topic="t", partition=0, offset=offset, key=None, value=b"%d" % offset, timestamp=(1, 1000 + offset),
                   headers=None, error=None)


class GoesBack:
    """A consumer whose every fetch at ``pos`` first rewinds to the log start (``resets`` times),
    then serves the records from where it was assigned."""

    def __init__(self, log_end: int, resets: int) -> None:
        self.log_end, self.resets, self.pos = log_end, resets, 0
        self.assigned: list[int] = []

    def assign(self, parts: list[TopicPartition]) -> None:
        self.pos = parts[0].offset
        self.assigned.append(self.pos)

    def consume(self, n: int, timeout: float) -> list[Message]:
        if self.resets > 0:
            self.resets -= 1
            self.pos = 0  # the reset
        out = [_record(o) for o in range(self.pos, min(self.pos + n, self.log_end))]
        self.pos += len(out)
        return out

    def position(self, parts: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition("t", 0, self.pos)]

    def unassign(self) -> None:
        pass


def _read(consumer: Any, start: int, end: int, monkeypatch: pytest.MonkeyPatch, timeout_ms: str = "60000"
          ) -> Iterator[int]:
    monkeypatch.setattr(reading, "_checkout", lambda opts: consumer)
    monkeypatch.setattr(reading, "_checkin", lambda opts, c: None)
    opts = SourceOptions.parse({"kafka.bootstrap.servers": "unused:9092", "topic": "t", "pollTimeoutMs": timeout_ms})
    for batch in reading.read_range(opts, source_schema(opts), 0, start, end):
        yield from (int(r["value"]) for r in batch.to_pylist())


def test_records_before_the_range_are_never_yielded_when_the_reader_goes_back(monkeypatch: pytest.MonkeyPatch) -> None:
    consumer = GoesBack(log_end=20, resets=3)
    assert list(_read(consumer, 12, 15, monkeypatch)) == [12, 13, 14]
    assert consumer.assigned[0] == 12 and all(p >= 12 for p in consumer.assigned)  # sent back to the range


def test_a_reader_always_sent_back_times_out_instead_of_reading_for_ever(monkeypatch: pytest.MonkeyPatch) -> None:
    consumer = GoesBack(log_end=20, resets=10**9)
    with pytest.raises(KafkaError, match="stuck at offset 12"):
        list(_read(consumer, 12, 15, monkeypatch, timeout_ms="1500"))
