"""ASSERT TOPIC / ASSERT SCHEMA on the real engine, broker and a real registry server process,
and over the REST API (ksqlDB's entities, HTTP 417 when an assertion does not hold)."""

from __future__ import annotations

import json
import threading
import time

import pytest

from streamsql.conformance.registry_server import RegistryServer
from streamsql.errors import AssertionFailed
from streamsql.formats import schema_registry
from streamsql.runtime import results as r
from streamsql.surfaces.render import render

pytestmark = pytest.mark.integration


def test_assert_topic_waits_for_the_topic_and_checks_its_shape(engine, topic_name):  # type: ignore[no-untyped-def]
    topic = topic_name("asserted")
    with pytest.raises(AssertionFailed, match=f"^Topic {topic} does not exist$"):
        engine.execute(f"ASSERT TOPIC {topic} TIMEOUT 300 MILLISECONDS;")
    [absent] = engine.execute(f"ASSERT NOT EXISTS TOPIC '{topic}';")
    assert isinstance(absent, r.Asserted) and render(absent) == f"Topic {topic} does not exist."
    # created while the assertion waits: it holds as soon as the topic is there
    creator = threading.Timer(0.5, lambda: engine.admin.create_topic(topic, 2))
    creator.start()
    started = time.monotonic()
    [held] = engine.execute(f"ASSERT TOPIC '{topic}' WITH (PARTITIONS=2, REPLICAS=1) TIMEOUT 20 SECONDS;")
    creator.join()
    assert isinstance(held, r.Asserted) and held.exists and render(held) == f"Topic {topic} exists."
    assert time.monotonic() - started < 10
    with pytest.raises(AssertionFailed) as info:
        engine.execute(f"ASSERT TOPIC '{topic}' WITH (PARTITIONS=3, COLOUR='red');")
    assert str(info.value) == (f"Mismatched configuration for topic {topic}: For config partitions, expected 3 got 2"
                               "\nCannot assert unknown topic property: COLOUR")
    with pytest.raises(AssertionFailed, match=f"^Topic {topic} exists$"):
        engine.execute(f"ASSERT NOT EXISTS TOPIC '{topic}';")


def test_assert_schema_against_a_registry_server(engine, topic_name):  # type: ignore[no-untyped-def]
    with RegistryServer() as registry:
        engine.execute(f"SET '{schema_registry.URL_PROPERTY}'='{registry.url}';")
        subject = f"{topic_name('s')}-value"
        schema = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
        with pytest.raises(AssertionFailed, match=f"^Schema with subject name {subject} does not exist$"):
            engine.execute(f"ASSERT SCHEMA SUBJECT '{subject}' TIMEOUT 200 MILLISECONDS;")
        schema_id = registry.register(subject, schema, "AVRO")
        [held] = engine.execute(f"ASSERT SCHEMA SUBJECT '{subject}' ID {schema_id};")
        assert isinstance(held, r.Asserted) and render(held) == f"Schema with subject {subject} id {schema_id} exists."
        [by_id] = engine.execute(f"ASSERT SCHEMA ID {schema_id};")
        assert isinstance(by_id, r.Asserted) and by_id.exists
        with pytest.raises(AssertionFailed, match=f"^Schema with id {schema_id + 100} does not exist$"):
            engine.execute(f"ASSERT SCHEMA ID {schema_id + 100} TIMEOUT 100 MILLISECONDS;")
        with pytest.raises(AssertionFailed, match=f"^Schema with subject name {subject} exists$"):
            engine.execute(f"ASSERT NOT EXISTS SCHEMA SUBJECT '{subject}';")
        engine.execute(f"UNSET '{schema_registry.URL_PROPERTY}';")
