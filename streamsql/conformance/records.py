"""Encoding a case's input records and decoding the output records, with the formats the
sources declare (KAFKA, JSON, DELIMITED, AVRO, PROTOBUF, JSON_SR; windowed keys). Whether a
record carries a registry schema id, and of which type, is the format's feature
(``formats/features.py``).
"""

from __future__ import annotations

import base64
import json
import struct
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from streamsql.errors import ConfigError
from streamsql.formats import schema_registry
from streamsql.formats.features import features


def raw_encode(value: Any) -> bytes | None:
    """Bytes for a value when no declared format says otherwise: strings as UTF-8 text,
    everything else as JSON."""
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode("utf-8")
    return json.dumps(value).encode("utf-8")


def encode_with(spec: Any, value: Any, schema: tuple[int, str] | None = None) -> bytes | None:
    """Encode one QTT key/value with a :class:`~streamsql.formats.FormatSpec`. For registry
    formats, ``schema`` (id, text) is the schema to write with (default: the source's own)."""
    if value is None:
        return None
    name = spec.name.upper()
    fmt = features(name)
    if fmt.protobuf:
        return _encode_protobuf(spec, value, schema)
    if fmt.schema_type == "AVRO":
        return _encode_avro(spec, value, schema)
    if fmt.schema_type == "JSON":
        return schema_registry.frame(_writer(spec, schema)[0], json.dumps(value).encode("utf-8"))
    if name == "JSON":
        return json.dumps(value).encode("utf-8")
    if name == "DELIMITED":
        return raw_encode(value if isinstance(value, str) else str(value))
    if name == "KAFKA" and len(spec.columns) == 1:
        import pyarrow as pa

        from streamsql import types as t
        from streamsql.formats import serde_for

        col = spec.columns[0]
        if col.type.kind == t.Kind.BYTES and isinstance(value, str):
            try:
                return base64.b64decode(value)  # QTT files give BYTES as base64 text
            except ValueError:
                return raw_encode(value)
        try:
            arr = pa.array([value], type=t.to_arrow(col.type))
            batch = pa.RecordBatch.from_arrays([arr], names=[col.name])
            return serde_for(spec).encode(batch)[0]
        except Exception:  # noqa: BLE001 - a value of the wrong type: send it as text, as given
            return raw_encode(value)
    return raw_encode(value)


def _encode_avro(spec: Any, value: Any, schema: tuple[int, str] | None) -> bytes:
    import io as _io

    import fastavro

    from streamsql.formats import avro_format, schema_registry

    schema = _writer(spec, schema)
    parsed = json.loads(schema[1])
    buf = _io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(parsed), avro_format.datum_from_json(parsed, value))
    return schema_registry.frame(schema[0], buf.getvalue())


def _encode_protobuf(spec: Any, value: Any, schema: tuple[int, str] | None) -> bytes:
    from streamsql.formats import protobuf_format as pf

    registry = features(spec.name).uses_registry
    if registry:
        schema_id, text = _writer(spec, schema)
    else:
        text = pf.proto_schema(spec.columns, full_name=spec.options.get("fullName"),
                               nullable=spec.options.get("nullable"))
    parsed = _proto_schema(spec, schema_id, text) if registry else pf.ProtoSchema(text)
    path = parsed.message_path(spec.options.get("fullName")) if registry else (0,)
    msg = parsed.message_class(path)()
    pf.fill_message(msg, value if isinstance(value, dict) else {spec.columns[0].name: value})
    body = msg.SerializeToString()
    return schema_registry.frame(schema_id, pf._index_prefix(path) + body) if registry else body


def _decode_protobuf(spec: Any, raw: bytes) -> Any:
    from streamsql.formats import protobuf_format as pf

    try:
        if features(spec.name).uses_registry:
            schema_id, payload = schema_registry.split_header(raw)
            path, used = pf._message_indexes(payload)
            text = (spec.options.get("schemas") or {}).get(str(schema_id))
            if text is None:
                text = schema_registry.by_id(spec.options.get("registry", ""), schema_id).text
            body = bytes(payload[used:])
            schema = _proto_schema(spec, schema_id, text)
        else:
            path, body = [0], raw
            schema = pf.ProtoSchema(pf.proto_schema(spec.columns, full_name=spec.options.get("fullName"),
                                                    nullable=spec.options.get("nullable")))
        msg = schema.message_class(path).FromString(body)
    except Exception as e:  # noqa: BLE001
        return Undecodable(raw, f"not PROTOBUF: {e}")
    return pf.message_to_data(msg, json_like=True)


def _proto_schema(spec: Any, schema_id: int, text: str) -> Any:
    """A registered Protobuf schema with what it imports (the source's snapshot, else the registry)."""
    from streamsql.formats import protobuf_format as pf

    imports = (spec.options.get("imports") or {}).get(str(schema_id))
    url = spec.options.get("registry", "")
    if imports is None and url:
        try:
            imports = schema_registry.imports(url, schema_registry.by_id(url, schema_id))
        except ConfigError:
            imports = {}
    return pf.ProtoSchema(text, imports or {})


def _writer(spec: Any, schema: tuple[int, str] | None) -> tuple[int, str]:
    """The (id, text) a registry-format input is written with: the topic's declared schema, else
    the source's own."""
    if schema is not None:
        return schema
    writer_id = spec.options.get("writerId")
    return int(writer_id), spec.options["schemas"][str(writer_id)]


def _decode_avro(spec: Any, raw: bytes) -> Any:
    import io as _io

    import fastavro

    from streamsql.formats import avro_format, schema_registry

    try:
        schema_id, payload = schema_registry.split_header(raw)
        text = (spec.options.get("schemas") or {}).get(str(schema_id))
        if text is None:
            text = schema_registry.by_id(spec.options.get("registry", ""), schema_id).text
        datum = fastavro.schemaless_reader(_io.BytesIO(payload), fastavro.parse_schema(json.loads(text)), None)
    except Exception as e:  # noqa: BLE001
        return Undecodable(raw, f"not AVRO: {e}")
    return avro_format.json_from_datum(datum)


def window_suffix(window: dict[str, Any] | None) -> bytes:
    """ksqlDB's windowed key: inner key bytes + 8-byte start (time windows), or + 8-byte end and
    8-byte start (session windows, Kafka Streams' SessionKeySchema order)."""
    if not window:
        return b""
    start = int(window.get("start", 0))
    if str(window.get("type", "time")).lower() == "session":
        return struct.pack(">qq", int(window.get("end", start)), start)
    return struct.pack(">q", start)


def decode_with(spec: Any | None, raw: bytes | None) -> Any:
    """The data a record side holds, for comparison with the QTT file's JSON."""
    if raw is None:
        return None
    name = spec.name.upper() if spec is not None else None
    fmt = features(name or "")
    if fmt.protobuf:
        return _decode_protobuf(spec, raw)
    if fmt.schema_type == "AVRO":
        return _decode_avro(spec, raw)
    if fmt.schema_type == "JSON":
        try:
            raw = bytes(schema_registry.split_header(raw)[1])
        except ValueError as e:
            return Undecodable(raw, str(e))
        name = "JSON"
    if name == "KAFKA" and spec is not None and len(spec.columns) == 1:
        from streamsql.formats import serde_for

        res = serde_for(spec).decode([raw])
        if res.errors[0]:
            return Undecodable(raw, res.errors[0])
        v = res.columns[0][0].as_py()
        return base64.b64encode(v).decode() if isinstance(v, (bytes, bytearray)) else v
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return Undecodable(raw, "not UTF-8")
    if name == "JSON":
        try:
            data = json.loads(text, parse_float=Decimal)
        except json.JSONDecodeError:
            return Undecodable(raw, "not JSON")
        return json_as_columns(data, spec) if spec is not None else data
    return text


def json_as_columns(data: Any, spec: Any) -> Any:
    """A JSON record side with its DOUBLE columns as doubles. ksqlDB's harness reads JSON without
    a schema (``ValueSpecJsonSerdeSupplier``: fractions as exact BigDecimals, so a DECIMAL keeps
    the scale it was written with, as here); it then compares a DOUBLE's text exactly, which
    needs Java's rendering of doubles that the corpus no longer holds (docs/conformance.md), so a
    DOUBLE column is compared as ksqlDB compares one of AVRO or PROTOBUF: within 1e-6."""
    columns = [c for c in spec.columns if c.role in ("key", "value")]
    if len(columns) == 1 and (columns[0].role == "key" or not spec.wrap_single_value):
        return _as_type(data, columns[0].type)  # a single key column is never wrapped
    if not isinstance(data, dict):
        return data
    return {k: _as_type(v, _field_type(columns, k)) for k, v in data.items()}


def _field_type(fields: Any, name: str) -> Any:
    """The type of the column or struct field named ``name`` (exact, else case-insensitive, as
    ksqlDB's deserializer matches JSON fields), None when there is none."""
    for f in fields:
        if f.name == name:
            return f.type
    for f in fields:
        if f.name.upper() == name.upper():
            return f.type
    return None


def _as_type(value: Any, sql_type: Any) -> Any:
    from streamsql import types as t

    if value is None or sql_type is None or isinstance(value, bool):
        return value
    kind = sql_type.kind
    if kind == t.Kind.DOUBLE and isinstance(value, (int, Decimal)):
        return float(value)
    if kind == t.Kind.ARRAY and isinstance(value, list):
        return [_as_type(v, sql_type.element) for v in value]
    if kind == t.Kind.MAP and isinstance(value, dict):
        return {k: _as_type(v, sql_type.value) for k, v in value.items()}
    if kind == t.Kind.STRUCT and isinstance(value, dict):
        return {k: _as_type(v, _field_type(sql_type.fields, k)) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class Undecodable:
    raw: bytes
    why: str

    def __repr__(self) -> str:
        return f"<undecodable {self.raw!r}: {self.why}>"

