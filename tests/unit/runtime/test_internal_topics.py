"""Which topics belong to the server (runtime/internal_topics.py), in every spelling."""

from __future__ import annotations

import pytest

from streamsql.catalog.kafka_commands import command_topic_name
from streamsql.errors import AnalysisError
from streamsql.runtime import internal_topics as it
from streamsql.runtime.executors.persistent import source_changelog_topic

INTERNAL = [command_topic_name("default_"), command_topic_name("other_"), "_STREAMSQL-default-command_topic",
            "_streamsql-CTAS_T_3-t-changelog", "_confluent-ksql-default__command_topic",
            "_confluent-ksql-default_query_CTAS_X_1-Aggregate-changelog", "_confluent-metrics",
            "__consumer_offsets", "__transaction_state", "__CONSUMER_OFFSETS", "__anything", "_schemas",
            "_SCHEMAS", " _schemas", "connect-configs", "connect-offsets", "connect-status", "connect-statuses"]
USER = ["orders", "_orders", "schemas", "_schemas2", "streamsql-default-command_topic", "my__topic", "connect-x",
        "ksql_processing_log_archive"]
PROCESSING_LOGS = ["default_ksql_processing_log", "other_ksql_processing_log", "DEFAULT_KSQL_PROCESSING_LOG"]


def test_internal_topics() -> None:
    from streamsql.catalog import Source

    changelog = source_changelog_topic(Source(name="T", kind="TABLE", columns=[], topic="t", key_format="KAFKA",
                                              value_format="JSON", writer_query="CTAS_T_3"))
    for topic in [*INTERNAL, changelog]:
        assert it.is_internal(topic) and it.is_read_only(topic), topic
    for topic in USER:
        assert not it.is_internal(topic) and not it.is_read_only(topic), topic
    for topic in PROCESSING_LOGS:  # read, printed, declared: yes; written or deleted: no
        assert not it.is_internal(topic) and it.is_read_only(topic), topic


@pytest.mark.parametrize("topic", INTERNAL)
def test_every_check_refuses_an_internal_topic(topic: str) -> None:
    for check, message in ((lambda: it.check_declare(topic, "STREAM"), "Cannot create stream over internal topic"),
                           (lambda: it.check_insert_values(topic), "Cannot insert values into read-only topic"),
                           (lambda: it.check_insert(topic), "Cannot insert into read-only topic"),
                           (lambda: it.check_delete(topic), "Cannot delete read-only topic"),
                           (lambda: it.check_print(topic), "Cannot print internal topic"),
                           (lambda: it.check_connector([topic]), "internal topics cannot be sunk")):
        with pytest.raises(AnalysisError, match=message):
            check()


@pytest.mark.parametrize("topic", PROCESSING_LOGS)
def test_the_processing_log_is_read_only(topic: str) -> None:
    it.check_declare(topic, "STREAM")
    it.check_print(topic)
    it.check_connector([topic])
    for check in (it.check_insert_values, it.check_insert, it.check_delete):
        with pytest.raises(AnalysisError, match="read-only topic"):
            check(topic)
