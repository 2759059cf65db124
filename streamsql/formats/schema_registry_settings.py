"""The Schema Registry client's settings (credentials, TLS): the one home for them.

Users give them as they give them to ksqlDB: ``ksql.schema.registry.<setting>`` in the properties
file or a session ``SET`` (``basic.auth.user.info``, ``ssl.truststore.location``, …), or as
``STREAMSQL_SCHEMA_REGISTRY_<SETTING>`` environment variables, which keep a secret out of files
(:func:`streamsql.runtime.config.resolve_config` turns them into properties). :func:`client_config`
translates the Java client's forms ksqlDB users have into the configuration of confluent-kafka's
``SchemaRegistryClient`` and refuses, naming the setting, what cannot be used (a JKS trust store, a
user info without ``:``, a file that does not exist).

On the driver the configuration is registered per registry URL (:func:`configure`) when a
statement meets the registry. Spark's Python workers are other processes: the Kafka source and
sink take the configuration of the registries their formats use as one data source option
(:data:`OPTION`), whose name Spark's option redaction (``spark.sql.redaction.options.regex``,
``(?i)url``) hides from plans and the UI, and register it there before building their serdes.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from streamsql.errors import ConfigError

#: ksqlDB's prefix of the registry client's settings
PREFIX = "ksql.schema.registry."
URL_PROPERTY = PREFIX + "url"
ENV_PREFIX = "STREAMSQL_SCHEMA_REGISTRY_"
#: the data source option carrying the client configurations (registry URL → configuration)
OPTION = "schemaRegistryUrlClients"

#: the settings read after :data:`PREFIX`: the Java client's names ksqlDB documents, and the names
#: of confluent-kafka's Python client (``ssl.ca.location``…) for those who use it elsewhere
SETTINGS = (
    "basic.auth.credentials.source", "basic.auth.user.info",
    "bearer.auth.credentials.source", "bearer.auth.token", "bearer.auth.logical.cluster",
    "bearer.auth.identity.pool.id", "bearer.auth.issuer.endpoint.url", "bearer.auth.client.id",
    "bearer.auth.client.secret", "bearer.auth.scope",
    "ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.password",
    "ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.password", "ssl.key.password",
    "ssl.ca.location", "ssl.certificate.location", "ssl.key.location",
)
_OAUTH = ("bearer.auth.issuer.endpoint.url", "bearer.auth.client.id", "bearer.auth.client.secret",
          "bearer.auth.scope")

_lock = threading.Lock()
_by_url: dict[str, dict[str, Any]] = {}


def from_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """``STREAMSQL_SCHEMA_REGISTRY_BASIC_AUTH_USER_INFO`` → ``ksql.schema.registry.basic.auth.user.info``
    (and ``…_URL`` → the URL property)."""
    out = {}
    for name, value in environ.items():
        if name.startswith(ENV_PREFIX) and len(name) > len(ENV_PREFIX):
            out[PREFIX + name[len(ENV_PREFIX):].lower().replace("_", ".")] = value
    return out


def client_config(url: str, prop: Callable[[str], str | None]) -> dict[str, Any]:
    """The ``SchemaRegistryClient`` configuration (minus the URL) of the settings ``prop`` gives;
    ``ConfigError`` naming the setting when one cannot be used. Values are never echoed."""
    given = {name: str(value) for name in SETTINGS if (value := prop(PREFIX + name)) not in (None, "")}
    conf: dict[str, Any] = {}
    _basic_auth(url, given, conf)
    _bearer_auth(given, conf)
    _tls(given, conf)
    return conf


def _basic_auth(url: str, given: dict[str, str], conf: dict[str, Any]) -> None:
    source = given.get("basic.auth.credentials.source", "").upper()
    info = given.get("basic.auth.user.info")
    if source not in ("", "USER_INFO", "URL"):
        raise ConfigError(f"'{PREFIX}basic.auth.credentials.source' must be USER_INFO or URL, not '{source}' "
                          f"(SASL_INHERIT is not supported: give the user and password in "
                          f"'{PREFIX}basic.auth.user.info')")
    if source == "USER_INFO" and not info:
        raise ConfigError(f"'{PREFIX}basic.auth.credentials.source' is USER_INFO but "
                          f"'{PREFIX}basic.auth.user.info' is not set (expected <user>:<password>)")
    if info and source != "URL":
        if ":" not in info:
            raise ConfigError(f"'{PREFIX}basic.auth.user.info' must be <user>:<password> (the value has no ':')")
        if "@" in url.split("//", 1)[-1].split("/", 1)[0]:
            raise ConfigError(f"'{URL_PROPERTY}' carries a user and password and '{PREFIX}basic.auth.user.info' "
                              f"is set too: give the credentials once")
        conf["basic.auth.user.info"] = info


def _bearer_auth(given: dict[str, str], conf: dict[str, Any]) -> None:
    source = given.get("bearer.auth.credentials.source", "").upper()
    if not source:
        return
    if "basic.auth.user.info" in conf:
        raise ConfigError(f"'{PREFIX}bearer.auth.credentials.source' and '{PREFIX}basic.auth.user.info' are both "
                          f"set: a registry takes one kind of credentials")
    if source == "STATIC_TOKEN":
        if "bearer.auth.token" not in given:
            raise ConfigError(f"'{PREFIX}bearer.auth.credentials.source' is STATIC_TOKEN but "
                              f"'{PREFIX}bearer.auth.token' is not set")
        conf["bearer.auth.token"] = given["bearer.auth.token"]
    elif source == "OAUTHBEARER":
        missing = [name for name in _OAUTH if name not in given]
        if missing:
            raise ConfigError(f"'{PREFIX}bearer.auth.credentials.source' is OAUTHBEARER but "
                              f"{', '.join(repr(PREFIX + m) for m in missing)} not set")
        conf.update({name: given[name] for name in _OAUTH})
    else:
        raise ConfigError(f"'{PREFIX}bearer.auth.credentials.source' must be STATIC_TOKEN or OAUTHBEARER, "
                          f"not '{source}'")
    conf["bearer.auth.credentials.source"] = source
    # confluent's client asks for Confluent Cloud's logical cluster; other registries ignore it
    conf["bearer.auth.logical.cluster"] = given.get("bearer.auth.logical.cluster", "")
    if "bearer.auth.identity.pool.id" in given:
        conf["bearer.auth.identity.pool.id"] = given["bearer.auth.identity.pool.id"]


def _tls(given: dict[str, str], conf: dict[str, Any]) -> None:
    """Trust (a CA) and a client certificate, as PEM files: the Java client's PEM trust and key
    stores are such files; JKS and PKCS#12 stores are refused with the conversion to run."""
    ca = _pem_store(given, "truststore", "trust store", "the CA certificate as a PEM file",
                    "keytool -exportcert -rfc converts a JKS entry")
    if ca:
        conf["ssl.ca.location"] = ca
    certificate = _pem_store(given, "keystore", "key store", "the client certificate and its key as one PEM file",
                             "openssl pkcs12 -nodes converts a PKCS#12 store")
    if certificate:
        conf["ssl.certificate.location"] = certificate
    for name in ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location"):
        if name in given:
            conf[name] = given[name]
    password = given.get("ssl.key.password") or given.get("ssl.keystore.password")
    if password and "ssl.certificate.location" in conf:
        conf["ssl.key.password"] = password
    for name in ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location"):
        if name in conf and not Path(conf[name]).exists():
            setting = {"ssl.ca.location": "ssl.truststore.location",
                       "ssl.certificate.location": "ssl.keystore.location"}.get(name, name)
            shown = setting if setting in given else name
            raise ConfigError(f"'{PREFIX}{shown}': no file '{conf[name]}'")


def _pem_store(given: dict[str, str], store: str, what: str, give: str, conversion: str) -> str | None:
    """The file of the Java client's ``ssl.<store>.location``: a PEM file (by its type, or by
    its content when no type is set), else refused naming the setting and the conversion."""
    location = given.get(f"ssl.{store}.location")
    if location is None:
        return None
    kind = given.get(f"ssl.{store}.type", "JKS")
    if kind.upper() != "PEM" and not _is_pem(location):
        raise ConfigError(f"'{PREFIX}ssl.{store}.location': a {kind} {what} cannot be read here; give {give} "
                          f"(set '{PREFIX}ssl.{store}.type'='PEM'; {conversion})")
    return location


def _is_pem(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return b"-----BEGIN " in f.read(4096)
    except OSError:
        return False


def configure(url: str, conf: Mapping[str, Any]) -> None:
    """Clients this process makes for ``url`` use ``conf`` (the registry's clients are kept per
    URL and settings, so a change takes effect at the next call)."""
    with _lock:
        if conf:
            _by_url[url] = dict(conf)
        else:
            _by_url.pop(url, None)


def of(url: str) -> dict[str, Any]:
    with _lock:
        return dict(_by_url.get(url, {}))


def as_option(urls: list[str]) -> dict[str, str]:
    """The data source option carrying the configurations of ``urls`` (none when no URL has one)."""
    confs = {u: c for u in sorted(set(urls)) if (c := of(u))}
    return {OPTION: json.dumps(confs, sort_keys=True)} if confs else {}


def configure_from_option(text: str | None) -> None:
    """On a worker: register the configurations :func:`as_option` carried (the option's value)."""
    for url, conf in (json.loads(text) if text else {}).items():
        configure(url, conf)
