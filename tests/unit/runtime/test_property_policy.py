"""The client property policy (runtime/property_policy.py): which properties a server's clients
may set, whatever the spelling, and what the operator's denylist adds."""

from __future__ import annotations

import pytest

from streamsql.redaction import looks_secret
from streamsql.runtime.config import DEFAULT_PROPERTIES, PROPERTY_DOCS
from streamsql.runtime.property_policy import (
    CLIENT_SETTABLE,
    SERVER_ONLY,
    PropertyPolicy,
    PropertyRefused,
    canonical,
    server_scoped,
)

#: every property SHOW PROPERTIES can list (the defaults, and every property streamsql reads),
#: with what a client gets: True = settable, False = refused
EXPECTED = {
    "auto.offset.reset": True,
    "ksql.service.id": False,
    "ksql.output.topic.name.prefix": True,
    "ksql.persistence.wrap.single.values": True,
    "ksql.streams.max.records.per.batch": True,
    "ksql.streams.commit.interval.ms": True,
    "ksql.query.pull.table.scan.enabled": True,
    "ksql.query.pull.range.scan.enabled": True,
    "ksql.timestamp.throw.on.invalid": True,
    "ksql.logging.processing.rows.include": True,
    "ksql.assert.topic.default.timeout.ms": True,
    "ksql.assert.schema.default.timeout.ms": True,
    "bootstrap.servers": False,
    "streamsql.data.dir": False,
    "spark.*": False,
    "ksql.persistence.default.format.key": True,
    "ksql.persistence.default.format.value": True,
    "ksql.streams.cache.max.bytes.buffering": True,
    "processing.guarantee": True,
    "ksql.sink.partitions": True,
    "ksql.sink.replicas": True,
    "ksql.extension.dir": False,
    "ksql.schema.registry.url": False,
    "ksql.schema.registry.basic.auth.credentials.source": False,
    "ksql.schema.registry.basic.auth.user.info": False,
    "ksql.schema.registry.bearer.auth.credentials.source": False,
    "ksql.schema.registry.ssl.truststore.location": False,
    "ksql.schema.registry.ssl.keystore.location": False,
    "ksql.internal.topic.replicas": False,
    "ksql.internal.topic.min.insync.replicas": False,
    "ksql.functions.collect_list.limit": True,
    "ksql.functions.collect_set.limit": True,
    "streamsql.aggregation.buckets": True,
    "streamsql.aggregation.operator": True,
    "ksql.properties.overrides.denylist": False,
    "streamsql.connect.file.dir": False,
    "streamsql.connect.url.allowlist": False,
    "ksql.max.push.queries": False,
    "ksql.query.persistent.active.limit": False,
    "ksql.query.pull.max.qps": False,
    "streamsql.statement.max.bytes": False,
}


def test_every_property_show_properties_lists_is_classified() -> None:
    listed = set(DEFAULT_PROPERTIES) | set(PROPERTY_DOCS)
    assert listed == set(EXPECTED), "a property SHOW PROPERTIES lists is not classified here: " \
                                    f"{sorted(listed ^ set(EXPECTED))}"
    policy = PropertyPolicy()
    for name, settable in EXPECTED.items():
        assert (policy.refusal(name) is None) is settable, name
    # the policy's own lists agree: each documented property is in exactly one
    for name in listed:
        assert (name in CLIENT_SETTABLE) != (name in SERVER_ONLY), name


@pytest.mark.parametrize("name", [
    "ksql.schema.registry.url", "KSQL.SCHEMA.REGISTRY.URL", " ksql.schema.registry.url ",
    "ksql.streams.ksql.schema.registry.url", "schema.registry.url", "ksql.schema.registry.anything",
    "bootstrap.servers", "ksql.streams.bootstrap.servers", "Bootstrap.Servers",
    "sasl.password", "ksql.streams.sasl.password", "sasl.jaas.config", "ksql.streams.sasl.jaas.config",
    "sasl.mechanism", "security.protocol", "ksql.streams.security.protocol", "ssl.key.password",
    "ssl.keystore.location", "ssl.ca.location", "basic.auth.user.info", "bearer.auth.token",
    "ksql.extension.dir", "ksql.service.id", "KSQL.SERVICE.ID", "streamsql.data.dir", "spark.master",
    "spark.driver.extraJavaOptions", "streamsql.connect.file.dir", "streamsql.connect.url.allowlist",
    "ksql.properties.overrides.denylist", "my.db.password", "aws.secret.access.key", "some.api.key",
    "client.id", "ksql.internal.topic.replicas", "ksql.logging.processing.topic.name",
])
def test_server_settings_are_refused_in_every_spelling(name: str) -> None:
    assert server_scoped(name) is not None
    with pytest.raises(PropertyRefused) as e:
        PropertyPolicy().check([name, "auto.offset.reset"])
    assert name in e.value.message and "prohibited by the KSQL server" in e.value.message
    assert "auto.offset.reset" not in e.value.message.split("]")[0]


@pytest.mark.parametrize("name", [
    # what ksqlDB's conformance corpus sets (QTT properties, RQTT streamsProperties): inert or read
    "auto.offset.reset", "ksql.streams.auto.offset.reset", "ksql.streams.cache.max.bytes.buffering",
    "cache.max.bytes.buffering", "ksql.functions.collect_set.limit", "ksql.functions.substring.legacy.args",
    "ksql.new.query.planner.enabled", "ksql.output.topic.name.prefix", "ksql.persistence.default.format.key",
    "ksql.persistence.default.format.value", "ksql.persistence.wrap.single.values",
    "ksql.query.pull.range.scan.enabled", "ksql.query.pull.stream.enabled", "ksql.query.pull.table.scan.enabled",
    "ksql.sink.partitions", "ksql.sink.replicas",
    "ksql.streams.__emit.interval.ms.kstreams.windowed.aggregation__",
    "ksql.streams.default.timestamp.extractor", "ksql.streams.topology.optimization",
    "ksql.timestamp.throw.on.invalid", "ksql.windowed.session.key.legacy", "processing.guarantee",
    "ksql.streams.processing.guarantee", "streamsql.aggregation.operator", "streamsql.aggregation.buckets",
])
def test_query_settings_stay_settable(name: str) -> None:
    assert PropertyPolicy().refusal(name) is None
    PropertyPolicy().check([name])


def test_the_operator_denylist_extends_the_refusals() -> None:
    policy = PropertyPolicy.from_properties({"ksql.properties.overrides.denylist":
                                             " auto.offset.reset , ksql.streams.cache.max.bytes.buffering"})
    for name in ("auto.offset.reset", "ksql.streams.auto.offset.reset", "cache.max.bytes.buffering",
                 "ksql.streams.cache.max.bytes.buffering"):
        with pytest.raises(PropertyRefused, match="denylist"):
            policy.check([name])
    policy.check(["ksql.sink.partitions"])
    assert PropertyPolicy.from_properties({}).denylist == frozenset()


def test_canonical_names_and_secrets() -> None:
    assert canonical(" KSQL.Streams.ksql.streams.SASL.Password ") == "sasl.password"
    assert looks_secret("connection.password") and looks_secret("value.converter.basic.auth.user.info")
    assert looks_secret("aws.secret.access.key") and not looks_secret("connection.username")
    assert not any(looks_secret(n) for n in CLIENT_SETTABLE)
