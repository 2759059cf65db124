"""NONE: the side of the record is not read or written at all (keyless streams' keys), and the
void serde for a format with nothing to hold (ksqlDB's ``KsqlVoidSerde``)."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from streamsql.formats.base import DecodeResult


class NoneSerde:
    def decode(self, data: Sequence[bytes | None]) -> DecodeResult:
        return DecodeResult([], [None] * len(data))

    def encode(self, batch: pa.RecordBatch) -> list[bytes | None]:
        return [None] * batch.num_rows
