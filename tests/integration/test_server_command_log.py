"""The Kafka-backed command log on the real broker: durable appends, replay by a new reader,
truncation (TERMINATE CLUSTER)."""

from __future__ import annotations

import uuid

import pytest

from streamsql.catalog.kafka_commands import KafkaCommandLog, command_topic_name

pytestmark = pytest.mark.integration


def test_commands_survive_a_new_reader_and_truncate(bootstrap: str) -> None:
    topic = command_topic_name(f"t{uuid.uuid4().hex[:8]}_")
    assert topic.startswith("_streamsql-t") and topic.endswith("-command_topic")
    log = KafkaCommandLog(bootstrap, topic)
    assert log.read_all() == [] and log.next_seq() == 0
    first = log.append("CREATE STREAM A (X INT) WITH (KAFKA_TOPIC='a', VALUE_FORMAT='JSON');", {"auto.offset.reset": "earliest"})
    second = log.append("DROP STREAM A;", {})
    assert (first.seq, second.seq) == (0, 1)

    replay = KafkaCommandLog(bootstrap, topic)  # what a restarted server reads
    commands = replay.read_all()
    assert [(c.seq, c.statement, c.properties) for c in commands] == [
        (0, first.statement, {"auto.offset.reset": "earliest"}), (1, "DROP STREAM A;", {})]
    assert replay.next_seq() == 2

    replay.truncate()
    assert replay.read_all() == [] and KafkaCommandLog(bootstrap, topic).read_all() == []
    log.close()
    replay.close()
