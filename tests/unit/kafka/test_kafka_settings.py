"""Kafka client settings: where users give them, the Java forms translated for librdkafka, and
secrets never shown (issue 20). No broker is involved; the TLS path is in
tests/integration/test_kafka_security.py."""

from __future__ import annotations

import pytest

from streamsql.errors import ConfigError
from streamsql.kafka import settings
from streamsql.kafka.clients import client_config
from streamsql.runtime.config import resolve_config


def test_settings_come_from_the_file_the_environment_and_flags_in_that_order(tmp_path) -> None:  # type: ignore[no-untyped-def]
    props = {"security.protocol": "SSL", "ksql.streams.ssl.ca.location": "/etc/ca.pem",
             "sasl.username": "file-user", "ksql.query.pull.table.scan.enabled": "true"}
    env = {"STREAMSQL_KAFKA_SASL_USERNAME": "env-user", "STREAMSQL_KAFKA_SASL_PASSWORD": "s3cret", "HOME": "/root"}
    got = settings.from_sources(props, env, ["sasl.username=flag-user", "client.id=streamsql-1"])
    assert got == {"security.protocol": "SSL", "ssl.ca.location": "/etc/ca.pem", "sasl.username": "flag-user",
                   "sasl.password": "s3cret", "client.id": "streamsql-1"}


def test_the_java_clients_forms_are_translated() -> None:
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" '
            'password="wonder land";')
    got = settings.from_sources({"sasl.jaas.config": jaas, "sasl.mechanism": "PLAIN",
                                 "ssl.truststore.location": "/ca.pem", "ssl.truststore.type": "PEM",
                                 "ssl.endpoint.identification.algorithm": ""})
    assert got == {"sasl.username": "alice", "sasl.password": "wonder land", "sasl.mechanism": "PLAIN",
                   "ssl.ca.location": "/ca.pem", "ssl.endpoint.identification.algorithm": "none"}


@pytest.mark.parametrize(("props", "named"), [
    ({"ssl.truststore.location": "/ts.jks", "ssl.truststore.password": "x"}, "property 'ssl.truststore.location'"),
    ({"sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required;"}, "property 'sasl.jaas.config'"),
    ({"ssl.keystore.location": "/k.jks", "ssl.keystore.type": "JKS"}, "property 'ssl.keystore.type'"),
])
def test_a_java_only_form_is_refused_naming_the_setting(props: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        settings.from_sources(props)


def test_an_unknown_setting_is_named_at_start_and_its_secret_is_not() -> None:
    with pytest.raises(ConfigError, match="sasl.pasword") as raised:
        settings.check("127.0.0.1:1", {"sasl.pasword": "hunter2"})
    assert "hunter2" not in str(raised.value)
    with pytest.raises(ConfigError, match="--kafka-property expects KEY=VALUE") as malformed:
        settings.from_sources({}, None, ["sasl.password:hunter2"])
    assert "hunter2" not in str(malformed.value)
    with pytest.raises(ConfigError, match="--bootstrap-servers"):
        settings.from_sources({}, {"STREAMSQL_KAFKA_BOOTSTRAP_SERVERS": "elsewhere:9092"})


def test_every_client_of_a_registered_cluster_gets_the_settings() -> None:
    settings.register("broker-a:9093", {"security.protocol": "SSL"})
    try:
        assert client_config("broker-a:9093")["security.protocol"] == "SSL"
        assert "security.protocol" not in client_config("broker-b:9092")
        assert settings.as_options("broker-a:9093") == {"kafka.security.protocol": "SSL"}
    finally:
        settings.register("broker-a:9093", {})
    assert "security.protocol" not in client_config("broker-a:9093")


def test_secrets_are_hidden_and_kafka_python_gets_the_same_settings() -> None:
    given = {"security.protocol": "sasl_ssl", "sasl.mechanism": "PLAIN", "sasl.username": "u",
             "sasl.password": "p", "ssl.ca.location": "/ca.pem", "ssl.key.password": "k",
             "ssl.endpoint.identification.algorithm": "none"}
    shown = settings.redacted(given)
    assert shown["sasl.password"] == shown["ssl.key.password"] == settings.HIDDEN
    assert shown["sasl.username"] == "u" and shown["ssl.ca.location"] == "/ca.pem"
    assert settings.kafka_python(given) == {
        "security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN", "sasl_plain_username": "u",
        "sasl_plain_password": "p", "ssl_cafile": "/ca.pem", "ssl_password": "k", "ssl_check_hostname": False}


def test_the_properties_file_gives_them_to_the_config_not_to_the_engine_properties(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    file = tmp_path / "streamsql.properties"
    file.write_text("bootstrap.servers=kafka:9093\nsecurity.protocol=SSL\nksql.service.id=x\n")
    monkeypatch.delenv("STREAMSQL_BOOTSTRAP_SERVERS", raising=False)
    config = resolve_config(None, str(tmp_path / "data"), str(file), kafka_properties=["ssl.ca.location=/ca.pem"])
    assert config.kafka == {"security.protocol": "SSL", "ssl.ca.location": "/ca.pem"}
    assert config.properties == {"ksql.service.id": "x"}


def test_show_properties_hides_a_secret_set_in_a_session(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from streamsql.runtime.config import EngineConfig
    from streamsql.runtime.engine import Engine

    engine = Engine(EngineConfig("127.0.0.1:1", tmp_path / "state", kafka={"sasl.username": "u",
                                                                           "sasl.password": "from-the-file"}))
    settings.register("127.0.0.1:1", {})  # the engine registered them for this process
    engine.execute("SET 'ksql.schema.registry.basic.auth.user.info'='user:from-a-session';")
    shown = engine.execute("SHOW PROPERTIES;")[-1]
    text = str(shown.properties) + str(shown.overridden)  # type: ignore[attr-defined]
    assert "from-the-file" not in text and "from-a-session" not in text
    assert shown.properties["sasl.username"] == "u"  # type: ignore[attr-defined]
    assert shown.properties["sasl.password"] == settings.HIDDEN  # type: ignore[attr-defined]


def test_a_command_without_an_engine_gives_its_clients_the_settings(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``streamsql produce`` builds its producer without an engine: the CLI registers the settings
    for the cluster it is given."""
    from streamsql.runtime.config import EngineConfig
    from streamsql.surfaces.command_config import kafka_cluster

    config = EngineConfig("broker-c:9093", tmp_path / "state", kafka={"security.protocol": "SSL"})
    try:
        with kafka_cluster(config):
            assert client_config("broker-c:9093")["security.protocol"] == "SSL"
    finally:
        settings.register("broker-c:9093", {})


def test_a_range_reader_prefetches_one_batch_and_the_querys_settings_win() -> None:
    """A range read unassigns at its end and drops what was fetched past it: librdkafka's default
    prefetch (200,000 records or 64 MB) made the broker serve up to twice the records read."""
    from streamsql.kafka.options import SourceOptions
    from streamsql.kafka.reading import reader_config

    opts = SourceOptions.parse({"kafka.bootstrap.servers": "b:9092", "topic": "t", "arrowBatchRows": "5000"})
    got = reader_config(opts)
    assert (got["queued.min.messages"], got["queued.max.messages.kbytes"]) == (5000, 8192)
    assert got["enable.partition.eof"] is True  # consumer_config's own settings stay
    mine = SourceOptions.parse({"kafka.bootstrap.servers": "b:9092", "topic": "t",
                                "kafka.queued.max.messages.kbytes": "65536"})
    assert reader_config(mine)["queued.max.messages.kbytes"] == "65536"


def test_a_full_prefetch_queue_backs_off_a_millisecond_not_a_second_nor_zero() -> None:
    """librdkafka 2.x postpones the next fetch by ``fetch.queue.backoff.ms`` (1,000 by default)
    whenever its local queue holds ``queued.min.messages``: backlogs read 4× slower. At 0 the
    broker thread re-checks the full queue without pause while the task decodes: in session 38
    that spin was ~1.2 of a Q0 micro-batch task's ~2.9 CPU-s per 500k records."""
    from streamsql.kafka.clients import consumer_config
    from streamsql.kafka.options import SourceOptions
    from streamsql.kafka.reading import reader_config

    opts = SourceOptions.parse({"kafka.bootstrap.servers": "b:9092", "topic": "t"})
    for config in (consumer_config("b:9092"), reader_config(opts)):
        assert 1 <= config["fetch.queue.backoff.ms"] <= 10
