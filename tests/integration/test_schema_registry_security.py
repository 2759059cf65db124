"""A secured Schema Registry: HTTPS with a private CA and basic auth, as Confluent Cloud or a
company's registry asks for. The registry is the test registry server (a real HTTP server process
thread with TLS and basic auth); the engine, its Spark workers and the broker are real."""

from __future__ import annotations

import io
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import fastavro
import pytest

from streamsql.errors import ConfigError
from streamsql.formats import avro_format, schema_registry
from streamsql.runtime import results as r
from streamsql.conformance.registry_server import RegistryServer

from tests.support.proxies import self_signed

pytestmark = pytest.mark.integration

P = "ksql.schema.registry."
USER, PASSWORD = "alice", "s3cret-registry-pw"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RegistryServer, Path]]:
    cert, key = self_signed(tmp_path_factory.mktemp("registry-tls"), "registry")
    with RegistryServer(tls=(cert, key), user_info=f"{USER}:{PASSWORD}") as registry:
        yield registry, cert


def _set(engine, settings: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    for name, value in settings.items():
        engine.execute(f"SET '{name}'='{value}';")


def _trusted(registry: RegistryServer, ca: Path, password: str = PASSWORD) -> dict[str, str]:
    return {P + "url": registry.url, P + "basic.auth.credentials.source": "USER_INFO",
            P + "basic.auth.user.info": f"{USER}:{password}", P + "ssl.truststore.location": str(ca),
            P + "ssl.truststore.type": "PEM"}


def _avro(schema: object, schema_id: int, datum: object) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), datum)
    return schema_registry.frame(schema_id, buf.getvalue())


def test_a_query_reads_and_writes_avro_through_an_https_registry_with_basic_auth(  # type: ignore[no-untyped-def]
        engine, topic_name, secured):
    """Declaration (inference), the sink's schema registration on the driver, and the Spark
    workers' lookup of an id registered after the declaration all go through TLS and basic auth."""
    registry, ca = secured
    src = topic_name("secure_src")
    first = {"type": "record", "name": "V1", "fields": [{"name": "id", "type": "long"},
                                                        {"name": "name", "type": "string"}]}
    first_id = registry.register(f"{src}-value", json.dumps(first), "AVRO")
    _set(engine, _trusted(registry, ca))
    engine.execute(f"CREATE STREAM secure_src WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='AVRO', PARTITIONS=1);")
    newer = {"type": "record", "name": "V2", "fields": [*first["fields"], {"name": "extra", "type": "int"}]}
    newer_id = registry.register(f"{src}-value", json.dumps(newer), "AVRO")  # unknown to the snapshot
    engine.admin.produce(src, None, _avro(first, first_id, {"id": 1, "name": "one"}), 1000)
    engine.admin.produce(src, None, _avro(newer, newer_id, {"id": 2, "name": "two", "extra": 7}), 2000)
    engine.execute("CREATE STREAM secure_out AS SELECT id, UCASE(name) AS name FROM secure_src;")
    engine.wait_until_idle()
    records = engine.admin.read_all("SECURE_OUT")
    decoded = []
    for rec in records:
        schema_id, payload = schema_registry.split_header(rec.value)
        schema = fastavro.parse_schema(json.loads(registry.store.get(schema_id).text))
        decoded.append(avro_format.json_from_datum(fastavro.schemaless_reader(io.BytesIO(payload), schema, None)))
    assert decoded == [{"ID": 1, "NAME": "ONE"}, {"ID": 2, "NAME": "TWO"}]
    assert registry.store.latest("SECURE_OUT-value") is not None  # the sink's schema, registered over HTTPS


def test_a_wrong_password_names_the_setting_and_never_the_secret(engine, topic_name, secured):  # type: ignore[no-untyped-def]
    registry, ca = secured
    _set(engine, _trusted(registry, ca, password="wrong-pw-123"))
    with pytest.raises(ConfigError) as e:
        engine.execute(f"CREATE STREAM wrongpw WITH (KAFKA_TOPIC='{topic_name('wrongpw')}', VALUE_FORMAT='AVRO', "
                       f"PARTITIONS=1);")
    message = str(e.value)
    assert "refused the credentials (HTTP 401)" in message
    assert "ksql.schema.registry.basic.auth.user.info" in message
    assert "wrong-pw-123" not in message and PASSWORD not in message


def test_an_untrusted_certificate_names_the_trust_store_setting(engine, topic_name, secured):  # type: ignore[no-untyped-def]
    registry, _ca = secured
    _set(engine, {P + "url": registry.url, P + "basic.auth.user.info": f"{USER}:{PASSWORD}"})
    with pytest.raises(ConfigError, match=r"certificate is not trusted .*'ksql.schema.registry.ssl.truststore.location'"):
        engine.execute(f"CREATE STREAM untrusted WITH (KAFKA_TOPIC='{topic_name('untrusted')}', "
                       f"VALUE_FORMAT='AVRO', PARTITIONS=1);")


def test_an_unreachable_registry_fails_fast_naming_the_url_setting(engine, topic_name):  # type: ignore[no-untyped-def]
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _set(engine, {P + "url": f"http://127.0.0.1:{port}"})
    began = time.monotonic()
    with pytest.raises(ConfigError, match=r"not reachable .*check 'ksql.schema.registry.url'"):
        engine.execute(f"CREATE STREAM unreachable WITH (KAFKA_TOPIC='{topic_name('unreachable')}', "
                       f"VALUE_FORMAT='AVRO', PARTITIONS=1);")
    assert time.monotonic() - began < 20  # a few quick retries, not a hang


def test_show_properties_hides_the_registry_credentials(engine, secured):  # type: ignore[no-untyped-def]
    registry, ca = secured
    _set(engine, {**_trusted(registry, ca), P + "bearer.auth.token": "tok-123"})
    [shown] = engine.execute("SHOW PROPERTIES;")
    assert isinstance(shown, r.Properties)
    text = json.dumps(shown.properties)
    assert PASSWORD not in text and "tok-123" not in text
    assert shown.properties[P + "basic.auth.user.info"] == "[hidden]"
    assert shown.properties[P + "ssl.truststore.location"] == str(ca)


MONEY = 'syntax = "proto3"; package acme.common; message Money { string currency = 1; int64 units = 2; }'
ORDER = '''syntax = "proto3";
package acme.orders;
import "google/protobuf/any.proto";
import "acme/common/money.proto";
option java_package = "com.acme.orders";
message Order {
  string id = 1;
  acme.common.Money total = 2;
  google.protobuf.Any detail = 3;%s
}
service Orders { rpc Get (Order) returns (Order); }
'''


def _order(schema_id: int, text: str, values: dict[str, object]) -> bytes:
    from streamsql.formats import protobuf_format as pf

    message = pf.ProtoSchema(text, {"acme/common/money.proto": MONEY}).message_class()()
    pf.fill_message(message, values)
    return schema_registry.frame(schema_id, b"\x00" + message.SerializeToString())


def test_protobuf_with_imports_and_any_through_registry_references(engine, topic_name, secured):  # type: ignore[no-untyped-def]
    """The value schema imports another registered schema (a registry reference) and protobuf's
    ``Any``, and declares a service: the driver infers the columns, and the Spark workers compile a
    newer version (registered after the declaration) with its references, fetched over HTTPS."""
    from streamsql.formats import protobuf_format as pf
    from streamsql.formats.schema_registry import SchemaReference

    registry, ca = secured
    src = topic_name("orders_pb")
    refs = (SchemaReference("acme/common/money.proto", "acme-money", 1),)
    registry.register("acme-money", MONEY, "PROTOBUF")
    first = ORDER % ""
    first_id = registry.register(f"{src}-value", first, "PROTOBUF", references=refs)
    _set(engine, _trusted(registry, ca))
    engine.execute(f"CREATE STREAM orders_pb WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='PROTOBUF', PARTITIONS=1);")
    [described] = engine.execute("DESCRIBE orders_pb;")
    assert [(f.name, f.type) for f in described.fields] == [
        ("ID", "STRING"), ("TOTAL", "STRUCT<`CURRENCY` STRING, `UNITS` BIGINT>"),
        ("DETAIL", "STRUCT<`TYPE_URL` STRING, `VALUE` BYTES>")]
    newer = ORDER % "\n  string note = 4;"
    newer_id = registry.register(f"{src}-value", newer, "PROTOBUF", references=refs)
    engine.admin.produce(src, None, _order(first_id, first, {
        "id": "o-1", "total": {"currency": "EUR", "units": 12},
        "detail": {"type_url": "type.googleapis.com/acme.Gift", "value": b"\x08\x01"}}), 1000)
    engine.admin.produce(src, None, _order(newer_id, newer, {
        "id": "o-2", "total": {"currency": "USD", "units": 30}, "note": "newer"}), 2000)
    engine.execute("CREATE STREAM orders_pb_out AS SELECT id, total->units AS units, detail->type_url AS kind "
                   "FROM orders_pb;")
    engine.wait_until_idle()
    out = []
    for rec in engine.admin.read_all("ORDERS_PB_OUT"):
        schema_id, payload = schema_registry.split_header(rec.value)
        path, used = pf._message_indexes(payload)
        message = pf.ProtoSchema(registry.store.get(schema_id).text).message_class(path).FromString(
            bytes(payload[used:]))
        out.append(pf.message_to_data(message))
    assert out == [{"ID": "o-1", "UNITS": 12, "KIND": "type.googleapis.com/acme.Gift"},
                   {"ID": "o-2", "UNITS": 30, "KIND": ""}]  # an absent Any reads as null: its url as ""


def _declare_avro(engine, topic_name, registry: RegistryServer, settings: dict[str, str]) -> list[str]:  # type: ignore[no-untyped-def]
    """Declare an AVRO stream inferred from the registry; its column names."""
    src = topic_name("declared")
    schema = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]}
    registry.register(f"{src}-value", json.dumps(schema), "AVRO")
    _set(engine, settings)
    name = f"declared_{src[-6:]}"
    engine.execute(f"CREATE STREAM {name} WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='AVRO', PARTITIONS=1);")
    [described] = engine.execute(f"DESCRIBE {name};")
    return [f.name for f in described.fields]


def test_a_static_bearer_token(engine, topic_name, tmp_path):  # type: ignore[no-untyped-def]
    cert, key = self_signed(tmp_path, "bearer")
    with RegistryServer(tls=(cert, key), token="tok-abc") as registry:
        base = {P + "url": registry.url, P + "ssl.truststore.location": str(cert), P + "ssl.truststore.type": "PEM",
                P + "bearer.auth.credentials.source": "STATIC_TOKEN"}
        assert _declare_avro(engine, topic_name, registry, {**base, P + "bearer.auth.token": "tok-abc"}) == ["ID"]
        with pytest.raises(ConfigError, match=r"refused the credentials \(HTTP 401\): check "
                                              r"'ksql.schema.registry.bearer.auth.token'") as e:
            _declare_avro(engine, topic_name, registry, {**base, P + "bearer.auth.token": "tok-wrong"})
        assert "tok-wrong" not in str(e.value)


def test_a_client_certificate_for_mutual_tls(engine, topic_name, tmp_path):  # type: ignore[no-untyped-def]
    server_cert, server_key = self_signed(tmp_path, "server")
    client_cert, client_key = self_signed(tmp_path, "client")
    client_pem = tmp_path / "client-keystore.pem"  # the Java client's PEM key store: certificate and key
    client_pem.write_text(client_cert.read_text() + client_key.read_text())
    with RegistryServer(tls=(server_cert, server_key), client_ca=client_cert) as registry:
        trust = {P + "url": registry.url, P + "ssl.truststore.location": str(server_cert),
                 P + "ssl.truststore.type": "PEM"}
        keystore = {P + "ssl.keystore.location": str(client_pem), P + "ssl.keystore.type": "PEM"}
        assert _declare_avro(engine, topic_name, registry, {**trust, **keystore}) == ["ID"]
        _set(engine, {P + "ssl.keystore.location": "", P + "ssl.keystore.type": ""})
        with pytest.raises(ConfigError, match=r"the registry asks for a client certificate .*"
                                              r"set 'ksql.schema.registry.ssl.keystore.location'"):
            _declare_avro(engine, topic_name, registry, trust)
