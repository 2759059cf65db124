"""Which properties a server's clients may set: the one home of that policy.

A server's clients are untrusted (docs/security.md). What they may change per request — with a
``SET`` statement or a request's ``streamsProperties`` — is how *their* queries run: where a new
query starts reading, the record cache, formats, limits. What stays the operator's is everything
that reaches past the client's own queries: which Kafka and which Schema Registry the server talks
to and with which credentials, where it keeps state, which code it loads, which directories and
URLs connectors may write to, its service id. A client that set the registry URL would make the
server call any address (server-side request forgery); one that set a SASL password would have it
written into the command topic in clear.

The policy is an allow-list for what streamsql reads: every property of
:data:`~streamsql.runtime.config.PROPERTY_DOCS` (the list of every property the code reads; a
test fails when the code reads one it does not list) is in :data:`CLIENT_SETTABLE` or refused
(:data:`SERVER_ONLY`, or a family of :func:`server_scoped`). A name streamsql does not read —
ksqlDB's many query settings that change nothing here, such as
``ksql.new.query.planner.enabled`` — is inert and accepted as ksqlDB accepts it, unless it
belongs to a server-scoped family (Kafka client security, the registry, credentials, anything
that looks like a secret): those are refused whatever their exact name, so a secret never
reaches the command log through a client. The operator extends the refusals with ksqlDB's
``ksql.properties.overrides.denylist`` (comma-separated names, server configuration only).

Embedded use (the shell without a URL, ``streamsql run``/``test``, the Python API) runs as the
operator: its SET is not checked here (it already owns the configuration and the files).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from streamsql.connectors.policy import CONNECT_FILE_DIR_PROPERTY, CONNECT_URL_ALLOWLIST_PROPERTY
from streamsql.errors import ConfigError
from streamsql.redaction import looks_secret

#: ksqlDB's operator setting: more properties clients may not override (server config only)
DENYLIST_PROPERTY = "ksql.properties.overrides.denylist"
_STREAMS_PREFIX = "ksql.streams."

#: properties streamsql reads that change only the requesting client's own statements and queries
CLIENT_SETTABLE: frozenset[str] = frozenset({
    "auto.offset.reset",
    "ksql.output.topic.name.prefix",
    "ksql.persistence.wrap.single.values",
    "ksql.persistence.default.format.key",
    "ksql.persistence.default.format.value",
    "ksql.streams.cache.max.bytes.buffering",
    "ksql.streams.max.records.per.batch",
    "ksql.streams.commit.interval.ms",
    "processing.guarantee",
    "ksql.query.pull.table.scan.enabled",
    "ksql.query.pull.range.scan.enabled",
    "ksql.sink.partitions",
    "ksql.sink.replicas",
    "ksql.assert.topic.default.timeout.ms",
    "ksql.assert.schema.default.timeout.ms",
    "ksql.timestamp.throw.on.invalid",
    "ksql.logging.processing.rows.include",
    "ksql.functions.collect_list.limit",
    "ksql.functions.collect_set.limit",
    "streamsql.aggregation.buckets",
    "streamsql.aggregation.operator",
})

#: properties streamsql reads that are the operator's, with why (the refusal names it)
SERVER_ONLY: dict[str, str] = {
    "bootstrap.servers": "the Kafka cluster the server uses",
    "streamsql.data.dir": "where the server keeps its state",
    "spark.*": "the server's Spark settings",
    "ksql.service.id": "the server's identity (its command topic, processing log, consumer groups)",
    "ksql.extension.dir": "the directory the server loads function code from",
    "ksql.schema.registry.url": "the Schema Registry the server calls",
    "ksql.schema.registry.basic.auth.credentials.source": "the server's registry credentials",
    "ksql.schema.registry.basic.auth.user.info": "the server's registry credentials",
    "ksql.schema.registry.bearer.auth.credentials.source": "the server's registry credentials",
    "ksql.schema.registry.ssl.truststore.location": "a file the server reads",
    "ksql.schema.registry.ssl.keystore.location": "a file the server reads",
    "ksql.internal.topic.replicas": "the server's own topics",
    "ksql.internal.topic.min.insync.replicas": "the server's own topics",
    DENYLIST_PROPERTY: "the server's override policy",
    CONNECT_FILE_DIR_PROPERTY: "where connectors may write files",
    CONNECT_URL_ALLOWLIST_PROPERTY: "where connectors may send data",
    "ksql.max.push.queries": "the server's limit on push queries",
    "ksql.query.persistent.active.limit": "the server's limit on persistent queries",
    "ksql.query.pull.max.qps": "the server's limit on pull queries",
    "streamsql.statement.max.bytes": "the server's limit on a statement's size",
}

#: families of names that are the operator's whatever the rest of the name (prefixes)
_SERVER_PREFIXES: tuple[tuple[str, str], ...] = (
    ("bootstrap.", "the Kafka cluster the server uses"),
    ("security.", "the server's Kafka security settings"),
    ("sasl.", "the server's Kafka credentials"),
    ("ssl.", "the server's Kafka TLS settings"),
    ("client.", "the server's Kafka client identity"),
    ("socket.", "the server's Kafka connections"),
    ("broker.", "the server's Kafka connections"),
    ("enable.ssl.", "the server's Kafka TLS settings"),
    ("schema.registry.", "the Schema Registry the server calls"),
    ("ksql.schema.registry.", "the Schema Registry the server calls"),
    ("basic.auth.", "credentials of the server"),
    ("bearer.auth.", "credentials of the server"),
    ("spark.", "the server's Spark settings"),
    ("streamsql.connect.", "what connectors may reach"),
    ("streamsql.data.", "where the server keeps its state"),
    ("ksql.internal.", "the server's own topics"),
    ("ksql.extension.", "the code the server loads"),
    ("ksql.connect.", "the Connect settings of the server"),
    ("ksql.security.", "the server's security settings"),
    ("ksql.authentication.", "the server's security settings"),
    ("ksql.logging.processing.topic.", "the server's processing log"),
    ("ksql.udf.", "the code the server loads"),
    ("ksql.udfs.", "the code the server loads"),
    ("listeners", "the server's listeners"),
    ("ksql.service.", "the server's identity"),
    ("ksql.properties.", "the server's override policy"),
    ("metadata.", "the server's Kafka connections"),
    ("sasl", "the server's Kafka credentials"),
    ("ssl", "the server's Kafka TLS settings"),
)


def canonical(name: str) -> str:
    """The name the policy judges: trimmed, lower case, without any ``ksql.streams.`` prefixes
    (``ksql.streams.sasl.password`` is ``sasl.password`` to the Kafka clients)."""
    plain = name.strip().lower()
    while plain.startswith(_STREAMS_PREFIX):
        plain = plain[len(_STREAMS_PREFIX):]
    return plain


def server_scoped(name: str) -> str | None:
    """Why ``name`` is the operator's, or None when a client may set it (the built-in policy,
    without an operator's denylist)."""
    plain = canonical(name)
    for candidate in (plain, _STREAMS_PREFIX + plain):
        if candidate in SERVER_ONLY:
            return SERVER_ONLY[candidate]
        if candidate in CLIENT_SETTABLE:
            return None
    for prefix, why in _SERVER_PREFIXES:
        if plain.startswith(prefix):
            return why
    if looks_secret(plain):
        return "it looks like a secret, and secrets are server configuration"
    return None


@dataclass(frozen=True)
class PropertyPolicy:
    """The properties a server's clients may not set: the built-in rules plus the operator's
    ``ksql.properties.overrides.denylist``."""

    denylist: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> PropertyPolicy:
        """The policy of a server configured with ``properties`` (its config file's)."""
        raw = properties.get(DENYLIST_PROPERTY, "")
        return cls(frozenset(canonical(n) for n in raw.split(",") if n.strip()))

    def refusal(self, name: str) -> str | None:
        """Why a client may not set ``name``, or None."""
        if canonical(name) in self.denylist:
            return "the server's ksql.properties.overrides.denylist names it"
        return server_scoped(name)

    def check(self, names: Iterable[str]) -> None:
        """Refuse the names a client may not set, all at once (ksqlDB's message, each named
        with why)."""
        refused = [(n, why) for n in names if (why := self.refusal(n)) is not None]
        if refused:
            reasons = "; ".join(f"'{n}' is server configuration ({why})" for n, why in refused)
            raise PropertyRefused(f"One or more properties overrides set locally are prohibited by the KSQL server "
                                  f"(use UNSET to reset their default value): {[n for n, _ in refused]}. {reasons}: "
                                  f"set it in the server's configuration file.")


class PropertyRefused(ConfigError):
    """A client set a property that is the operator's."""
