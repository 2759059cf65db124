"""JSON_SR: JSON with Confluent's Schema Registry framing (magic byte, schema id, JSON text).

The payload is read and written exactly as the JSON format does (same coercions, same output
text); the registry adds the 5-byte header and the schema, which ksqlDB uses for schema
inference and registers for sinks. Schemas are JSON Schema documents in the shape Kafka Connect's
``JsonSchemaConverter`` produces (what ksqlDB registers): ``oneOf [null, T]`` for optional values,
``connect.type`` to tell int32 from int64, ``connect.index`` for field order.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from streamsql import types as t
from streamsql.errors import ConfigError
from streamsql.formats.base import DecodeResult, FormatSpec, inferred_name
from streamsql.formats.json_format import JsonSerde
from streamsql.formats.schema_registry import frame, split_header

_DECIMAL_TITLE = "org.apache.kafka.connect.data.Decimal"


def json_schema(columns: Sequence[t.Column], *, unwrapped: bool) -> dict[str, Any]:
    if unwrapped:
        return _optional(_type(columns[0].type))
    return {"type": "object", "properties": {
        c.name: dict(_optional(_type(c.type)), **{"connect.index": i}) for i, c in enumerate(columns)}}


def _optional(schema: dict[str, Any]) -> dict[str, Any]:
    return {"oneOf": [{"type": "null"}, schema]}


def _type(sql: t.SqlType) -> dict[str, Any]:
    if isinstance(sql, t.Decimal):
        return {"type": "number", "title": _DECIMAL_TITLE, "connect.version": 1, "connect.type": "bytes",
                "connect.parameters": {"scale": str(sql.scale), "connect.decimal.precision": str(sql.precision)}}
    if isinstance(sql, t.Array):
        return {"type": "array", "items": _optional(_type(sql.element))}
    if isinstance(sql, t.Map):
        if sql.key.kind != t.Kind.STRING:
            raise ConfigError(f"JSON_SR only supports MAPs with STRING keys, got {sql}")
        return {"type": "object", "additionalProperties": _optional(_type(sql.value)), "connect.type": "map"}
    if isinstance(sql, t.Struct):
        return {"type": "object", "properties": {
            f.name: dict(_optional(_type(f.type)), **{"connect.index": i}) for i, f in enumerate(sql.fields)}}
    return dict(_PRIMITIVES[sql.kind])


_PRIMITIVES: dict[t.Kind, dict[str, Any]] = {
    t.Kind.BOOLEAN: {"type": "boolean"},
    t.Kind.INTEGER: {"type": "integer", "connect.type": "int32"},
    t.Kind.BIGINT: {"type": "integer", "connect.type": "int64"},
    t.Kind.DOUBLE: {"type": "number", "connect.type": "float64"},
    t.Kind.STRING: {"type": "string"},
    t.Kind.BYTES: {"type": "string", "connect.type": "bytes"},
    t.Kind.DATE: {"type": "integer", "title": "org.apache.kafka.connect.data.Date", "connect.type": "int32"},
    t.Kind.TIME: {"type": "integer", "title": "org.apache.kafka.connect.data.Time", "connect.type": "int32"},
    t.Kind.TIMESTAMP: {"type": "integer", "title": "org.apache.kafka.connect.data.Timestamp",
                       "connect.type": "int64"},
}


def columns_from_json_schema(schema: Any, *, role: str, unwrapped: bool = False,
                             keep_names: bool = False) -> list[t.Column]:
    """Schema inference; property names upper-cased at every level unless ``keep_names`` (a
    schema named by its id)."""
    body = _non_null(schema)
    if not unwrapped and isinstance(body, dict) and body.get("type") == "object" and "properties" in body:
        props = sorted(body["properties"].items(), key=lambda kv: kv[1].get("connect.index", 0)
                       if isinstance(kv[1], dict) else 0)
        return [t.Column(inferred_name(name, keep_names), sql_type_of(s, keep_names=keep_names), role)
                for name, s in props]
    return [t.Column("ROWKEY" if role == "key" else "ROWVAL", sql_type_of(schema, keep_names=keep_names), role)]


def sql_type_of(schema: Any, *, keep_names: bool = False) -> t.SqlType:
    s = _non_null(schema)
    if not isinstance(s, dict):
        raise ConfigError(f"JSON schema {s!r} has no SQL equivalent")
    kind, connect = s.get("type"), s.get("connect.type")
    title = s.get("title", "")
    if title == _DECIMAL_TITLE:
        params = s.get("connect.parameters", {})
        return t.Decimal(int(params.get("connect.decimal.precision", 64)), int(params.get("scale", 0)))
    if title.endswith(".Timestamp"):
        return t.TIMESTAMP
    if title.endswith(".Date"):
        return t.DATE
    if title.endswith(".Time"):
        return t.TIME
    if kind == "boolean":
        return t.BOOLEAN
    if kind == "integer":
        return t.INTEGER if connect in ("int8", "int16", "int32") else t.BIGINT
    if kind == "number":
        return t.DOUBLE
    if kind == "string":
        return t.BYTES if connect == "bytes" else t.STRING
    if kind == "array":
        return t.Array(sql_type_of(s.get("items", {"type": "string"}), keep_names=keep_names))
    if kind == "object":
        if "properties" in s:
            props = sorted(s["properties"].items(), key=lambda kv: kv[1].get("connect.index", 0)
                           if isinstance(kv[1], dict) else 0)
            return t.Struct(tuple(t.StructField(inferred_name(n, keep_names), sql_type_of(v, keep_names=keep_names))
                                  for n, v in props))
        return t.Map(t.STRING, sql_type_of(s.get("additionalProperties", {"type": "string"}), keep_names=keep_names))
    raise ConfigError(f"JSON schema type {kind!r} has no SQL equivalent")


def _non_null(schema: Any) -> Any:
    if isinstance(schema, dict):
        for key in ("oneOf", "anyOf"):
            branches = schema.get(key)
            if isinstance(branches, list):
                rest = [b for b in branches if not (isinstance(b, dict) and b.get("type") == "null")]
                if len(rest) == 1:
                    return rest[0]
    return schema


class JsonSrSerde:
    def __init__(self, spec: FormatSpec) -> None:
        self._json = JsonSerde(spec)
        unwrapped = len(spec.columns) == 1 and (spec.columns[0].is_key or not spec.wrap_single_value)
        json_schema(spec.columns, unwrapped=unwrapped)  # fails early on what JSON_SR cannot hold
        self._writer_id = spec.options.get("writerId")
        self._absent = [] if unwrapped else self._schema_only_fields(spec)

    @staticmethod
    def _schema_only_fields(spec: FormatSpec) -> list[str]:
        """Top-level properties of the registered writer schema (``*_SCHEMA_ID``) that no column
        fills: ksqlDB's serializer writes them as null, so a reader of that schema sees them."""
        text = (spec.options.get("schemas") or {}).get(str(spec.options.get("writerId")))
        if not text:
            return []
        try:
            schema = json.loads(text)
        except ValueError:
            return []
        properties = schema.get("properties") if isinstance(schema, dict) else None
        if not isinstance(properties, dict):
            return []
        filled = {c.name for c in spec.columns} | {c.name.upper() for c in spec.columns}
        return [name for name in properties if name not in filled and name.upper() not in filled]

    def decode(self, data: Sequence[bytes | None]) -> DecodeResult:
        payloads: list[bytes | None] = []
        framing: list[str | None] = []
        for raw in data:
            if raw is None:
                payloads.append(None)
                framing.append(None)
                continue
            try:
                _, payload = split_header(raw)
                payloads.append(bytes(payload))
                framing.append(None)
            except ValueError as e:
                payloads.append(None)
                framing.append(f"Invalid JSON_SR record: {e}")
        result = self._json.decode(payloads)
        result.errors = [f or e for f, e in zip(framing, result.errors)]
        return result

    def encode(self, batch: pa.RecordBatch) -> list[bytes | None]:
        if self._writer_id is None:
            raise ConfigError("JSON_SR output needs a Schema Registry: set 'ksql.schema.registry.url'")
        values = self._json.encode(batch)
        if self._absent:
            values = [None if v is None else self._with_absent(v) for v in values]
        return [None if v is None else frame(int(self._writer_id), v) for v in values]

    def _with_absent(self, value: bytes) -> bytes:
        doc = json.loads(value)
        if not isinstance(doc, dict):
            return value
        for name in self._absent:
            doc.setdefault(name, None)
        return json.dumps(doc, ensure_ascii=False).encode()
