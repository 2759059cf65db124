"""Reading the shared processing-log topic in tests: every test of a run writes to the same topic
(one broker, one service id), and in any order, so a test picks its own entries by kind and topic."""

from __future__ import annotations

import json
from typing import Any

from streamsql.kafka.admin import KafkaAdmin


def deserialization_errors(admin: KafkaAdmin, log_topic: str, *topics: str) -> list[dict[str, Any]]:
    """The deserialization-error bodies about records of ``topics``, in the log's order (entries
    of other kinds, e.g. a function's record-processing errors, and of other topics left out)."""
    out = []
    for rec in admin.read_all(log_topic):
        try:
            entry = json.loads(rec.value) if rec.value else None
        except ValueError:
            continue
        body = (entry.get("message") or {}).get("deserializationError") if isinstance(entry, dict) else None
        if body and body.get("topic") in topics:
            out.append(body)
    return out
