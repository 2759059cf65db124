"""The Kafka client settings of a cluster (security, client identity): the one home for them.

A company's Kafka asks every client for the same settings: ``security.protocol``, ``sasl.*``,
``ssl.*``. Users give them as they give them to their other Kafka clients and to ksqlDB: in the
properties file (plain, or with ksqlDB's ``ksql.streams.`` prefix), as ``--kafka-property
KEY=VALUE``, or as ``STREAMSQL_KAFKA_<KEY>`` environment variables (``SASL_PASSWORD`` for
``sasl.password``, which keeps a secret out of files). :func:`from_sources` gathers them into
librdkafka's names, translating the Java client's forms ksqlDB users have
(``sasl.jaas.config``, a PEM trust store, an empty endpoint-identification algorithm).

In this process the settings are registered per bootstrap address (:func:`register`) and every
client config built by :func:`streamsql.kafka.clients.client_config` carries them, so no driver
side client can miss them. Executors are other processes: what runs there gets the settings
explicitly — the Kafka source's and sink's ``kafka.*`` options (:func:`as_options`) and the
processing log's target.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from typing import Any

from streamsql.errors import ConfigError
from streamsql.redaction import HIDDEN, hide_url_password

#: the settings of a cluster (librdkafka names) that every client of it takes
_CLIENT_PREFIXES = ("security.protocol", "sasl.", "ssl.", "client.id", "client.rack", "socket.",
                    "broker.address.family", "enable.ssl.certificate.verification")
#: ksqlDB passes Kafka client settings through with this prefix too
_KSQL_PREFIX = "ksql.streams."
ENV_PREFIX = "STREAMSQL_KAFKA_"
#: a value that must never be printed (SHOW PROPERTIES, logs, error messages)
_SECRET = re.compile(r"password|secret|jaas|token|user\.info|credentials|key\.pem|\.key$|private",
                     re.IGNORECASE)

_lock = threading.Lock()
_by_bootstrap: dict[str, dict[str, str]] = {}


def is_client_setting(name: str) -> bool:
    """Whether a property names a Kafka client setting (plain or with ``ksql.streams.``)."""
    plain = name[len(_KSQL_PREFIX):] if name.startswith(_KSQL_PREFIX) else name
    return plain.startswith(_CLIENT_PREFIXES)


def from_sources(properties: Mapping[str, str], environ: Mapping[str, str] | None = None,
                 flags: list[str] | None = None) -> dict[str, str]:
    """The cluster's client settings, in librdkafka's names: the properties file's, then the
    environment's ``STREAMSQL_KAFKA_*``, then ``--kafka-property`` flags (later ones win)."""
    gathered: dict[str, tuple[str, str]] = {}  # librdkafka-or-Java name -> (value, where it came from)
    for name, value in properties.items():
        if is_client_setting(name):
            plain = name[len(_KSQL_PREFIX):] if name.startswith(_KSQL_PREFIX) else name
            gathered[plain] = (value, f"property '{name}'")
    for name, value in (environ or {}).items():
        if name.startswith(ENV_PREFIX) and len(name) > len(ENV_PREFIX):
            key = name[len(ENV_PREFIX):].lower().replace("_", ".")
            gathered[key] = (value, f"environment variable {name}")
    for pair in flags or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():  # the argument is not echoed: it may be a secret
            raise ConfigError("--kafka-property expects KEY=VALUE (an argument without '=' was given)")
        gathered[key.strip()] = (value.strip(), f"--kafka-property {key.strip()}")
    if "bootstrap.servers" in gathered:
        raise ConfigError(f"{gathered['bootstrap.servers'][1]}: the cluster is given with --bootstrap-servers, "
                          f"STREAMSQL_BOOTSTRAP_SERVERS or bootstrap.servers in the config file")
    return translate(gathered)


def translate(gathered: Mapping[str, tuple[str, str]]) -> dict[str, str]:
    """The Java client's forms in librdkafka's names; a Java-only form librdkafka has no
    equivalent for is refused, naming the setting."""
    out: dict[str, str] = {}
    java = {k: v for k, v in gathered.items() if k.startswith(("sasl.jaas.", "ssl.truststore.", "ssl.keystore.type"))
            or k == "ssl.endpoint.identification.algorithm"}
    for key, (value, _where) in gathered.items():
        if key not in java:
            out[key] = value
    if "sasl.jaas.config" in java:
        value, where = java["sasl.jaas.config"]
        found = dict(re.findall(r'(username|password)\s*=\s*"([^"]*)"', value))
        if "username" not in found or "password" not in found:
            raise ConfigError(f"{where}: only a JAAS config with username=\"…\" and password=\"…\" (PLAIN or "
                              f"SCRAM) can be used; give sasl.username and sasl.password instead")
        out.setdefault("sasl.username", found["username"])
        out.setdefault("sasl.password", found["password"])
    if "ssl.truststore.location" in java:
        value, where = java["ssl.truststore.location"]
        kind = java.get("ssl.truststore.type", ("JKS", ""))[0].upper()
        if kind != "PEM":
            raise ConfigError(f"{where}: a {kind} trust store cannot be read here (librdkafka reads PEM files); "
                              f"give the CA certificate as a PEM file in ssl.ca.location (keytool -exportcert -rfc "
                              f"converts a JKS entry)")
        out.setdefault("ssl.ca.location", value)
    if java.get("ssl.keystore.type", ("PKCS12", ""))[0].upper() != "PKCS12":
        value, where = java["ssl.keystore.type"]
        raise ConfigError(f"{where}: a {value} key store cannot be read here (librdkafka's ssl.keystore.location "
                          f"reads PKCS#12); convert it with keytool -importkeystore -deststoretype PKCS12")
    if "ssl.endpoint.identification.algorithm" in java:
        value, _where = java["ssl.endpoint.identification.algorithm"]
        out["ssl.endpoint.identification.algorithm"] = value.strip().lower() or "none"
    return out


def check(bootstrap: str, settings: Mapping[str, str]) -> None:
    """Let librdkafka validate the settings now, so a misspelt or unknown one is named at start
    rather than failing the first query."""
    if not settings:
        return
    from confluent_kafka import KafkaException, Producer

    try:
        Producer({"bootstrap.servers": bootstrap, **settings, "log_level": 0})
    except KafkaException as e:
        raise ConfigError(f"Kafka client settings: {redact_text(str(e.args[0]) if e.args else str(e), settings)}"
                          ) from None


def register(bootstrap: str, settings: Mapping[str, str]) -> None:
    """Every client this process builds for ``bootstrap`` gets ``settings``."""
    with _lock:
        if settings:
            _by_bootstrap[bootstrap] = dict(settings)
        else:
            _by_bootstrap.pop(bootstrap, None)


def of(bootstrap: str | None) -> dict[str, str]:
    """The registered settings of the cluster at ``bootstrap`` (none in an executor)."""
    if not bootstrap:
        return {}
    with _lock:
        return dict(_by_bootstrap.get(bootstrap, {}))


def as_options(bootstrap: str) -> dict[str, str]:
    """The settings as Kafka data source options (``kafka.<setting>``), for executors."""
    return {f"kafka.{k}": v for k, v in of(bootstrap).items()}


def is_secret(name: str) -> bool:
    return _SECRET.search(name) is not None


def redacted(settings: Mapping[str, str]) -> dict[str, str]:
    """The settings to show: every secret's value hidden, and any password in a URL."""
    return {k: HIDDEN if is_secret(k) else hide_url_password(v) for k, v in settings.items()}


def redact_text(text: str, settings: Mapping[str, str]) -> str:
    """``text`` with every secret value of ``settings`` hidden."""
    for k, v in settings.items():
        if v and is_secret(k):
            text = text.replace(v, HIDDEN)
    return text


def kafka_python(settings: Mapping[str, str]) -> dict[str, Any]:
    """The same settings as kafka-python's keyword arguments (its producer writes the records
    at timestamp 0 that librdkafka would stamp with the current time)."""
    names = {"security.protocol": "security_protocol", "ssl.ca.location": "ssl_cafile",
             "ssl.certificate.location": "ssl_certfile", "ssl.key.location": "ssl_keyfile",
             "ssl.key.password": "ssl_password", "sasl.mechanism": "sasl_mechanism",
             "sasl.mechanisms": "sasl_mechanism", "sasl.username": "sasl_plain_username",
             "sasl.password": "sasl_plain_password", "client.id": "client_id"}
    out: dict[str, Any] = {names[k]: v for k, v in settings.items() if k in names}
    if "security_protocol" in out:
        out["security_protocol"] = str(out["security_protocol"]).upper()
    if settings.get("ssl.endpoint.identification.algorithm", "").lower() == "none":
        out["ssl_check_hostname"] = False
    return out
