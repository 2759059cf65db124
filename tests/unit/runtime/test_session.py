"""Sessions (``runtime/session.py``): what a client's statements SET or DEFINE stays in its own
session, and a statement reads the properties of the session it runs under. The REST server
gives each request a session of its own; the CLI, shell and runner use the engine's."""

from __future__ import annotations

from pathlib import Path

from streamsql.runtime.config import EngineConfig
from streamsql.runtime.engine import Engine
from streamsql.runtime.session import Session


def _engine(tmp_path: Path) -> Engine:
    # SET, DEFINE and SHOW PROPERTIES touch neither Kafka nor Spark: no broker is contacted
    return Engine(EngineConfig(bootstrap_servers="127.0.0.1:1", data_dir=tmp_path))


def test_a_request_session_keeps_what_its_statements_set(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    request = Session({"auto.offset.reset": "earliest"}, {"TOPIC": "orders"})
    engine.execute("SET 'ksql.streams.cache.max.bytes.buffering'='0'; DEFINE city = 'Paris';", request)
    assert request.properties == {"auto.offset.reset": "earliest", "ksql.streams.cache.max.bytes.buffering": "0"}
    assert request.variables == {"TOPIC": "orders", "CITY": "Paris"}
    assert engine.session == Session()  # the engine's own session saw none of it
    assert engine.prop("auto.offset.reset") == "latest"  # ksqlDB's default, outside the request


def test_a_statement_reads_the_properties_of_its_session(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    engine.execute("SET 'auto.offset.reset'='earliest';")  # the engine's own session (CLI, shell)
    shown = engine.execute("SHOW PROPERTIES;", Session({"auto.offset.reset": "latest"}))[0]
    assert shown.properties["auto.offset.reset"] == "latest"  # type: ignore[attr-defined]
    with engine.session_scope(Session({"ksql.service.id": "other_"})):
        assert engine.prop("ksql.service.id") == "other_"
        assert engine.prop("auto.offset.reset") == "latest"  # a session replaces the engine's, not layers on it
    assert engine.prop("auto.offset.reset") == "earliest"
    assert engine.session.properties == {"auto.offset.reset": "earliest"}
