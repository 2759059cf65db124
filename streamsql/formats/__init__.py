"""Serialization formats: the one place that knows how columns become bytes and back.

    serde_for(spec: FormatSpec) -> Serde

Formats: JSON, DELIMITED, KAFKA (single primitive column), NONE (no columns).
"""

from streamsql.formats.base import DecodeResult, FormatSpec, Serde
from streamsql.formats.registry import serde_for

__all__ = ["DecodeResult", "FormatSpec", "Serde", "serde_for"]
