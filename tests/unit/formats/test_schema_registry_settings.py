"""The Schema Registry client's settings: ksqlDB's property names in, confluent-kafka's
``SchemaRegistryClient`` configuration out, and a clear refusal naming the setting (never its value)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamsql.errors import ConfigError
from streamsql.formats import schema_registry_settings as rs
from streamsql.kafka.settings import redacted

URL = "https://registry.example:8081"
P = "ksql.schema.registry."


def _conf(props: dict[str, str], url: str = URL) -> dict[str, object]:
    return rs.client_config(url, props.get)


def test_environment_variables_become_ksqldb_properties() -> None:
    env = {"STREAMSQL_SCHEMA_REGISTRY_BASIC_AUTH_USER_INFO": "alice:pw", "STREAMSQL_SCHEMA_REGISTRY_URL": URL,
           "STREAMSQL_KAFKA_SASL_PASSWORD": "other", "HOME": "/root"}
    assert rs.from_environment(env) == {P + "basic.auth.user.info": "alice:pw", P + "url": URL}


def test_no_settings_no_configuration() -> None:
    assert _conf({}) == {}


def test_user_info_is_basic_auth() -> None:
    props = {P + "basic.auth.credentials.source": "USER_INFO", P + "basic.auth.user.info": "alice:s3:cret"}
    assert _conf(props) == {"basic.auth.user.info": "alice:s3:cret"}


def test_user_info_without_a_colon_is_refused_without_echoing_it() -> None:
    with pytest.raises(ConfigError, match="basic.auth.user.info' must be <user>:<password>") as e:
        _conf({P + "basic.auth.user.info": "alicepw"})
    assert "alicepw" not in str(e.value)


def test_user_info_source_without_user_info() -> None:
    with pytest.raises(ConfigError, match="USER_INFO but 'ksql.schema.registry.basic.auth.user.info' is not set"):
        _conf({P + "basic.auth.credentials.source": "USER_INFO"})


def test_sasl_inherit_is_refused_with_the_alternative() -> None:
    with pytest.raises(ConfigError, match="SASL_INHERIT is not supported"):
        _conf({P + "basic.auth.credentials.source": "SASL_INHERIT"})


def test_url_credentials_source_leaves_the_user_info_aside() -> None:
    props = {P + "basic.auth.credentials.source": "URL", P + "basic.auth.user.info": "alice:pw"}
    assert _conf(props, "https://bob:pw@registry:8081") == {}


def test_credentials_twice_are_refused() -> None:
    with pytest.raises(ConfigError, match="carries a user and password and"):
        _conf({P + "basic.auth.user.info": "alice:pw"}, "https://bob:pw@registry:8081")


def test_static_bearer_token() -> None:
    props = {P + "bearer.auth.credentials.source": "STATIC_TOKEN", P + "bearer.auth.token": "tok"}
    assert _conf(props) == {"bearer.auth.credentials.source": "STATIC_TOKEN", "bearer.auth.token": "tok",
                            "bearer.auth.logical.cluster": ""}


def test_bearer_without_its_token() -> None:
    with pytest.raises(ConfigError, match="STATIC_TOKEN but 'ksql.schema.registry.bearer.auth.token' is not set"):
        _conf({P + "bearer.auth.credentials.source": "STATIC_TOKEN"})


def test_oauth_bearer_names_what_is_missing() -> None:
    with pytest.raises(ConfigError, match="bearer.auth.client.secret"):
        _conf({P + "bearer.auth.credentials.source": "OAUTHBEARER", P + "bearer.auth.issuer.endpoint.url": "x",
               P + "bearer.auth.client.id": "c", P + "bearer.auth.scope": "s"})


def test_basic_and_bearer_together_are_refused() -> None:
    with pytest.raises(ConfigError, match="a registry takes one kind of credentials"):
        _conf({P + "basic.auth.user.info": "a:b", P + "bearer.auth.credentials.source": "STATIC_TOKEN",
               P + "bearer.auth.token": "t"})


def test_pem_trust_store_is_the_ca(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    assert _conf({P + "ssl.truststore.location": str(ca)}) == {"ssl.ca.location": str(ca)}
    assert _conf({P + "ssl.truststore.location": str(ca), P + "ssl.truststore.type": "PEM"}) == {
        "ssl.ca.location": str(ca)}


def test_jks_trust_store_is_refused_with_the_conversion(tmp_path: Path) -> None:
    jks = tmp_path / "truststore.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed binary")
    with pytest.raises(ConfigError, match=r"ssl.truststore.location': a JKS trust store cannot be read here.*keytool"):
        _conf({P + "ssl.truststore.location": str(jks), P + "ssl.truststore.password": "changeit"})


def test_missing_files_are_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope.pem"
    with pytest.raises(ConfigError, match=f"'ksql.schema.registry.ssl.truststore.location': no file '{missing}'"):
        _conf({P + "ssl.truststore.location": str(missing), P + "ssl.truststore.type": "PEM"})
    with pytest.raises(ConfigError, match="'ksql.schema.registry.ssl.key.location': no file"):
        _conf({P + "ssl.key.location": str(missing)})


def test_pem_key_store_is_the_client_certificate(tmp_path: Path) -> None:
    both = tmp_path / "client.pem"
    both.write_text("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n-----BEGIN PRIVATE KEY-----\n")
    props = {P + "ssl.keystore.location": str(both), P + "ssl.keystore.type": "PEM", P + "ssl.key.password": "kp"}
    assert _conf(props) == {"ssl.certificate.location": str(both), "ssl.key.password": "kp"}


def test_configurations_travel_to_workers_in_one_option() -> None:
    url = "https://travel.example:8081"
    rs.configure(url, {"basic.auth.user.info": "a:b"})
    try:
        option = rs.as_option([url, "mock://x", url])
        assert list(option) == [rs.OPTION] and "url" in rs.OPTION.lower()  # Spark redacts such options
        rs.configure(url, {})
        assert rs.of(url) == {}
        rs.configure_from_option(option[rs.OPTION])
        assert rs.of(url) == {"basic.auth.user.info": "a:b"}
        assert rs.as_option(["mock://x"]) == {}
    finally:
        rs.configure(url, {})


def test_shown_properties_hide_credentials_in_urls_and_settings() -> None:
    shown = redacted({P + "url": "https://bob:pw@registry:8081,https://other:8081",
                      P + "basic.auth.user.info": "alice:pw", P + "bearer.auth.token": "tok",
                      P + "ssl.truststore.location": "/etc/ca.pem"})
    assert shown == {P + "url": "https://bob:[hidden]@registry:8081,https://other:8081",
                     P + "basic.auth.user.info": "[hidden]", P + "bearer.auth.token": "[hidden]",
                     P + "ssl.truststore.location": "/etc/ca.pem"}
