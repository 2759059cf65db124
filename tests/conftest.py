"""Shared fixtures: one real broker process and one real SparkSession per test session.

Integration tests take ``broker`` (an :class:`EmbeddedBroker`) and/or ``spark``; unit tests take
neither and never start them. ``topic_name`` gives each test its own topics.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


@pytest.hookimpl(trylast=True)  # after -m/-k/--deselect have removed what this run leaves out
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The conformance tests read ksqlDB's corpus: without it the run stops here, naming
    STREAMSQL_QTT_DIR, instead of skipping them (tests/support/corpus.py)."""
    if any(item.get_closest_marker("qtt_corpus") for item in items):
        from tests.support.corpus import missing_reason

        reason = missing_reason()
        if reason is not None:
            pytest.exit(reason, returncode=4)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config) -> None:
    """Name the order the tests ran in (pytest-randomly shuffles every run; -q hides its header),
    so a failure that depends on it can be repeated."""
    seed = getattr(config.option, "randomly_seed", None)
    if seed is not None and config.pluginmanager.hasplugin("randomly"):
        terminalreporter.write_line(f"tests ran in a random order: --randomly-seed={seed} repeats it")


@pytest.fixture(scope="session")
def broker() -> Iterator["object"]:
    from streamsql.kafka.broker import EPHEMERAL_STORAGE, EmbeddedBroker

    # not tansu's memory engine: it loses batches two Spark tasks write to one partition at once,
    # which failed a CI run (docs/reliability.md)
    b = EmbeddedBroker(storage=EPHEMERAL_STORAGE).start()
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture(scope="session")
def bootstrap(broker) -> str:  # type: ignore[no-untyped-def]
    return broker.bootstrap_servers


@pytest.fixture(scope="session")
def spark(broker):  # type: ignore[no-untyped-def]
    """Depends on ``broker`` so that Spark (and its Kafka clients) stop before the broker does."""
    from streamsql.runtime.spark import get_spark

    session = get_spark()
    yield session
    for q in session.streams.active:
        q.stop()
    session.stop()


@pytest.fixture
def topic_name() -> "callable":  # type: ignore[valid-type]
    def make(prefix: str = "t") -> str:
        return f"{prefix}_{uuid.uuid4().hex[:10]}"

    return make


@pytest.fixture
def engine(bootstrap, spark, tmp_path):  # type: ignore[no-untyped-def]
    """A fresh engine (own catalog and data directory) on the shared broker and SparkSession,
    reading from the earliest offset as ksqlDB's own tests do."""
    from streamsql.runtime.config import EngineConfig
    from streamsql.runtime.engine import Engine

    e = Engine(EngineConfig(bootstrap, tmp_path / "state"), spark=spark)
    e.start()
    e.execute("SET 'auto.offset.reset'='earliest';")
    yield e
    e.close()
