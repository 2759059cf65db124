"""The processing log (ksqlDB's): one JSON entry per record a query could not process, written
to the processing-log topic from wherever the record was (a source reader, a function call, a
sink), so a bad record is dropped visibly and the query keeps running.

The entry shape is ksqlDB's (research/ksqldb.md §1.10): ``level``, ``logger``, ``time`` and a
``message`` whose ``type`` says which of its error fields is set.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("streamsql.kafka.processing_log")
processing_log = logging.getLogger("streamsql.processing_log")

DESERIALIZATION_ERROR = 0
RECORD_PROCESSING_ERROR = 1
PRODUCTION_ERROR = 2
_FIELDS = ("deserializationError", "recordProcessingError", "productionError", "serializationError",
           "kafkaStreamsThreadError")


def entry(logger: str, kind: int, error: Mapping[str, Any]) -> dict[str, Any]:
    """One processing-log entry: ``error`` is the body of the field ``kind`` selects."""
    message: dict[str, Any] = {"type": kind, **dict.fromkeys(_FIELDS)}
    message[_FIELDS[kind]] = dict(error)
    return {"level": "ERROR", "logger": logger, "time": int(time.time() * 1000), "message": message}


def record_processing_error(logger: str, message: str, record: str | None, cause: str) -> dict[str, Any]:
    """A record that failed while being processed (type 1): what failed, the record, why."""
    return entry(logger, RECORD_PROCESSING_ERROR, {"errorMessage": message, "record": record, "cause": [cause]})


@dataclass(frozen=True)
class LogTarget:
    """Where executors write entries: the processing-log topic (None: the Python log only)."""

    bootstrap: str | None = None
    topic: str | None = None
    #: the cluster's client settings (kafka/settings.py), taken where the target is made (the
    #: driver) so that executors, another process, write with them
    settings: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not self.settings and self.bootstrap:
            from streamsql.kafka import settings as kafka_settings

            object.__setattr__(self, "settings", tuple(sorted(kafka_settings.of(self.bootstrap).items())))

    def publish(self, entries: Sequence[Mapping[str, Any]], settings: Mapping[str, str] | None = None) -> None:
        """Log each entry, and write it to the topic when there is one. A failure to write must
        not fail the query (ksqlDB behaves the same): it is logged."""
        for e in entries:
            body = e["message"].get(_FIELDS[e["message"]["type"]]) or {}
            where = (f" (topic {body['topic']}, partition {body.get('partition')}, offset {body.get('offset')})"
                     if body.get("topic") else "")
            processing_log.error("%s: dropped a record%s: %s", e["logger"], where, body.get("errorMessage"))
        if not (entries and self.bootstrap and self.topic):
            return
        from streamsql.kafka.clients import cached_producer

        try:
            producer = cached_producer(self.bootstrap, {**dict(self.settings), **dict(settings or {})})
            for e in entries:
                producer.produce(self.topic, value=json.dumps(e).encode("utf-8"))
            producer.flush(30)
        except Exception as exc:  # noqa: BLE001 - the log failing must not fail the query
            log.error("cannot write to processing log topic '%s': %s", self.topic, exc)
