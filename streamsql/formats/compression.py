"""Compressed payloads: ``VALUE_COMPRESSION='GZIP'`` around a DELIMITED or JSON value.

Not a ksqlDB feature. Producers that batch (seed 003: a flight-search service writes each search's
quotes as one gzipped CSV batch) put many records in one Kafka message. With
``VALUE_COMPRESSION='GZIP'`` the source decompresses each message and reads every non-empty line of
it as one record of the value format (CSV lines for DELIMITED, JSON lines for JSON); all rows of a
message share its key, timestamp, partition, offset and headers. A message that is not gzip, or is
not UTF-8 inside, goes to the processing log whole. Writing with the option gzips each value.

This is the one place that knows compression; the formats themselves stay line-oriented.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from streamsql.errors import ConfigError
from streamsql.formats.base import DecodeResult, FormatSpec, Serde
from streamsql.formats.features import LINE_FORMATS, features

#: the codecs VALUE_COMPRESSION accepts
CODECS = {"GZIP"}


def check_compression(codec: str, fmt: str, side: str) -> str:
    """Statement-time validation of ``{side}_COMPRESSION``; returns the normalised codec name."""
    name = str(codec).strip().upper()
    if name not in CODECS:
        raise ConfigError(f"Invalid value {codec} for property {side}_COMPRESSION: String must be one of: GZIP")
    if side != "VALUE":
        raise ConfigError(f"{side}_COMPRESSION is not supported: only values may be compressed (VALUE_COMPRESSION)")
    if not features(fmt).line_oriented:
        raise ConfigError(f"VALUE_COMPRESSION is only valid with the line-oriented value formats "
                          f"({', '.join(LINE_FORMATS)}), not {fmt}")
    return name


def compression_of(spec: FormatSpec | None) -> str | None:
    return None if spec is None else spec.options.get("compression")


def split_batches(values: Sequence[bytes | None]) -> tuple[list[bytes | None], list[int], dict[int, str]]:
    """Decompress each message and split it into lines.

    Returns the records (one per non-empty line; a null message stays one null record), the index
    of the message each record came from, and the messages that failed with the reason."""
    records: list[bytes | None] = []
    origin: list[int] = []
    failed: dict[int, str] = {}
    for i, data in enumerate(values):
        if data is None:
            records.append(None)
            origin.append(i)
            continue
        try:
            text = gzip.decompress(data).decode("utf-8")
        except (OSError, EOFError, zlib.error, UnicodeDecodeError) as e:
            failed[i] = f"cannot decompress the GZIP value ({len(data)} bytes): {e}"
            continue
        for line in text.splitlines():
            if line.strip():
                records.append(line.encode("utf-8"))
                origin.append(i)
    return records, origin, failed


class CompressedSerde:
    """Writes the inner format's bytes gzipped; reads one gzipped record (the source reads whole
    batches through ``split_batches`` before decoding)."""

    def __init__(self, inner: Serde) -> None:
        self.inner = inner

    def decode(self, data: Sequence[bytes | None]) -> DecodeResult:
        records, origin, failed = split_batches(data)
        if len(records) == len(data) and origin == list(range(len(data))):
            return self.inner.decode(records)
        # not one line per payload: decode what we can, report the rest (a batch needs the source)
        plain: list[bytes | None] = [None] * len(data)
        errors: list[str | None] = [None] * len(data)
        for i, reason in failed.items():
            errors[i] = reason
        seen: set[int] = set()
        for rec, i in zip(records, origin):
            if i in seen:
                errors[i] = "a compressed batch of several records cannot be decoded here"
            seen.add(i)
            plain[i] = rec
        result = self.inner.decode(plain)
        result.errors = [e or r for e, r in zip(errors, result.errors)]
        return result

    def encode(self, batch: pa.RecordBatch) -> list[bytes | None]:
        return [None if v is None else gzip.compress(v, mtime=0) for v in self.inner.encode(batch)]


def wrap(serde: Any, spec: FormatSpec) -> Any:
    return CompressedSerde(serde) if compression_of(spec) else serde
