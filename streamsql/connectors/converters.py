"""Kafka Connect's converters as decoders of a record's raw key or value bytes.

A Connect sink sees Kafka records through the converters its configuration names
(``key.converter``, ``value.converter`` and their ``.``-prefixed settings). Here a converter is a
:class:`Converter` spec (picklable: it travels to the executors) whose :meth:`Converter.decode`
turns bytes into plain Python values — dicts, lists, strings, numbers — ready to become a JSON
document. A record the converter cannot read raises :class:`RecordError`, which the sink sends to
the processing log with the record's topic, partition and offset (Connect would fail the task
unless ``errors.tolerance=all``; streamsql never lets one record stop a connector).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import struct
from dataclasses import dataclass
from typing import Any

#: Connect's converter classes streamsql reads, by the kind of decoding they need
CONVERTER_KINDS = {
    "org.apache.kafka.connect.storage.StringConverter": "string",
    "org.apache.kafka.connect.json.JsonConverter": "json",
    "io.confluent.connect.json.JsonSchemaConverter": "json_sr",
    "io.confluent.connect.avro.AvroConverter": "avro",
    "org.apache.kafka.connect.converters.ByteArrayConverter": "bytes",
    "org.apache.kafka.connect.converters.IntegerConverter": "int32",
    "org.apache.kafka.connect.converters.LongConverter": "int64",
    "org.apache.kafka.connect.converters.ShortConverter": "int16",
    "org.apache.kafka.connect.converters.DoubleConverter": "float64",
    "org.apache.kafka.connect.converters.FloatConverter": "float32",
}
_NUMBER_FORMATS = {"int32": ">i", "int64": ">q", "int16": ">h", "float64": ">d", "float32": ">f"}
#: the settings a converter takes after its ``key.converter.`` / ``value.converter.`` prefix
CONVERTER_SETTINGS = frozenset({"schemas.enable", "schema.registry.url", "basic.auth.credentials.source",
                                "basic.auth.user.info", "decimal.format", "encoding", "replace.null.with.default"})


class RecordError(Exception):
    """One record cannot be turned into a document (the reason names what was wrong)."""


@dataclass(frozen=True)
class Converter:
    """``kind``: a value of :data:`CONVERTER_KINDS`; ``registry_url`` for Schema Registry formats."""

    class_name: str
    kind: str
    registry_url: str | None = None

    def decode(self, data: bytes | None) -> Any:
        if data is None:
            return None
        kind = self.kind
        try:
            if kind == "string":
                return data.decode("utf-8")
            if kind == "json":
                value = json.loads(data)
                # JsonConverter with schemas.enable=true writes {"schema": …, "payload": …}
                if isinstance(value, dict) and value.keys() == {"schema", "payload"}:
                    return value["payload"]
                return value
            if kind == "json_sr":
                return json.loads(_strip_registry_header(data))
            if kind == "avro":
                return _avro_decode(self.registry_url or "", data)
            if kind == "bytes":
                return data
            fmt = _NUMBER_FORMATS[kind]
            return struct.unpack(fmt, data)[0]
        except RecordError:
            raise
        except (ValueError, struct.error, UnicodeDecodeError) as e:
            raise RecordError(f"{self.class_name} cannot read the bytes: {e}") from None


def _strip_registry_header(data: bytes) -> bytes:
    """Confluent's wire format: magic byte 0, a 4-byte schema id, then the payload."""
    if len(data) < 5 or data[0] != 0:
        raise RecordError("Unknown magic byte: the data was not written with Schema Registry's wire format")
    return data[5:]


_AVRO_READERS: dict[tuple[str, int], Any] = {}


def _avro_decode(url: str, data: bytes) -> Any:
    return avro_decode_with_schema(url, data)[2]


def avro_decode_with_schema(url: str, data: bytes) -> tuple[int, Any, Any]:
    """(schema id, parsed writer schema, value) of a Schema Registry framed Avro record."""
    import io

    import fastavro

    body = _strip_registry_header(data)
    schema_id = int.from_bytes(data[1:5], "big")
    schema = _AVRO_READERS.get((url, schema_id))
    if schema is None:
        from streamsql.errors import StreamsqlError
        from streamsql.formats import schema_registry

        try:
            registered = schema_registry.client(url).get(schema_id)
        except StreamsqlError as e:
            raise RecordError(f"Schema {schema_id} not found in the registry at {url}: {e}") from None
        schema = _AVRO_READERS[(url, schema_id)] = fastavro.parse_schema(json.loads(registered.text))
    try:
        return schema_id, schema, fastavro.schemaless_reader(io.BytesIO(body), schema, None)
    except Exception as e:  # noqa: BLE001 - fastavro raises many kinds for bad bytes
        raise RecordError(f"Avro data does not match schema {schema_id}: {e}") from None


def to_json_value(value: Any) -> Any:
    """A decoded value as JSON can hold it: BYTES as base64 (as Connect's JsonConverter writes
    them), timestamps as epoch milliseconds, dates and times as ISO text, decimals as numbers."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): to_json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json_value(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, dt.datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
        return int(aware.timestamp() * 1000)
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    return str(value)
