"""What each format supports, declared once: the statement checks (``planner/ddl.py``), the join
and aggregation planners, the compression option and the conformance records ask here, never
test a format's name themselves.

A new format is one entry in :data:`FORMATS` and its serde in ``formats/registry.py`` (its
module beside them): nothing outside ``formats/`` names it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FormatFeatures:
    """One format's capabilities (ksqlDB's ``SerdeFeatures`` and format-specific rules)."""

    name: str
    #: a single value column may be wrapped in a record or left bare (``WRAP_SINGLE_VALUE``);
    #: False: always bare (KAFKA, DELIMITED)
    wraps_single_value: bool = False
    #: the Schema Registry's ``schemaType`` of its schemas, None when its records carry no schema
    #: id (then no schema inference, no ``*_SCHEMA_ID``)
    schema_type: str | None = None
    #: its payloads are lines of text, so a batch compresses and splits by line (``VALUE_COMPRESSION``)
    line_oriented: bool = False
    #: takes ``{side}_DELIMITER``
    delimited: bool = False
    #: takes ``{side}_PROTOBUF_NULLABLE_REPRESENTATION`` (a Protobuf message)
    protobuf: bool = False
    #: a source with this value format may be joined and aggregated (ksqlDB: not yet for KAFKA)
    joins_and_groups: bool = True
    #: can hold an aggregate's ARRAY/MAP/STRUCT intermediate state (ksqlDB: not DELIMITED)
    complex_state: bool = True

    @property
    def uses_registry(self) -> bool:
        """Its records carry a Schema Registry id: schema inference, ``*_SCHEMA_ID``, and a
        join repartitions both sides over such keys (equal keys written with different ids meet)."""
        return self.schema_type is not None


FORMATS: dict[str, FormatFeatures] = {f.name: f for f in (
    FormatFeatures("JSON", wraps_single_value=True, line_oriented=True),
    FormatFeatures("DELIMITED", line_oriented=True, delimited=True, complex_state=False),
    FormatFeatures("KAFKA", joins_and_groups=False),
    FormatFeatures("NONE"),
    FormatFeatures("AVRO", wraps_single_value=True, schema_type="AVRO"),
    FormatFeatures("JSON_SR", wraps_single_value=True, schema_type="JSON"),
    FormatFeatures("PROTOBUF", wraps_single_value=True, schema_type="PROTOBUF", protobuf=True),
    FormatFeatures("PROTOBUF_NOSR", wraps_single_value=True, protobuf=True),
)}

#: every format's name, as the "Supported: ..." lists give them
SUPPORTED = tuple(FORMATS)
#: format name → the registry's ``schemaType`` of its schemas, for the formats that use one
REGISTRY_SCHEMA_TYPES = {f.name: f.schema_type for f in FORMATS.values() if f.schema_type is not None}
#: the formats whose payloads are lines of text
LINE_FORMATS = tuple(f.name for f in FORMATS.values() if f.line_oriented)


def is_known(name: str) -> bool:
    return str(name).upper() in FORMATS


def features(name: str) -> FormatFeatures:
    """The features of format ``name`` (any case); an unknown name has none (the statement's
    check of its formats names it first)."""
    return FORMATS.get(str(name).upper()) or FormatFeatures(str(name).upper())
