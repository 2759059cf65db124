"""Format name to serde (what each format supports: ``formats/features.py``). Every check ksqlDB
makes when a source is declared with a format (column count, supported types, delimiter) happens
here, at ``serde_for`` time, as a ``ConfigError`` with ksqlDB's wording, so a query never starts
with a serde that cannot work."""

from __future__ import annotations

import json
from collections.abc import Callable

from streamsql.errors import ConfigError
from streamsql.formats import avro_format, compression, json_sr_format, protobuf_format
from streamsql.formats.avro_format import AvroSerde
from streamsql.formats.base import FormatSpec, Serde
from streamsql.formats.delimited import DelimitedSerde
from streamsql.formats.features import SUPPORTED
from streamsql.formats.json_format import JsonSerde
from streamsql.formats.json_sr_format import JsonSrSerde
from streamsql.formats.kafka_format import KafkaSerde
from streamsql.formats.none_format import NoneSerde
from streamsql.formats.protobuf_format import ProtobufSerde
from streamsql.types import Column


def serde_for(spec: FormatSpec) -> Serde:
    """The serde of ``spec``; a ``VALUE_COMPRESSION`` option wraps it (``formats.compression``)."""
    return compression.wrap(_plain_serde(spec), spec)


def _none(spec: FormatSpec) -> Serde:
    if spec.columns:
        got = ", ".join(c.sql() for c in spec.columns)
        raise ConfigError(f"The 'NONE' format can only be used when no columns are defined. Got: [{got}]")
    return NoneSerde()


def _void_when_keyless(make: Callable[[FormatSpec], Serde]) -> Callable[[FormatSpec], Serde]:
    """ksqlDB's void serde for a side declared with this format but no columns (a keyless source)."""
    return lambda spec: make(spec) if spec.columns else NoneSerde()


#: how each format of ``features.FORMATS`` builds its serde
_SERDES: dict[str, Callable[[FormatSpec], Serde]] = {
    "JSON": JsonSerde,
    "DELIMITED": _void_when_keyless(DelimitedSerde),
    "KAFKA": _void_when_keyless(KafkaSerde),
    "NONE": _none,
    "AVRO": AvroSerde,
    "JSON_SR": JsonSrSerde,
    "PROTOBUF": lambda spec: ProtobufSerde(spec, registry=True),
    "PROTOBUF_NOSR": lambda spec: ProtobufSerde(spec, registry=False),
}


def _plain_serde(spec: FormatSpec) -> Serde:
    make = _SERDES.get(spec.name.upper())
    if make is None:
        raise ConfigError(f"Unknown format: {spec.name}. Supported: {', '.join(SUPPORTED)}")
    return make(spec)


# --- formats whose records carry a Schema Registry id ----------------------------------------------


def registry_schema(fmt: str, columns: tuple[Column, ...] | list[Column], *, unwrapped: bool,
                    full_name: str | None = None, nullable: str | None = None) -> str:
    """The schema text a source of these columns registers (what ksqlDB would register)."""
    if fmt == "PROTOBUF":
        return protobuf_format.proto_schema(columns, full_name=full_name, nullable=nullable)
    if fmt == "AVRO":
        return json.dumps(avro_format.avro_schema(columns, unwrapped=unwrapped, full_name=full_name))
    if fmt == "JSON_SR":
        return json.dumps(json_sr_format.json_schema(columns, unwrapped=unwrapped))
    raise ConfigError(f"The '{fmt}' format does not use a Schema Registry")


def columns_from_registry(fmt: str, text: str, *, role: str, unwrapped: bool,
                          full_name: str | None = None, imports: dict[str, str] | None = None,
                          keep_names: bool = False) -> list[Column]:
    """Schema inference: the columns of a registered schema (one ROWKEY/ROWVAL column when
    ``unwrapped`` or the schema is not a record/object; a Protobuf schema's message
    ``full_name``, by default its first; ``imports``: the texts a Protobuf schema imports).

    Field names are upper-cased at every level, as ksqlDB infers them from a subject's latest
    schema; ``keep_names`` keeps them as written, as ksqlDB does for a schema named by
    ``KEY_SCHEMA_ID``/``VALUE_SCHEMA_ID`` (its ``SchemaRegistryTopicSchemaSupplier`` translates
    such a schema with ``ORIGINAL_FIELD_NAME``): columns ``template_id`` or ``eventID``, which a
    statement names in back-quotes, and records written with the schema's own field names."""
    if fmt == "PROTOBUF":  # always a message: its fields are the columns
        return protobuf_format.columns_from_proto(text, role=role, full_name=full_name, references=imports,
                                                  keep_names=keep_names)
    data = json.loads(text)
    if fmt == "AVRO":
        if unwrapped:
            return [Column("ROWKEY" if role == "key" else "ROWVAL",
                           avro_format.sql_type_of(data, keep_names=keep_names), role)]
        return avro_format.columns_from_avro(data, role=role, keep_names=keep_names)
    if fmt == "JSON_SR":
        return json_sr_format.columns_from_json_schema(data, role=role, unwrapped=unwrapped, keep_names=keep_names)
    raise ConfigError(f"The '{fmt}' format does not use a Schema Registry")
