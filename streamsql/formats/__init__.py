"""Serialization formats: the one place that knows how columns become bytes and back.

    serde_for(spec: FormatSpec) -> Serde

Formats: JSON, DELIMITED, KAFKA (single primitive column), NONE (no columns), AVRO, PROTOBUF,
JSON_SR (the last three with a Schema Registry).

``serde_for`` is imported on first use: importing the registry loads every format (fastavro,
protobuf, the registry client: ~0.2 s), and the processes that only need a format's
description — the Kafka source's offset runner, which Spark starts afresh for every streaming
query — should not pay for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from streamsql.formats.base import DecodeResult, FormatSpec, Serde

if TYPE_CHECKING:
    from streamsql.formats.registry import serde_for

__all__ = ["DecodeResult", "FormatSpec", "Serde", "serde_for"]


def __getattr__(name: str) -> Any:
    if name == "serde_for":
        from streamsql.formats.registry import serde_for

        return serde_for
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
