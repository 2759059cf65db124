"""A connector statement's configuration, checked the way Kafka Connect checks it.

``CREATE SINK CONNECTOR`` carries Connect's keys. ``connectors/classes.py`` finds the class (full
name or Connect's short aliases); :func:`check_sink` checks the keys every sink takes and hands
the rest to the class's own parser. Every error names the key and the value; an unknown
key is an error (Connect would ignore a misspelt ``behaviour.on.null.values`` silently — the
docs/differences.md entry says why streamsql does not).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from streamsql.connectors.converters import CONVERTER_KINDS, CONVERTER_SETTINGS, Converter
from streamsql.errors import StreamsqlError
from streamsql.redaction import HIDDEN, looks_secret


class ConnectorError(StreamsqlError):
    """A connector statement that cannot run: an unknown class, a bad or unknown key."""


#: keys of Connect's own (the worker's) that every sink takes
COMMON_SINK_KEYS = frozenset({
    "name", "connector.class", "tasks.max", "topics", "key.converter", "value.converter", "header.converter",
    "errors.tolerance", "errors.log.enable", "errors.log.include.messages", "errors.retry.timeout",
    "errors.retry.delay.max.ms", "config.action.reload",
})
#: key prefixes of converter settings and of the sink's consumer settings
_PREFIXES = ("key.converter.", "value.converter.", "consumer.override.")
#: Connect features streamsql does not run, with what to do instead
UNSUPPORTED_KEYS = {
    "topics.regex": "name the topics in 'topics'",
    "transforms": "single message transforms are not run by streamsql: transform the records with a "
                  "CREATE STREAM … AS SELECT and sink that stream's topic",
    "errors.deadletterqueue.topic.name": "records a sink cannot write go to the processing log",
}


@dataclass(frozen=True)
class SinkSettings:
    """What every sink connector has: its topics and how to read their keys and values."""

    name: str
    topics: tuple[str, ...]
    key_converter: Converter
    value_converter: Converter


@dataclass(frozen=True)
class ConnectorClass:
    """A connector class streamsql runs: ``parse`` checks the class's own keys (the common ones
    removed) and returns its typed configuration."""

    name: str
    aliases: tuple[str, ...]
    kind: str  # SINK | SOURCE
    keys: frozenset[str]
    parse: Callable[[SinkSettings, Mapping[str, str]], Any]


def check_sink(cls: ConnectorClass, name: str, kind: str, config: Mapping[str, str]) -> tuple[ConnectorClass, Any]:
    """``cls`` and its typed configuration, or a ConnectorError naming the key."""
    if kind != cls.kind:
        raise ConnectorError(f"{cls.name} is a {cls.kind.lower()} connector: use CREATE {cls.kind} CONNECTOR")
    for key, advice in UNSUPPORTED_KEYS.items():
        if any(k == key or k.startswith(key + ".") for k in config):
            raise ConnectorError(f"Connector config key '{key}' is not supported: {advice}")
    allowed = COMMON_SINK_KEYS | cls.keys
    for key in config:
        prefix = next((p for p in _PREFIXES if key.startswith(p)), None)
        if prefix == "consumer.override.":
            continue  # consumer settings: Spark's source reads the topics
        if prefix is not None:
            if key[len(prefix):] not in CONVERTER_SETTINGS:
                raise ConnectorError(f"Unknown converter setting '{key}' (known: "
                                     f"{', '.join(prefix + s for s in sorted(CONVERTER_SETTINGS))})")
            continue
        if key not in allowed:
            near = difflib.get_close_matches(key, sorted(allowed), n=1)
            hint = f" Did you mean '{near[0]}'?" if near else ""
            raise ConnectorError(f"Unknown configuration '{key}' for connector {cls.name}.{hint}")
    topics = tuple(t.strip() for t in (config.get("topics") or "").split(",") if t.strip())
    if not topics:
        raise ConnectorError("Connector config 'topics' is missing or empty: name the topics to sink, comma-separated")
    settings = SinkSettings(name, topics, _converter(config, "key", "org.apache.kafka.connect.storage.StringConverter"),
                            _converter(config, "value", "org.apache.kafka.connect.json.JsonConverter"))
    return cls, cls.parse(settings, config)


def _converter(config: Mapping[str, str], side: str, default: str) -> Converter:
    """``key.converter`` / ``value.converter`` (defaults: a String key, a JSON value — what the
    Connect worker of ksqlDB's quick starts sets)."""
    class_name = config.get(f"{side}.converter") or default
    kind = CONVERTER_KINDS.get(class_name)
    if kind is None:
        raise ConnectorError(f"Invalid value {class_name} for configuration {side}.converter: streamsql reads "
                             f"{', '.join(sorted(CONVERTER_KINDS))}")
    url = config.get(f"{side}.converter.schema.registry.url")
    if kind in ("avro",) and not url:
        raise ConnectorError(f"{class_name} needs '{side}.converter.schema.registry.url'")
    return Converter(class_name, kind, url)


# --- typed values ---------------------------------------------------------------------------------


def boolean(config: Mapping[str, str], key: str, default: bool) -> bool:
    value = config.get(key)
    if value is None:
        return default
    if value.strip().lower() not in ("true", "false"):
        raise ConnectorError(f"Invalid value {value} for configuration {key}: "
                             f"Expected value to be either true or false")
    return value.strip().lower() == "true"


def integer(config: Mapping[str, str], key: str, default: int, minimum: int = 0) -> int:
    value = config.get(key)
    if value is None:
        return default
    try:
        number = int(value.strip())
    except ValueError:
        raise ConnectorError(f"Invalid value {value} for configuration {key}: Not a number of type INT") from None
    if number < minimum:
        raise ConnectorError(f"Invalid value {value} for configuration {key}: Value must be at least {minimum}")
    return number


def choice(config: Mapping[str, str], key: str, default: str, choices: tuple[str, ...]) -> str:
    """Connect's case-insensitive enum settings, upper-cased."""
    value = (config.get(key) or default).strip().upper()
    if value not in choices:
        raise ConnectorError(f"Invalid value {config.get(key)} for configuration {key}: "
                             f"String must be one of: {', '.join(c.lower() for c in choices)}")
    return value


def string_list(config: Mapping[str, str], key: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in (config.get(key) or "").split(",") if v.strip())


# --- secrets, as Kafka Connect shows them -----------------------------------------------------------

#: what Connect prints for a PASSWORD-type setting
#: a ``key = 'value'`` pair of a WITH clause (the key quoted or not; '' escapes a quote)
_PAIR = re.compile(r"""(?P<key>'(?:[^']|'')*'|"(?:[^"]|"")*"|`[^`]*`|[A-Za-z_][\w.]*)(?P<eq>\s*=\s*)"""
                   r"""(?P<value>'(?:[^']|'')*')""")


def url_without_password(url: str) -> str:
    """A URL with the password of its user part hidden (``http://user:[hidden]@host``)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=f"{parts.username}:{HIDDEN}@{host}").geturl()


def shown_value(key: str, value: str) -> str:
    """A connector setting's value as it may be shown: a secret's as ``[hidden]``, a URL's
    password hidden, anything else as it is."""
    if looks_secret(key):
        return HIDDEN
    if "@" in value and "://" in value:
        return ",".join(url_without_password(v) for v in value.split(","))
    return value


def shown_config(config: Mapping[str, str]) -> dict[str, str]:
    """A connector configuration as DESCRIBE, SHOW and CREATE's answer show it."""
    return {k: shown_value(k, v) for k, v in config.items()}


def shown_statement(text: str) -> str:
    """A CREATE CONNECTOR statement with its secret values hidden (SHOW QUERIES, EXPLAIN)."""

    def hide(m: re.Match[str]) -> str:
        key = m.group("key").strip("'\"`")
        value = m.group("value")[1:-1].replace("''", "'")
        shown = shown_value(key, value)
        if shown == value:
            return m.group(0)
        return m.group("key") + m.group("eq") + "'" + shown.replace("'", "''") + "'"

    return _PAIR.sub(hide, text)
