"""Format name to serde. Every check ksqlDB makes when a source is declared with a format (column
count, supported types, delimiter) happens here, at ``serde_for`` time, as a ``ConfigError`` with
ksqlDB's wording, so a query never starts with a serde that cannot work."""

from __future__ import annotations

from streamsql.errors import ConfigError
from streamsql.formats.avro_format import AvroSerde
from streamsql.formats.base import FormatSpec, Serde
from streamsql.formats.delimited import DelimitedSerde
from streamsql.formats.json_format import JsonSerde
from streamsql.formats.kafka_format import KafkaSerde
from streamsql.formats.none_format import NoneSerde

SUPPORTED = ("JSON", "DELIMITED", "KAFKA", "NONE", "AVRO")
#: ksqlDB formats that need a Schema Registry or a schema language streamsql does not speak.
_KNOWN_UNSUPPORTED = ("JSON_SR", "PROTOBUF", "PROTOBUF_NOSR")


def serde_for(spec: FormatSpec) -> Serde:
    name = spec.name.upper()
    if name == "NONE":
        if spec.columns:
            got = ", ".join(c.sql() for c in spec.columns)
            raise ConfigError(
                f"The 'NONE' format can only be used when no columns are defined. Got: [{got}]"
            )
        return NoneSerde()
    if name == "JSON":
        return JsonSerde(spec)
    if name == "AVRO":
        return AvroSerde(spec)
    if name in ("KAFKA", "DELIMITED") and not spec.columns:
        return NoneSerde()  # ksqlDB's void serde: keyless sources declared with these formats
    if name == "KAFKA":
        return KafkaSerde(spec)
    if name == "DELIMITED":
        return DelimitedSerde(spec)
    if name in _KNOWN_UNSUPPORTED:
        raise ConfigError(
            f"The '{name}' format is not supported by streamsql. Supported: {', '.join(SUPPORTED)}"
        )
    raise ConfigError(f"Unknown format: {spec.name}")
