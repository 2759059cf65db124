"""The settings the Kafka sink's producers are created with, and why they matter."""

from __future__ import annotations

from streamsql.kafka.clients import producer_config
from streamsql.kafka.sink import SINK_PRODUCER_SETTINGS


def test_the_sink_producer_connects_at_creation_and_reports_failures_only() -> None:
    """Connected at creation, an idempotent producer holds its producer id before a task's first
    rows arrive (connected by its first ``produce``, that first flush waited ~0.5 s for it in
    every new Python worker); acknowledged records cost no Python callback."""
    conf = producer_config("127.0.0.1:9092", SINK_PRODUCER_SETTINGS)
    assert conf["enable.idempotence"] is True
    assert conf["enable.sparse.connections"] is False
    assert conf["delivery.report.only.error"] is True
