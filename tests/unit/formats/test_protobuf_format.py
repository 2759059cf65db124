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
    with pytest.raises(ConfigError, match='line 1, column 32: "Missing" is not defined'):
        pf.ProtoSchema('syntax = "proto3"; message X { Missing m = 1; }')


REAL_WORLD = '''syntax = "proto3";
package acme.orders.v1;

import "google/protobuf/any.proto";
import "google/protobuf/struct.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/descriptor.proto";
import "acme/common/money.proto";

option java_package = "com.acme.orders.v1";
option go_package = "acme/orders/v1;ordersv1";

extend google.protobuf.FieldOptions { bool sensitive = 50001; }

message Order {
  option deprecated = false;
  reserved 9, 10 to 12;
  reserved "legacy";
  string id = 1 [json_name = "orderId", (sensitive) = false];
  acme.common.Money total = 2;
  google.protobuf.Any detail = 3;
  google.protobuf.Struct attributes = 4;
  google.protobuf.Duration ttl = 5;
  repeated Line lines = 6;
  repeated int32 codes = 7 [packed = true];
  message Line { string sku = 1; int32 qty = 2; }
}

service OrderService {
  rpc Get (Order) returns (Order) { option idempotency_level = NO_SIDE_EFFECTS; }
  rpc Watch (Order) returns (stream Order);
}
'''
MONEY = 'syntax = "proto3"; package acme.common; message Money { string currency = 1; int64 units = 2; }'


def test_protoc_reads_real_world_files_with_imports_services_extensions_and_options() -> None:
    schema = pf.ProtoSchema(REAL_WORLD, {"acme/common/money.proto": MONEY})
    desc = schema.message()
    assert desc.full_name == "acme.orders.v1.Order"
    inferred = {f.name.upper(): str(pf._sql_type(schema, desc, f, (desc.full_name,))) for f in desc.fields}
    assert inferred == {
        "ID": "STRING", "TOTAL": "STRUCT<`CURRENCY` STRING, `UNITS` BIGINT>",
        "DETAIL": "STRUCT<`TYPE_URL` STRING, `VALUE` BYTES>", "ATTRIBUTES": "STRING",
        "TTL": "STRUCT<`SECONDS` BIGINT, `NANOS` INTEGER>",
        "LINES": "ARRAY<STRUCT<`SKU` STRING, `QTY` INTEGER>>", "CODES": "ARRAY<INTEGER>"}


def test_an_import_nobody_provides_is_named() -> None:
    with pytest.raises(ConfigError, match="acme/common/money.proto"):
        pf.ProtoSchema(REAL_WORLD)


def test_a_syntax_error_names_line_and_column() -> None:
    with pytest.raises(ConfigError, match="Invalid Protobuf schema: line 3, column 11: Missing field number"):
        pf.ProtoSchema('syntax = "proto3";\nmessage X {\n  int32 a 1;\n}')
    with pytest.raises(ConfigError, match="in 'dep.proto' line 1"):
        pf.ProtoSchema('syntax = "proto3"; import "dep.proto"; message X { int32 a = 1; }', {"dep.proto": "garbage"})


def test_a_reference_name_cannot_leave_the_schema_directory() -> None:
    with pytest.raises(ConfigError, match="Invalid Protobuf schema reference name '../x.proto'"):
        pf.ProtoSchema('syntax = "proto3"; message X { int32 a = 1; }', {"../x.proto": 'syntax = "proto3";'})


def test_proto2_and_a_missing_syntax_line() -> None:
    proto2 = 'syntax = "proto2"; message P { required int32 a = 1; optional string b = 2 [default = "x"]; }'
    assert [str(c.type) for c in pf.columns_from_proto(proto2, role="value")] == ["INTEGER", "STRING"]
    assert [c.name for c in pf.columns_from_proto("message N { int32 a = 1; }", role="value")] == ["A"]


def test_a_recursive_message_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match="Protobuf message 'Node' contains itself .*a recursive message"):
        pf.columns_from_proto('syntax = "proto3"; message Node { int32 v = 1; Node next = 2; }', role="value")


def test_any_and_struct_round_trip() -> None:
    text = ('syntax = "proto3"; import "google/protobuf/any.proto"; import "google/protobuf/struct.proto"; '
            'message E { google.protobuf.Any a = 1; google.protobuf.Struct s = 2; google.protobuf.Value v = 3; }')
    cols = tuple(pf.columns_from_proto(text, role="value"))
    assert [(c.name, str(c.type)) for c in cols] == [
        ("A", "STRUCT<`TYPE_URL` STRING, `VALUE` BYTES>"), ("S", "STRING"), ("V", "STRING")]
    sid = schema_registry.register("mock://unit-protobuf-json", "e-value", text, "PROTOBUF")
    options = schema_registry.SchemaBinding("mock://unit-protobuf-json", "e-value", sid, {sid: text}).to_options()
    spec = FormatSpec("PROTOBUF", cols, options=options)
    serde = serde_for(FormatSpec.from_json(spec.to_json()))
    row = {"A": {"TYPE_URL": "type.googleapis.com/x.Y", "VALUE": b"\x08\x01"},
           "S": '{"k":[1,"two",null,{"n":true}]}', "V": '"text"'}
    encoded = serde.encode(_batch([row], cols))
    decoded = serde.decode(encoded)
    assert decoded.errors == [None]
    assert [c.to_pylist() for c in decoded.columns] == [
        [{"TYPE_URL": "type.googleapis.com/x.Y", "VALUE": b"\x08\x01"}], ['{"k":[1.0,"two",null,{"n":true}]}'],
        ['"text"']]


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
