"""PROTOBUF / PROTOBUF_NOSR: generated schemas, the .proto parser, the wire format. No Spark, no broker."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest

from streamsql import types as T
from streamsql.errors import ConfigError
from streamsql.formats import FormatSpec, protobuf_format as pf, schema_registry, serde_for

COLUMNS = (
    T.Column("I", T.INTEGER), T.Column("S", T.STRING), T.Column("D", T.Decimal(4, 2)),
    T.Column("M", T.Map(T.STRING, T.DOUBLE)), T.Column("ST", T.Struct((T.StructField("F0", T.INTEGER),))),
    T.Column("TS", T.TIMESTAMP), T.Column("A", T.Array(T.BIGINT)),
)


def _batch(rows: list[dict[str, object]], columns: tuple[T.Column, ...]) -> pa.RecordBatch:
    arrays = []
    for c in columns:
        values = [r.get(c.name) for r in rows]
        if c.type.kind == T.Kind.TIMESTAMP:
            arrays.append(pa.array([None if v is None else v * 1000 for v in values], pa.timestamp("us", tz="UTC")))
        else:
            arrays.append(pa.array(values, type=T.to_arrow(c.type)))
    return pa.RecordBatch.from_arrays(arrays, names=[c.name for c in columns])


def test_generated_schema_round_trips_through_inference() -> None:
    text = pf.proto_schema(COLUMNS)
    assert "message ConnectDefault1" in text and "confluent.type.Decimal D = 3" in text
    inferred = pf.columns_from_proto(text, role="value")
    assert [(c.name, str(c.type)) for c in inferred] == [(c.name, str(c.type)) for c in COLUMNS]


def test_parser_reads_what_registries_hold() -> None:
    text = '''syntax = "proto3";
        // a comment
        import "confluent/type/decimal.proto";
        message Outer {
          message Inner { int32 f1 = 1; }
          enum Suit { SPADES = 0; HEARTS = 1; }
          Inner c1 = 1;
          map<string, int32> c2 = 2;
          repeated string c3 = 3;
          Suit c4 = 4;
          oneof choice { int32 c5 = 5; string c6 = 6; }
          optional uint32 c7 = 7;
          confluent.type.Decimal c8 = 8 [(confluent.field_meta) = { params: [{ value: "4", key: "precision" }, { value: "2", key: "scale" }]}];
        }'''
    cols = pf.columns_from_proto(text, role="value")
    assert [(c.name, str(c.type)) for c in cols] == [
        ("C1", "STRUCT<`F1` INTEGER>"), ("C2", "MAP<STRING, INTEGER>"), ("C3", "ARRAY<STRING>"), ("C4", "STRING"),
        ("C5", "INTEGER"), ("C6", "STRING"), ("C7", "BIGINT"), ("C8", "DECIMAL(4, 2)")]
    with pytest.raises(ConfigError, match="couldn't resolve name 'Missing'"):
        pf.ProtoSchema('syntax = "proto3"; message X { Missing m = 1; }')


@pytest.mark.parametrize("registry", [True, False])
def test_round_trip_with_and_without_the_registry(registry: bool) -> None:
    options = {}
    if registry:
        url = "mock://unit-protobuf"
        text = pf.proto_schema(COLUMNS)
        sid = schema_registry.register(url, "p-value", text, "PROTOBUF")
        options = schema_registry.SchemaBinding(url, "p-value", sid, {sid: text}).to_options()
    spec = FormatSpec.from_json(FormatSpec("PROTOBUF" if registry else "PROTOBUF_NOSR", COLUMNS,
                                           options=options).to_json())
    serde = serde_for(spec)
    row = {"I": 1, "S": "x", "D": Decimal("12.34"), "M": [("a", 1.5)], "ST": {"F0": 3}, "TS": 1000, "A": [1, 2]}
    encoded = serde.encode(_batch([row, {"I": None}], COLUMNS))
    if registry:
        assert encoded[0][:6] == schema_registry.frame(options["writerId"], b"\x00")
    bad = b"\xff\xff"
    decoded = serde.decode([*encoded, bad, None])
    assert decoded.errors[:2] == [None, None] and decoded.errors[3] is None
    if registry:  # too short for Confluent's 5-byte header (magic byte, schema id)
        assert decoded.errors[2] == (f"Invalid Protobuf record: record of {len(bad)} bytes is too short for the "
                                     f"Schema Registry header (5 bytes)")
    else:  # the reason after the prefix is the protobuf library's (its exception class and text)
        assert decoded.errors[2].startswith("Invalid Protobuf record: ")
    back = [c.to_pylist() for c in decoded.columns]
    assert [col[0] for col in back][:5] == [1, "x", Decimal("12.34"), [("a", 1.5)], {"F0": 3}]
    assert back[6][0] == [1, 2]
    # proto3 without presence: a null scalar reads back as its default, a null message as null
    assert [col[1] for col in back][:3] == [0, "", None]


def test_nullable_representations_keep_nulls() -> None:
    cols = (T.Column("I", T.INTEGER), T.Column("S", T.STRING))
    for mode in ("OPTIONAL", "WRAPPER"):
        serde = serde_for(FormatSpec("PROTOBUF_NOSR", cols, options={"nullable": mode}))
        decoded = serde.decode(serde.encode(_batch([{"I": None, "S": None}, {"I": 0, "S": ""}], cols)))
        assert [c.to_pylist() for c in decoded.columns] == [[None, 0], [None, ""]], mode


def test_a_key_of_nulls_is_a_null_key_and_non_string_map_keys_are_rejected() -> None:
    key = (T.Column("K", T.INTEGER, "key"),)
    assert serde_for(FormatSpec("PROTOBUF_NOSR", key)).encode(_batch([{"K": None}, {"K": 5}], key))[0] is None
    with pytest.raises(ConfigError, match="PROTOBUF format only supports MAP types with STRING keys"):
        serde_for(FormatSpec("PROTOBUF_NOSR", (T.Column("M", T.Map(T.INTEGER, T.STRING)),)))


def test_format_options_are_checked_at_statement_time() -> None:
    from streamsql.errors import AnalysisError
    from streamsql.planner.ddl import format_options

    assert format_options({"VALUE_PROTOBUF_NULLABLE_REPRESENTATION": "optional"}, "VALUE", "PROTOBUF") == {
        "nullable": "OPTIONAL"}
    with pytest.raises(AnalysisError, match="String must be one of: OPTIONAL, WRAPPER"):
        format_options({"VALUE_PROTOBUF_NULLABLE_REPRESENTATION": "maybe"}, "VALUE", "PROTOBUF")
    with pytest.raises(AnalysisError, match="only valid for the PROTOBUF formats"):
        format_options({"VALUE_PROTOBUF_NULLABLE_REPRESENTATION": "OPTIONAL"}, "VALUE", "JSON")


def test_a_schema_full_name_picks_one_of_several_messages() -> None:
    """ksqlDB's KEY_/VALUE_SCHEMA_FULL_NAME with a schema of several messages: inference reads
    that message, and records written with it carry its message index (Confluent's zig-zag
    varints: count 1, index 1)."""
    text = ('syntax = "proto3"; message ProtobufValue1 {float c1 = 1; uint32 c2 = 2;} '
            'message ProtobufValue2 {uint64 A = 1; string B = 2;}')
    assert [(c.name, c.type) for c in pf.columns_from_proto(text, role="value", full_name="ProtobufValue2")] == [
        ("A", T.BIGINT), ("B", T.STRING)]
    assert [c.name for c in pf.columns_from_proto(text, role="value")] == ["C1", "C2"]
    assert pf._index_prefix((0,)) == b"\x00" and pf._index_prefix((1,)) == b"\x02\x02"
    assert pf._message_indexes(memoryview(b"\x02\x02rest")) == ([1], 2)
