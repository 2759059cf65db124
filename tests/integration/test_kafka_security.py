"""Queries against a Kafka cluster that speaks only TLS, or only SASL/PLAIN (issue 20): every
client of the engine — the admin, the source and sink in Spark's executors, the table's store,
INSERT VALUES — takes the cluster's settings, and a certificate the settings do not trust or a
wrong password is one clear error.

Each cluster is a real tansu process behind a real terminator process (tests/support/proxies.py)
whose port it advertises: a client without the right settings cannot reach the broker at all.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streamsql.errors import StreamsqlError
from streamsql.kafka import settings as kafka_settings
from streamsql.kafka.broker import EmbeddedBroker, free_port
from streamsql.kafka.reading import close_consumers
from streamsql.runtime.config import EngineConfig
from streamsql.runtime.engine import Engine
from tests.support.proxies import SaslPlainTerminator, TlsTerminator, self_signed


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A broker reachable only through TLS: (bootstrap servers, the CA certificate)."""
    directory = tmp_path_factory.mktemp("tls")
    cert, key = self_signed(directory)
    port = free_port()
    broker = EmbeddedBroker(advertised_port=port).start()
    try:
        with TlsTerminator(port, broker.port, cert, key):
            yield f"127.0.0.1:{port}", cert
    finally:
        close_consumers(f"127.0.0.1:{port}")  # the stores' readers of it, which would retry it
        kafka_settings.register(f"127.0.0.1:{port}", {})  # a later broker on this port speaks plaintext
        broker.stop()


USER, PASSWORD = "streamsql", "pa ss;word"


@pytest.fixture(scope="module")
def sasl_cluster() -> Iterator[str]:
    """A broker reachable only after a SASL/PLAIN login as USER with PASSWORD."""
    port = free_port()
    broker = EmbeddedBroker(advertised_port=port).start()
    try:
        with SaslPlainTerminator(port, broker.port, USER, PASSWORD):
            yield f"127.0.0.1:{port}"
    finally:
        close_consumers(f"127.0.0.1:{port}")
        kafka_settings.register(f"127.0.0.1:{port}", {})
        broker.stop()


def _secured(kind: str, request: pytest.FixtureRequest) -> tuple[str, dict[str, str]]:
    if kind == "tls":
        bootstrap, ca = request.getfixturevalue("tls_cluster")
        return bootstrap, {"security.protocol": "SSL", "ssl.ca.location": str(ca)}
    return request.getfixturevalue("sasl_cluster"), {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                                    "sasl.username": USER, "sasl.password": PASSWORD}


def _consume(bootstrap: str, settings: dict[str, str], topic: str, count: int, timeout_s: float = 60
             ) -> list[tuple[Any, Any, int]]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}", **settings,
                         "enable.partition.eof": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        out: list[tuple[Any, Any, int]] = []
        deadline = time.monotonic() + timeout_s
        while len(out) < count and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                out.append((m.key(), json.loads(m.value()) if m.value() is not None else None, m.timestamp()[1]))
        return out
    finally:
        consumer.close()


@pytest.mark.parametrize("kind", ["tls", "sasl"])
def test_queries_read_and_write_a_secured_cluster(kind: str, request: pytest.FixtureRequest, spark: Any,
                                                  tmp_path: Path) -> None:
    bootstrap, settings = _secured(kind, request)
    engine = Engine(EngineConfig(bootstrap, tmp_path / "state", kafka=dict(settings)), spark=spark)
    engine.start()
    try:
        engine.execute("SET 'auto.offset.reset'='earliest';")
        engine.execute("CREATE STREAM orders (id INT KEY, customer VARCHAR, amount DOUBLE) "
                       "WITH (KAFKA_TOPIC='tls_orders', PARTITIONS=1, VALUE_FORMAT='JSON');")
        for i, (customer, amount) in enumerate([("ann", 5.0), ("bob", 20.0), ("ann", 30.0), ("cy", 1.0)]):
            engine.execute(f"INSERT INTO orders (id, customer, amount) VALUES ({i}, '{customer}', {amount});")
        # a record at time 0: written by kafka-python, here and in the sink (librdkafka would stamp it)
        engine.execute("INSERT INTO orders (ROWTIME, id, customer, amount) VALUES (0, 9, 'dee', 50.0);")
        engine.execute("CREATE STREAM big AS SELECT id, customer, amount FROM orders WHERE amount > 10 EMIT CHANGES;")
        engine.execute("CREATE TABLE spent AS SELECT customer, SUM(amount) AS total FROM orders "
                       "GROUP BY customer EMIT CHANGES;")
        big = _consume(bootstrap, settings, "BIG", 3)
        assert sorted(v["CUSTOMER"] for _, v, _ in big) == ["ann", "bob", "dee"]
        assert [ts for _, v, ts in big if v["CUSTOMER"] == "dee"] == [0]
        deadline = time.monotonic() + 60
        rows: list[list[Any]] = []
        while time.monotonic() < deadline:
            result = engine.execute("SELECT customer, total FROM spent;")[-1]
            rows = sorted(list(row) for row in result.rows())  # type: ignore[attr-defined]
            if rows == [["ann", 35.0], ["bob", 20.0], ["cy", 1.0], ["dee", 50.0]]:
                break
            time.sleep(0.5)
        assert rows == [["ann", 35.0], ["bob", 20.0], ["cy", 1.0], ["dee", 50.0]]
        shown = engine.execute("SHOW PROPERTIES;")[-1].properties  # type: ignore[attr-defined]
        assert shown["security.protocol"] == settings["security.protocol"]
        assert PASSWORD not in str(shown)
        if "sasl.password" in settings:
            assert shown["sasl.password"] == "[hidden]"
    finally:
        engine.close()


def test_a_certificate_the_settings_do_not_trust_is_one_clear_error(tls_cluster: tuple[str, Path], spark: Any,
                                                                      tmp_path: Path) -> None:
    bootstrap, _ca = tls_cluster
    other_ca, _key = self_signed(tmp_path, "other")
    engine = Engine(EngineConfig(bootstrap, tmp_path / "state",
                                 kafka={"security.protocol": "SSL", "ssl.ca.location": str(other_ca)}), spark=spark)
    started = time.monotonic()
    with pytest.raises(StreamsqlError) as raised:
        engine.start()
        engine.execute("CREATE STREAM s (id INT KEY, v INT) WITH (KAFKA_TOPIC='tls_s', PARTITIONS=1, "
                       "VALUE_FORMAT='JSON');")
    engine.close()
    message = str(raised.value)
    assert "certificate" in message and "ssl.ca.location" in message, message
    assert time.monotonic() - started < 60


def test_a_wrong_password_is_one_clear_error(sasl_cluster: str, spark: Any, tmp_path: Path) -> None:
    settings = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": USER,
                "sasl.password": "guess"}
    engine = Engine(EngineConfig(sasl_cluster, tmp_path / "state", kafka=settings), spark=spark)
    started = time.monotonic()
    with pytest.raises(StreamsqlError) as raised:
        engine.start()
        engine.execute("SHOW TOPICS;")
    engine.close()
    message = str(raised.value)
    assert "SASL authentication error" in message and "Invalid username or password" in message, message
    assert "guess" not in message
    assert time.monotonic() - started < 60
