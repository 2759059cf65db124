"""The Elasticsearch sink connector against a real search server process (``osmem-server``, an
in-memory OpenSearch-compatible server): the bulk writer alone, then whole connectors run by the
engine from Kafka topics."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from streamsql.connectors.classes import parse_sink
from streamsql.connectors.elasticsearch import ElasticsearchSinkConfig, WriteFailed
from streamsql.connectors.sink import BadRecords, RawRecord, write_all
from streamsql.kafka.processing_log import LogTarget

pytestmark = pytest.mark.integration

ES = "io.confluent.connect.elasticsearch.ElasticsearchSinkConnector"


@pytest.fixture
def search() -> Iterator[Any]:
    from osmem_server import OsmemServer

    server = OsmemServer.start()
    try:
        yield server
    finally:
        server.close()


def documents(url: str, index: str) -> dict[str, Any]:
    """Every document of an index, by id (after a refresh, as a search would see them)."""
    with httpx.Client(base_url=url, timeout=30) as c:
        if c.head(f"/{index}").status_code == 404:
            return {}
        c.post(f"/{index}/_refresh")
        hits = c.post(f"/{index}/_search", json={"size": 10000}).json()["hits"]["hits"]
    return {h["_id"]: h["_source"] for h in hits}


def config(url: str, **extra: str) -> ElasticsearchSinkConfig:
    _cls, cfg = parse_sink("T", "SINK", {"connector.class": ES, "connection.url": url, "topics": "Words", **extra})
    assert isinstance(cfg, ElasticsearchSinkConfig)
    return cfg


def record(offset: int, key: str | None, value: Any, topic: str = "Words") -> RawRecord:
    data = None if value is None else (value if isinstance(value, bytes) else json.dumps(value).encode())
    return RawRecord(key.encode() if key is not None else None, data, topic, 0, offset, 1000 + offset)


def write(cfg: ElasticsearchSinkConfig, records: list[RawRecord]) -> BadRecords:
    """One task's writes (the processing log only collected, not sent)."""
    bad = BadRecords(cfg.name, LogTarget("unused:9092", None))
    write_all(cfg, records, bad)
    return bad


def test_documents_by_key_upserts_deletes_and_offset_ids(search: Any) -> None:
    cfg = config(search.url, **{"behavior.on.null.values": "delete", "batch.size": "2"})
    write(cfg, [record(0, "alice", {"name": "alice", "count": 1}), record(1, "bob", {"name": "bob", "count": 1}),
                record(2, "alice", {"name": "alice", "count": 2}), record(3, "bob", None),
                record(4, "carol", None)])  # a tombstone of a key never indexed: nothing to delete
    assert documents(search.url, "words") == {"alice": {"name": "alice", "count": 2}}  # index = topic, lower-cased

    merged = config(search.url, **{"write.method": "upsert"})
    write(merged, [record(5, "alice", {"extra": True})])
    assert documents(search.url, "words") == {"alice": {"name": "alice", "count": 2, "extra": True}}

    by_offset = config(search.url, **{"key.ignore": "true", "topic.index.map": "Words:log"})
    write(by_offset, [record(0, None, {"n": 0}), record(1, "x", {"n": 1})])
    write(by_offset, [record(0, None, {"n": 0}), record(1, "x", {"n": 1})])  # a batch written again
    assert documents(search.url, "log") == {"Words+0+0": {"n": 0}, "Words+0+1": {"n": 1}}


def test_tombstones_follow_behavior_on_null_values(search: Any) -> None:
    write(config(search.url, **{"behavior.on.null.values": "ignore"}),
          [record(0, "a", {"v": 1}), record(1, "a", None)])
    assert documents(search.url, "words") == {"a": {"v": 1}}
    with pytest.raises(WriteFailed, match="null value encountered for topic Words partition 0 offset 2"):
        write(config(search.url), [record(2, "a", None)])  # Connect's default: fail


def test_malformed_documents_and_unreadable_records_are_logged_and_the_rest_written(search: Any) -> None:
    cfg = config(search.url)
    write(cfg, [record(0, "a", {"count": 1})])  # the index maps count as a number
    bad = write(cfg, [record(1, "b", {"count": {"nested": 1}}), record(2, "c", {"count": 3}),
                      record(3, "d", b"{not json"), record(4, None, {"count": 4}), record(5, "e", [1, 2])])
    assert documents(search.url, "words") == {"a": {"count": 1}, "c": {"count": 3}}
    kinds = [(e["message"]["type"], json.dumps(e["message"])) for e in bad.entries]
    assert [k for k, _ in kinds] == [0, 2, 2, 2]  # unreadable value; null key; not an object; rejected by the server
    assert "offset 3" in kinds[0][1] or '"offset": 3' in kinds[0][1]
    assert "topic Words partition 0 offset 1" in kinds[3][1] and "mapper_parsing_exception" in kinds[3][1]

    with pytest.raises(WriteFailed, match="offset 6.*behavior.on.malformed.documents=fail"):
        write(config(search.url, **{"behavior.on.malformed.documents": "fail"}),
              [record(6, "f", {"count": "many"})])
    quiet = write(config(search.url, **{"behavior.on.malformed.documents": "ignore"}),
                  [record(7, "g", {"count": "many"}), record(8, "h", {"count": 8})])
    assert quiet.entries == [] and documents(search.url, "words")["h"] == {"count": 8}


def test_a_server_that_stops_answering_for_30_s_ends_with_every_document_once(search: Any) -> None:
    cfg = config(search.url, **{"key.ignore": "true", "max.retries": "12", "retry.backoff.ms": "200",
                                "read.timeout.ms": "1000", "batch.size": "50"})
    records = [record(i, None, {"i": i}) for i in range(500)]
    write(cfg, records[:100])
    os.kill(search.pid, signal.SIGSTOP)
    resumed = threading.Timer(30.0, os.kill, (search.pid, signal.SIGCONT))
    resumed.start()
    started = time.monotonic()
    try:
        write(cfg, records[100:])  # blocks in retries until the server answers again
    finally:
        resumed.cancel()
        os.kill(search.pid, signal.SIGCONT)
    assert time.monotonic() - started >= 29
    docs = documents(search.url, "words")
    assert len(docs) == 500 and sorted(d["i"] for d in docs.values()) == list(range(500))


def test_retries_run_out_with_a_clear_error(search: Any) -> None:
    cfg = config(search.url, **{"max.retries": "1", "retry.backoff.ms": "10", "read.timeout.ms": "300"})
    os.kill(search.pid, signal.SIGSTOP)
    try:
        with pytest.raises(WriteFailed, match=r"did not take 1 document\(s\) after 1 retries \(max.retries\)"):
            write(cfg, [record(0, "a", {"v": 1})])
    finally:
        os.kill(search.pid, signal.SIGCONT)


# --- whole connectors, run by the engine ------------------------------------------------------------


def test_a_tables_rows_become_documents_and_its_tombstones_delete_them(engine, topic_name, search):  # type: ignore[no-untyped-def]
    from tests.integration.test_engine import produce

    src, out = topic_name("words"), topic_name("counts")
    engine.execute(f"""
        CREATE STREAM words (word VARCHAR) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=2);
        CREATE TABLE word_counts WITH (KAFKA_TOPIC='{out}') AS
          SELECT word, AS_VALUE(word) AS name, COUNT(*) AS total FROM words GROUP BY word HAVING COUNT(*) < 4;
    """)
    [created] = engine.execute(f"""
        CREATE SINK CONNECTOR words_es WITH ('connector.class' = '{ES}', 'connection.url' = '{search.url}',
          'topics' = '{out}', 'key.ignore' = 'false', 'schema.ignore' = 'true',
          'behavior.on.null.values' = 'delete');""")
    assert created.name == "WORDS_ES" and created.config["topics"] == out
    words = ["kafka", "spark", "kafka", "sql", "kafka", "spark", "kafka", "stream"]
    produce(engine.admin, src, [(None, json.dumps({"word": w}), 1000 + i) for i, w in enumerate(words)])
    engine.wait_until_idle()
    expected = {w: {"NAME": w, "TOTAL": words.count(w)} for w in set(words) if words.count(w) < 4}
    assert documents(search.url, out.lower()) == expected  # kafka reached 4: its tombstone deleted it

    [listed] = engine.execute("SHOW CONNECTORS;")
    assert [(c.name, c.kind, c.class_name, c.state) for c in listed.connectors] == [("WORDS_ES", "SINK", ES, "RUNNING")]
    [described] = engine.execute("DESCRIBE CONNECTOR words_es;")
    assert described.topics == [out] and described.connector.state == "RUNNING" and described.trace is None

    # bad records in the topic: logged with their offsets, the good ones around them written
    produce(engine.admin, out, [("bad", "{not json", 2000), ("zed", json.dumps({"NAME": "zed", "TOTAL": 1}), 2001)])
    engine.wait_until_idle()
    assert documents(search.url, out.lower())["zed"] == {"NAME": "zed", "TOTAL": 1}
    log = [json.loads(rec.value) for rec in engine.admin.read_all(engine.processing_log_topic)]
    mine = [e for e in log if e["logger"] == "connector.WORDS_ES"]
    assert any(e["message"]["deserializationError"]["topic"] == out for e in mine), mine

    [dropped] = engine.execute("DROP CONNECTOR words_es;")
    assert dropped.name == "WORDS_ES"
    assert engine.execute("SHOW CONNECTORS;")[0].connectors == []


def test_a_connector_survives_a_restart_of_the_engine(bootstrap, spark, tmp_path, topic_name, search):  # type: ignore[no-untyped-def]
    from streamsql.runtime.config import EngineConfig
    from streamsql.runtime.engine import Engine
    from tests.integration.test_engine import produce

    topic = topic_name("events")
    first = Engine(EngineConfig(bootstrap, tmp_path / "state"), spark=spark)
    first.start()
    first.admin.create_topic(topic, 1)
    first.execute(f"CREATE SINK CONNECTOR ev WITH ('connector.class' = 'ElasticsearchSinkConnector', "
                  f"'connection.url' = '{search.url}', 'topics' = '{topic}', 'key.ignore' = 'true');")
    produce(first.admin, topic, [(None, json.dumps({"n": i}), 1000 + i) for i in range(3)])
    first.wait_until_idle()
    first.close()
    second = Engine(EngineConfig(bootstrap, tmp_path / "state"), spark=spark)
    produce(second.admin, topic, [(None, json.dumps({"n": i}), 1000 + i) for i in range(3, 5)])
    try:
        second.start()  # replays the CREATE SINK CONNECTOR from the command log
        second.wait_until_idle()
        docs = documents(search.url, topic.lower())
        assert sorted(d["n"] for d in docs.values()) == [0, 1, 2, 3, 4]
        assert set(docs) == {f"{topic}+0+{i}" for i in range(5)}
    finally:
        second.close()


def test_connector_statement_errors(engine, topic_name, search):  # type: ignore[no-untyped-def]
    from streamsql.errors import StreamsqlError

    topic = topic_name("e")
    engine.admin.create_topic(topic, 1)
    with pytest.raises(StreamsqlError, match="Failed to find any class .* matches com.example.Nope"):
        engine.execute(f"CREATE SINK CONNECTOR x WITH ('connector.class'='com.example.Nope', 'topics'='{topic}');")
    with pytest.raises(StreamsqlError, match="Invalid value not-a-url for configuration connection.url"):
        engine.execute(f"CREATE SINK CONNECTOR x WITH ('connector.class'='{ES}', 'connection.url'='not-a-url', "
                       f"'topics'='{topic}');")
    with pytest.raises(StreamsqlError, match="topic 'no_such_topic_x' does not exist"):
        engine.execute(f"CREATE SINK CONNECTOR x WITH ('connector.class'='{ES}', 'connection.url'='{search.url}', "
                       f"'topics'='no_such_topic_x');")
    with pytest.raises(StreamsqlError, match="Connector X does not exist"):
        engine.execute("DROP CONNECTOR x;")
    assert engine.execute("SHOW CONNECTORS;")[0].connectors == []


def test_a_connector_that_ran_out_of_retries_is_restarted_and_writes_everything_once(engine, topic_name, search):  # type: ignore[no-untyped-def]
    """max.retries exhausted while the server is stopped: the connector's query fails (FAILED in
    DESCRIBE CONNECTOR, with the reason); the server's supervisor restarts it on its checkpoint
    once the server answers, and the failed batch is written again under the same ids."""
    from streamsql.runtime.supervisor import QuerySupervisor
    from tests.integration.test_engine import produce

    topic = topic_name("retry")
    engine.admin.create_topic(topic, 1)
    engine.execute(f"CREATE SINK CONNECTOR retrying WITH ('connector.class'='{ES}', 'connection.url'='{search.url}', "
                   f"'topics'='{topic}', 'key.ignore'='true', 'max.retries'='2', 'retry.backoff.ms'='100', "
                   f"'read.timeout.ms'='5000');")  # 5 s: a fresh index under a loaded suite can take seconds
    produce(engine.admin, topic, [(None, json.dumps({"n": i}), 1000 + i) for i in range(3)])
    engine.wait_until_idle()
    os.kill(search.pid, signal.SIGSTOP)
    try:
        produce(engine.admin, topic, [(None, json.dumps({"n": i}), 1000 + i) for i in range(3, 6)])
        handle = engine.queries["CONNECTOR_RETRYING"].handle
        deadline = time.monotonic() + 120
        while handle.exception() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        [described] = engine.execute("DESCRIBE CONNECTOR retrying;")
        assert described.connector.state == "FAILED" and "max.retries" in (described.trace or "")
    finally:
        os.kill(search.pid, signal.SIGCONT)
    assert QuerySupervisor(engine).restart("CONNECTOR_RETRYING")
    engine.wait_until_idle()
    docs = documents(search.url, topic.lower())
    assert sorted(d["n"] for d in docs.values()) == list(range(6))
    assert engine.execute("SHOW CONNECTORS;")[0].connectors[0].state == "RUNNING"
