"""ASSERT TOPIC / ASSERT SCHEMA's executor against a small context: a real catalog and command
log, the suite's real broker through the engine's admin client, no Spark session. An assertion
holds or fails in ksqlDB's words; either way the catalog and the command log are unchanged (an
assertion is not a command: a replay does not wait on it again)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from streamsql.catalog import Catalog, FileCommandLog
from streamsql.errors import AssertionFailed, ConfigError
from streamsql.kafka.admin import KafkaAdmin
from streamsql.runtime import results as r
from streamsql.runtime.config import DEFAULT_PROPERTIES
from streamsql.runtime.executors.asserts import AssertStatements
from streamsql.sql import parse


@dataclass
class SmallContext:
    """What the assertions reach of the engine: its admin client and its properties."""

    data_dir: Path
    admin: KafkaAdmin
    properties: dict[str, str] = field(default_factory=dict)
    catalog: Catalog = field(default_factory=Catalog)

    def __post_init__(self) -> None:
        self.command_log = FileCommandLog(self.data_dir / "commands.jsonl")

    def prop(self, name: str) -> str:
        return self.properties.get(name, DEFAULT_PROPERTIES.get(name, ""))


@pytest.fixture
def ctx(tmp_path: Path, bootstrap: str) -> Iterator[SmallContext]:
    admin = KafkaAdmin(bootstrap)
    yield SmallContext(tmp_path, admin)
    admin.close()


def run(ctx: SmallContext, sql: str) -> Any:
    [stmt] = parse(sql)
    return AssertStatements(ctx).handlers()[type(stmt)](stmt)  # type: ignore[arg-type]


def unchanged(ctx: SmallContext) -> bool:
    return not list(ctx.catalog.source_names()) and ctx.command_log.read_all() == []


def test_assert_topic_holds_for_a_topic_with_those_partitions(ctx: SmallContext, topic_name: Any) -> None:
    topic = topic_name("asserted")
    ctx.admin.create_topic(topic, 2, 1)
    held = run(ctx, f"ASSERT TOPIC '{topic}' WITH (PARTITIONS=2) TIMEOUT 5 SECONDS;")
    assert isinstance(held, r.Asserted) and (held.kind, held.exists, held.topic) == ("TOPIC", True, topic)
    with pytest.raises(AssertionFailed, match=f"Mismatched configuration for topic {topic}: For config partitions, "
                                              f"expected 3 got 2"):
        run(ctx, f"ASSERT TOPIC '{topic}' WITH (PARTITIONS=3) TIMEOUT 200 MILLISECONDS;")
    with pytest.raises(AssertionFailed, match=f"Topic {topic} exists"):
        run(ctx, f"ASSERT NOT EXISTS TOPIC '{topic}' TIMEOUT 200 MILLISECONDS;")
    assert unchanged(ctx)


def test_assert_topic_fails_after_its_timeout_for_a_missing_topic(ctx: SmallContext, topic_name: Any) -> None:
    missing = topic_name("missing")
    with pytest.raises(AssertionFailed, match=f"Topic {missing} does not exist"):
        run(ctx, f"ASSERT TOPIC '{missing}' TIMEOUT 200 MILLISECONDS;")
    absent = run(ctx, f"ASSERT NOT EXISTS TOPIC '{missing}';")
    assert isinstance(absent, r.Asserted) and not absent.exists
    assert unchanged(ctx)


def test_assert_schema_without_a_registry_and_a_bad_timeout_say_so(ctx: SmallContext) -> None:
    with pytest.raises(AssertionFailed, match="no Schema Registry is configured"):
        run(ctx, "ASSERT SCHEMA SUBJECT 'orders-value' TIMEOUT 100 MILLISECONDS;")
    ctx.properties["ksql.assert.topic.default.timeout.ms"] = "soon"
    with pytest.raises(ConfigError, match="Invalid value 'soon' for configuration ksql.assert.topic.default.timeout.ms"):
        run(ctx, "ASSERT TOPIC anything;")
    assert unchanged(ctx)
