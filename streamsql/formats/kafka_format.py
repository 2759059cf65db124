"""KAFKA: one primitive column in Kafka's own serializer encodings, as ksqlDB's
``KafkaSerdeFactory`` (``Serdes.Integer/Long/Double/String/ByteBuffer``): INTEGER is 4 bytes
big-endian, BIGINT 8 bytes big-endian, DOUBLE an 8-byte big-endian IEEE 754 value, STRING UTF-8
text, BYTES the raw bytes. No coercion: a record of the wrong size is an error. BOOLEAN, DECIMAL,
DATE, TIME, TIMESTAMP and nested types have no Kafka serializer, so ksqlDB rejects them when the
source is declared.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from streamsql.errors import UnsupportedSchemaError
from streamsql.formats.base import DecodeResult, FormatSpec
from streamsql.formats.columns import arrow_types, column_values
from streamsql.types import Kind

Reader = Callable[[bytes], Any]
Writer = Callable[[Any], bytes]


def _fixed(size: int, fmt: str, type_name: str) -> tuple[Reader, Writer]:
    codec = struct.Struct(fmt)

    def read(raw: bytes) -> Any:
        if len(raw) != size:
            raise ValueError(f"expected {size} bytes for a KAFKA {type_name}, got {len(raw)}")
        return codec.unpack(raw)[0]

    return read, codec.pack


#: Per supported type: bytes -> value (raises ValueError on a bad size), value -> bytes.
_CODECS: dict[Kind, tuple[Reader, Writer]] = {
    Kind.INTEGER: _fixed(4, ">i", "INTEGER"),
    Kind.BIGINT: _fixed(8, ">q", "BIGINT"),
    Kind.DOUBLE: _fixed(8, ">d", "DOUBLE"),
    Kind.STRING: (lambda raw: raw.decode("utf-8", "replace"), lambda v: v.encode()),
    Kind.BYTES: (bytes, bytes),
}


class KafkaSerde:
    def __init__(self, spec: FormatSpec) -> None:
        if len(spec.columns) != 1:
            got = ", ".join(c.sql() for c in spec.columns)
            raise UnsupportedSchemaError(f"The 'KAFKA' format only supports a single field. Got: [{got}]")
        column = spec.columns[0]
        if column.type.kind not in _CODECS:
            raise UnsupportedSchemaError(
                f"The 'KAFKA' format does not support type '{column.type.kind.value}'"
            )
        self._name = column.name
        self._type = arrow_types(spec.columns)[0]
        self._read, self._write = _CODECS[column.type.kind]

    def decode(self, data: Sequence[bytes | None]) -> DecodeResult:
        values: list[Any] = []
        errors: list[str | None] = [None] * len(data)
        read = self._read
        for i, raw in enumerate(data):
            if raw is None:
                values.append(None)
                continue
            try:
                values.append(read(raw))
            except ValueError as e:
                values.append(None)
                errors[i] = f"Failed to deserialize field '{self._name}': {e}"
        return DecodeResult([pa.array(values, type=self._type)], errors)

    def encode(self, batch: pa.RecordBatch) -> list[bytes | None]:
        write = self._write
        return [None if v is None else write(v) for v in column_values(batch, self._name)]
