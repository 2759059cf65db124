"""AVRO sources and sinks end to end: real broker, real SparkSession, in-memory Schema Registry."""

from __future__ import annotations

import io
import json

import fastavro
import pytest

from streamsql.errors import ConfigError
from streamsql.formats import avro_format, schema_registry
from streamsql.catalog import source_formats
from streamsql.runtime import results as r

from tests.support.processing_log import deserialization_errors

pytestmark = pytest.mark.integration


def _avro(schema: object, schema_id: int, datum: object) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), datum)
    return schema_registry.frame(schema_id, buf.getvalue())


def _decoded(url: str, raw: bytes) -> object:
    schema_id, payload = schema_registry.split_header(raw)
    schema = fastavro.parse_schema(json.loads(schema_registry.by_id(url, schema_id).text))
    return avro_format.json_from_datum(fastavro.schemaless_reader(io.BytesIO(payload), schema, None))


def test_avro_needs_a_registry_url(engine, topic_name):  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match="ksql.schema.registry.url"):
        engine.execute(f"CREATE STREAM nourl (a INT) WITH (KAFKA_TOPIC='{topic_name('nourl')}', "
                       f"VALUE_FORMAT='AVRO', PARTITIONS=1);")


def test_inferred_avro_source_to_avro_sink_with_a_bad_record_in_between(engine, topic_name):  # type: ignore[no-untyped-def]
    url = f"mock://{topic_name('registry')}"
    src = topic_name("orders")
    engine.execute(f"SET '{schema_registry.URL_PROPERTY}'='{url}';")
    engine.execute("SET 'auto.offset.reset'='earliest';")
    engine.admin.create_topic(src, 1)
    producer_schema = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
        {"name": "id", "type": "long"}, {"name": "item", "type": "string"},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 8, "scale": 2}}]}
    sid = schema_registry.register(url, f"{src}-value", json.dumps(producer_schema), "AVRO")

    # no columns: they come from the subject's latest schema
    engine.execute(f"CREATE STREAM orders WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='AVRO');")
    [desc] = engine.execute("DESCRIBE orders;")
    assert isinstance(desc, r.SourceDescription)
    assert [(f.name, f.type) for f in desc.fields] == [("ID", "BIGINT"), ("ITEM", "STRING"), ("PRICE", "DECIMAL(8, 2)")]

    from decimal import Decimal
    good1 = _avro(producer_schema, sid, {"id": 1, "item": "tea", "price": Decimal("3.50")})
    good2 = _avro(producer_schema, sid, {"id": 2, "item": "cake", "price": Decimal("12.00")})
    engine.admin.produce(src, None, good1, 1000, flush=False)
    engine.admin.produce(src, None, b'{"not": "avro"}', 2000, flush=False)  # offset 1: malformed
    engine.admin.produce(src, None, good2, 3000, flush=False)
    engine.admin.flush()

    engine.execute("CREATE STREAM pricey AS SELECT id, item, price * 2 AS double_price FROM orders WHERE price > 1;")
    engine.wait_until_idle()
    out = engine.admin.read_all("PRICEY")
    assert [(_decoded(url, rec.value), rec.timestamp) for rec in out] == [
        ({"ID": 1, "ITEM": "tea", "DOUBLE_PRICE": Decimal("7.00")}, 1000),
        ({"ID": 2, "ITEM": "cake", "DOUBLE_PRICE": Decimal("24.00")}, 3000),
    ]
    # the sink registered the schema it writes with, ksqlDB's record name, under <topic>-value
    sink = engine.catalog.get("PRICEY")
    written = json.loads(schema_registry.latest(url, f"{sink.topic}-value").text)
    assert written["name"] == "KsqlDataSourceSchema" and [f["name"] for f in written["fields"]] == [
        "ID", "ITEM", "DOUBLE_PRICE"]
    # the malformed record went to the processing log with its offset, and nothing else was lost
    errors = deserialization_errors(engine.admin, engine.processing_log_topic, src)
    # exactly that one record, in ksqlDB's "Failed to deserialize value from topic: <t>. <reason>" shape;
    # it starts with '{' (123) where Confluent's magic byte 0 belongs
    mine = [(e["offset"], e["target"], e["errorMessage"]) for e in errors if e["topic"] == src]
    assert mine == [(1, "value", f"Failed to deserialize value from topic: {src}. Invalid Avro record: unknown "
                                 f"magic byte {ord('{')} (not written with a Schema Registry serializer)")]


def test_insert_values_into_an_avro_stream_with_a_key(engine, topic_name):  # type: ignore[no-untyped-def]
    url = f"mock://{topic_name('registry')}"
    src = topic_name("readings")
    engine.execute(f"SET '{schema_registry.URL_PROPERTY}'='{url}';")
    engine.execute(f"CREATE STREAM readings (sensor BIGINT KEY, v DOUBLE, tags ARRAY<STRING>) "
                   f"WITH (KAFKA_TOPIC='{src}', FORMAT='AVRO', PARTITIONS=1);")
    engine.execute("INSERT INTO readings (sensor, v, tags) VALUES (42, 1.5, ARRAY['a', 'b']);")
    [rec] = engine.admin.read_all(src)
    assert _decoded(url, rec.key) == 42  # a single key column: an anonymous Avro long
    assert _decoded(url, rec.value) == {"V": 1.5, "TAGS": ["a", "b"]}
    source = engine.catalog.get("READINGS")
    assert source_formats.key_spec(source).options["subject"] == f"{src}-key"


def test_http_registry_client_against_a_real_http_registry() -> None:
    from streamsql.conformance.registry_server import RegistryServer

    with RegistryServer() as registry:
        url = registry.url
        assert schema_registry.latest(url, "nothing-value") is None
        a = schema_registry.register(url, "orders-value", '"int"', "AVRO")
        b = schema_registry.register(url, "orders-value", '"long"', "AVRO")
        assert schema_registry.latest(url, "orders-value").id == b
        assert schema_registry.versions(url, "orders-value") == {a: '"int"', b: '"long"'}
        assert schema_registry.by_id(url, a).text == '"int"'
        with pytest.raises(ConfigError, match="no schema with id 99"):
            schema_registry.by_id(url, 99)


def test_workers_fetch_schemas_registered_after_the_source_was_declared(engine, topic_name):  # type: ignore[no-untyped-def]
    """A producer moves to a newer schema: the declaration-time snapshot does not have its id, so
    Spark's Python workers ask the (real, HTTP) registry."""
    from streamsql.conformance.registry_server import RegistryServer

    with RegistryServer() as registry:
        src = topic_name("evolving")
        engine.execute(f"SET '{schema_registry.URL_PROPERTY}'='{registry.url}';")
        engine.execute("SET 'auto.offset.reset'='earliest';")
        engine.execute(f"CREATE STREAM evolving (id BIGINT, name STRING) WITH (KAFKA_TOPIC='{src}', "
                       f"VALUE_FORMAT='AVRO', PARTITIONS=1);")
        newer = {"type": "record", "name": "V2", "fields": [
            {"name": "id", "type": "long"}, {"name": "name", "type": "string"}, {"name": "extra", "type": "int"}]}
        sid = schema_registry.register(registry.url, f"{src}-value", json.dumps(newer), "AVRO")
        assert str(sid) not in source_formats.value_spec(engine.catalog.get("EVOLVING")).options["schemas"]
        engine.admin.produce(src, None, _avro(newer, sid, {"id": 5, "name": "five", "extra": 1}), 1000)
        engine.execute("CREATE STREAM evolving_out AS SELECT id, name FROM evolving;")
        engine.wait_until_idle()
        [rec] = engine.admin.read_all("EVOLVING_OUT")
        assert _decoded(registry.url, rec.value) == {"ID": 5, "NAME": "five"}


def test_a_schema_named_by_id_keeps_its_field_names(engine, topic_name):  # type: ignore[no-untyped-def]
    """ksqlDB infers columns from a schema given by ``VALUE_SCHEMA_ID`` with the schema's own field
    names (nested ones too), from a subject's latest schema upper-cased; INSERT VALUES then writes
    records with the schema's names (RQTT insert-values: 'AVRO schema … with schema id')."""
    url = f"mock://{topic_name('registry')}"
    src = topic_name("mail")
    engine.execute(f"SET '{schema_registry.URL_PROPERTY}'='{url}';")
    engine.admin.create_topic(src, 1)
    schema = {"type": "record", "name": "Test", "fields": [
        {"name": "template_id", "type": "string"},
        {"name": "dynamic_data", "type": {"type": "record", "name": "DynamicData", "fields": [
            {"name": "num_votes", "type": "long"}, {"name": "donorEmail", "type": "string"}]}}]}
    sid = schema_registry.register(url, "some-other-subject", json.dumps(schema), "AVRO")
    engine.execute(f"CREATE STREAM by_id WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='AVRO', VALUE_SCHEMA_ID={sid});")
    [desc] = engine.execute("DESCRIBE by_id;")
    assert [(f.name, f.type) for f in desc.fields] == [
        ("template_id", "STRING"), ("dynamic_data", "STRUCT<`num_votes` BIGINT, `donorEmail` STRING>")]
    engine.execute("INSERT INTO by_id (`template_id`, `dynamic_data`) "
                   "VALUES ('abc', STRUCT(`num_votes` := 5, `donorEmail` := 'a@b.org'));")
    [rec] = engine.admin.read_all(src)
    assert schema_registry.split_header(rec.value)[0] == sid  # written with the schema it named
    assert _decoded(url, rec.value) == {"template_id": "abc", "dynamic_data": {"num_votes": 5, "donorEmail": "a@b.org"}}

    # the same schema as the subject's latest, no id: ksqlDB's upper-cased names
    other = topic_name("mail_latest")
    engine.admin.create_topic(other, 1)
    schema_registry.register(url, f"{other}-value", json.dumps(schema), "AVRO")
    engine.execute(f"CREATE STREAM by_latest WITH (KAFKA_TOPIC='{other}', VALUE_FORMAT='AVRO');")
    [desc] = engine.execute("DESCRIBE by_latest;")
    assert [(f.name, f.type) for f in desc.fields] == [
        ("TEMPLATE_ID", "STRING"), ("DYNAMIC_DATA", "STRUCT<`NUM_VOTES` BIGINT, `DONOREMAIL` STRING>")]
