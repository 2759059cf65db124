"""AVRO in Confluent's wire format, and the in-memory Schema Registry: no Spark, no broker."""

from __future__ import annotations

import io
import json
from decimal import Decimal

import fastavro
import pyarrow as pa
import pytest

from streamsql import types as T
from streamsql.conformance.compare import data_equal
from streamsql.errors import ConfigError
from streamsql.formats import FormatSpec, avro_format, schema_registry, serde_for


def _bound_spec(url: str, subject: str, columns: tuple[T.Column, ...], *, unwrapped: bool = False,
                wrap: bool = True) -> FormatSpec:
    text = json.dumps(avro_format.avro_schema(columns, unwrapped=unwrapped))
    schema_id = schema_registry.register(url, subject, text, "AVRO")
    binding = schema_registry.SchemaBinding(url, subject, schema_id, {schema_id: text})
    # through JSON, as the spec travels to Spark's workers
    return FormatSpec.from_json(FormatSpec("AVRO", columns, wrap_single_value=wrap,
                                           options=binding.to_options()).to_json())


def _write(schema: object, schema_id: int, datum: object) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), datum)
    return schema_registry.frame(schema_id, buf.getvalue())


COLUMNS = (
    T.Column("ID", T.BIGINT), T.Column("NAME", T.STRING), T.Column("PRICE", T.Decimal(6, 2)),
    T.Column("TAGS", T.Array(T.STRING)), T.Column("ATTRS", T.Map(T.STRING, T.DOUBLE)),
    T.Column("ADDR", T.Struct((T.StructField("CITY", T.STRING),))), T.Column("TS", T.TIMESTAMP),
    T.Column("DAY", T.DATE),
)


def test_generated_schema_is_ksqldb_shaped() -> None:
    schema = avro_format.avro_schema(COLUMNS[:3], unwrapped=False)
    assert schema["name"] == "KsqlDataSourceSchema"
    assert schema["namespace"] == "io.confluent.ksql.avro_schemas"
    assert schema["fields"][0] == {"name": "ID", "type": ["null", "long"], "default": None}
    assert schema["fields"][2]["type"][1] == {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2}


def test_round_trip_through_the_wire_format() -> None:
    spec = _bound_spec("mock://unit-roundtrip", "t-value", COLUMNS)
    serde = serde_for(spec)
    row = {"ID": 7, "NAME": "n", "PRICE": Decimal("12.50"), "TAGS": ["a", None], "ATTRS": [("x", 1.5)],
           "ADDR": {"CITY": "Oslo"}, "TS": 1_700_000_000_123, "DAY": 19000}
    arrays = [pa.array([row[c.name]], type=T.to_arrow(c.type)) if c.type.kind not in (T.Kind.TIMESTAMP, T.Kind.DATE)
              else None for c in COLUMNS]
    arrays[6] = pa.array([row["TS"] * 1000], type=pa.timestamp("us", tz="UTC"))
    arrays[7] = pa.array([row["DAY"]], type=pa.int32()).cast(pa.date32())
    batch = pa.RecordBatch.from_arrays(arrays, names=[c.name for c in COLUMNS])
    encoded = serde.encode(batch)
    assert encoded[0][:5] == schema_registry.frame(spec.options["writerId"], b"")
    decoded = serde.decode(encoded)
    assert decoded.errors == [None]
    back = [c[0].as_py() for c in decoded.columns]
    assert back[:6] == [7, "n", Decimal("12.50"), ["a", None], [("x", 1.5)], {"CITY": "Oslo"}]
    assert back[6].timestamp() * 1000 == pytest.approx(row["TS"])


def test_reads_records_of_another_writer_schema_by_name_and_coerces() -> None:
    """A producer's own schema (lower-case names, int where we want STRING, an enum, an extra field)."""
    url = "mock://unit-foreign"
    columns = (T.Column("C1", T.STRING), T.Column("C2", T.STRING), T.Column("C3", T.DOUBLE))
    spec_text = json.dumps({"type": "record", "name": "blah", "fields": [
        {"name": "c1", "type": "int"}, {"name": "c2", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
        {"name": "c3", "type": "float"}, {"name": "extra", "type": "string"}]})
    foreign = schema_registry.register(url, "t-value", spec_text, "AVRO")
    spec = _bound_spec(url, "t-value", columns)
    spec.options["schemas"][str(foreign)] = spec_text
    raw = _write(json.loads(spec_text), foreign, {"c1": 5, "c2": "B", "c3": 4.0, "extra": "x"})
    decoded = serde_for(spec).decode([raw])
    assert decoded.errors == [None]
    assert [c[0].as_py() for c in decoded.columns] == ["5", "B", 4.0]


def test_bad_records_fail_alone_with_a_reason() -> None:
    columns = (T.Column("A", T.INTEGER),)
    spec = _bound_spec("mock://unit-bad", "t-value", columns)
    good = _write(json.loads(spec.options["schemas"][str(spec.options["writerId"])]), spec.options["writerId"], {"A": 1})
    decoded = serde_for(spec).decode([b"{json}", good, schema_registry.frame(99, b"\x02"), good[:5], None])
    assert decoded.columns[0].to_pylist() == [None, 1, None, None, None]
    # b"{json}" starts with '{' (123), not Confluent's magic byte 0
    assert decoded.errors[0] == (f"Invalid Avro record: unknown magic byte {ord('{')} "
                                 f"(not written with a Schema Registry serializer)")
    assert decoded.errors[1] is None
    assert decoded.errors[2].startswith("Invalid Avro record: unknown schema id 99 ")
    # a header with no payload: the writer's id is named (the reason after it is fastavro's)
    assert decoded.errors[3].startswith(f"Invalid Avro record for schema id {spec.options['writerId']}: ")
    assert decoded.errors[4] is None


def test_single_key_column_is_an_anonymous_value() -> None:
    columns = (T.Column("K", T.BIGINT, "key"),)
    spec = _bound_spec("mock://unit-key", "t-key", columns, unwrapped=True)
    raw = _write(["null", "long"], spec.options["writerId"], 998877665544332211)
    assert serde_for(spec).decode([raw]).columns[0].to_pylist() == [998877665544332211]


def test_schema_inference() -> None:
    schema = {"type": "record", "name": "x", "fields": [
        {"name": "id", "type": "long"}, {"name": "price", "type": ["null", {"type": "bytes", "logicalType": "decimal",
                                                                            "precision": 4, "scale": 2}]},
        {"name": "s", "type": {"type": "record", "name": "y", "fields": [{"name": "f0", "type": "int"}]}},
        {"name": "m", "type": {"type": "map", "values": "string"}}]}
    cols = avro_format.columns_from_avro(schema, role="value")
    assert [(c.name, str(c.type)) for c in cols] == [
        ("ID", "BIGINT"), ("PRICE", "DECIMAL(4, 2)"), ("S", "STRUCT<`F0` INTEGER>"), ("M", "MAP<STRING, STRING>")]
    assert [(c.name, str(c.type)) for c in avro_format.columns_from_avro("int", role="key")] == [("ROWKEY", "INTEGER")]


def test_names_and_maps_avro_cannot_hold_are_statement_errors() -> None:
    with pytest.raises(ConfigError, match="Illegal initial character: 1abc"):
        serde_for(FormatSpec("AVRO", (T.Column("1abc", T.INTEGER),)))
    with pytest.raises(ConfigError, match="Avro only supports MAPs with STRING keys"):
        serde_for(FormatSpec("AVRO", (T.Column("M", T.Map(T.INTEGER, T.STRING)),)))
    with pytest.raises(ConfigError, match=r"fullSchemaName cannot be empty"):
        serde_for(FormatSpec("AVRO", (T.Column("A", T.INTEGER),), options={"fullName": " "}))


def test_memory_registry_ids_subjects_and_requested_ids() -> None:
    url = "mock://unit-registry"
    a = schema_registry.register(url, "s-value", '"int"', "AVRO")
    assert schema_registry.register(url, "s-value", '"int"', "AVRO") == a  # same text, same id
    b = schema_registry.register(url, "s-value", '"long"', "AVRO")
    assert schema_registry.latest(url, "s-value").id == b
    assert schema_registry.versions(url, "s-value") == {a: '"int"', b: '"long"'}
    assert schema_registry.latest(url, "other-value") is None
    assert schema_registry.register(url, "t-value", '"string"', "AVRO", schema_id=102) == 102
    assert schema_registry.by_id(url, 102).text == '"string"'
    with pytest.raises(ConfigError, match="expected http://, https:// or mock://"):
        schema_registry.latest("ftp://x", "s")


def test_qtt_compares_decimals_as_ksqldb_does() -> None:
    assert data_equal("5.40", Decimal("5.40"))
    assert not data_equal("5.40", Decimal("5.4"))
    assert data_equal("005.4", Decimal("5.4"))
    assert data_equal(5.4, Decimal("5.40"))
    assert not data_equal("5.40", "5.4")


def test_json_sr_frames_json_and_rejects_unframed_records() -> None:
    columns = (T.Column("A", T.INTEGER), T.Column("B", T.STRING))
    spec = FormatSpec("JSON_SR", columns, options={"writerId": 7})
    serde = serde_for(spec)
    batch = pa.RecordBatch.from_arrays([pa.array([1], pa.int32()), pa.array(["x"])], names=["A", "B"])
    [raw] = serde.encode(batch)
    assert raw == schema_registry.frame(7, b'{"A":1,"B":"x"}')
    decoded = serde.decode([raw, b'{"A":2}', schema_registry.frame(7, b"{oops"), None])
    assert decoded.columns[0].to_pylist() == [1, None, None, None]
    assert decoded.errors[0] is None and "magic byte" in decoded.errors[1]
    assert "Malformed JSON" in decoded.errors[2] and decoded.errors[3] is None
    from streamsql.formats import json_sr_format

    inferred = json_sr_format.columns_from_json_schema(json_sr_format.json_schema(columns, unwrapped=False),
                                                       role="value")
    assert [(c.name, str(c.type)) for c in inferred] == [("A", "INTEGER"), ("B", "STRING")]


def test_json_sr_writes_the_writer_schemas_other_properties_as_null() -> None:
    """With VALUE_SCHEMA_ID naming a schema with a property no column fills, ksqlDB's JSON_SR
    serializer writes that property as null (a reader of the schema sees it)."""
    writer = {"type": "object", "properties": {"c1": {"type": "integer"}, "c2": {"type": "string"}}}
    spec = FormatSpec("JSON_SR", (T.Column("c1", T.BIGINT),),
                      options={"writerId": 4, "schemas": {"4": json.dumps(writer)}})
    serde = serde_for(spec)
    batch = pa.RecordBatch.from_arrays([pa.array([4], pa.int64())], names=["c1"])
    [raw] = serde.encode(batch)
    schema_id, payload = schema_registry.split_header(raw)
    assert schema_id == 4 and json.loads(bytes(payload)) == {"c1": 4, "c2": None}
    # without the writer's text nothing is added
    plain = serde_for(FormatSpec("JSON_SR", (T.Column("c1", T.BIGINT),), options={"writerId": 4}))
    assert json.loads(bytes(schema_registry.split_header(plain.encode(batch)[0])[1])) == {"c1": 4}


def test_a_missing_field_with_a_default_is_written_as_the_default() -> None:
    """ksqlDB with a schema id: an INSERT that leaves out a non-null field that has a default
    writes the default (a struct's ``NUM_VOTES`` long default 10), not a type error."""
    url = "mock://defaults"
    writer = {"type": "record", "name": "Test", "fields": [
        {"name": "ID", "type": "string"},
        {"name": "DATA", "type": {"type": "record", "name": "DynamicData", "fields": [
            {"name": "NUM_VOTES", "type": "long", "default": 10}, {"name": "EMAIL", "type": "string"}]}}]}
    schema_id = schema_registry.register(url, "t-value", json.dumps(writer), "AVRO")
    columns = (T.Column("ID", T.STRING),
               T.Column("DATA", T.Struct((T.StructField("NUM_VOTES", T.BIGINT), T.StructField("EMAIL", T.STRING)))))
    binding = schema_registry.SchemaBinding(url, "t-value", schema_id, {schema_id: json.dumps(writer)})
    spec = FormatSpec.from_json(FormatSpec("AVRO", columns, options=binding.to_options()).to_json())
    batch = pa.RecordBatch.from_pylist([{"ID": "abc", "DATA": {"NUM_VOTES": None, "EMAIL": "a@b.c"}}],
                                       schema=pa.schema([pa.field("ID", pa.string()), pa.field(
                                           "DATA", pa.struct([("NUM_VOTES", pa.int64()), ("EMAIL", pa.string())]))]))
    (raw,) = serde_for(spec).encode(batch)
    assert raw is not None
    _id, payload = schema_registry.split_header(raw)
    assert fastavro.schemaless_reader(io.BytesIO(bytes(payload)), fastavro.parse_schema(writer)) == {
        "ID": "abc", "DATA": {"NUM_VOTES": 10, "EMAIL": "a@b.c"}}
    assert not avro_format._defaults_needed(avro_format.avro_schema(COLUMNS, unwrapped=False))


def test_a_json_decimal_of_more_than_28_digits_becomes_an_avro_decimal() -> None:
    # math.json "round with large DECIMAL values - AVRO": a DECIMAL(38, 16) input of 33 digits
    # raised decimal.InvalidOperation (the default context's 28 digits), a crash of the runner
    from streamsql.formats.avro_format import datum_from_json

    schema = {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 16}
    assert datum_from_json(schema, "12345678987654321.5") == Decimal("12345678987654321.5000000000000000")
    assert str(datum_from_json(schema, 0.5)) == "0.5000000000000000"
    assert str(datum_from_json({**schema, "scale": 2}, "999.996")) == "1000.00"
