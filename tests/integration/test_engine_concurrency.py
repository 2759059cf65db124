"""Statements of several callers at once on one engine (a real broker and SparkSession): reads
never wait for a statement that changes the catalog, statements that change it wait for each
other, and each caller's session stays its own. The server runs every request this way
(tests/integration/test_server.py shows it over HTTP)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from streamsql.runtime import results as r
from streamsql.runtime.session import Session

pytestmark = pytest.mark.integration


class HeldCommandLock:
    """The engine's command lock held by another thread (as a long DDL statement would hold it)
    until :meth:`release`."""

    def __init__(self, engine: Any) -> None:
        self._taken, self._release = threading.Event(), threading.Event()

        def hold() -> None:
            with engine.command_lock:
                self._taken.set()
                self._release.wait(120)

        self._thread = threading.Thread(target=hold, daemon=True)
        self._thread.start()
        assert self._taken.wait(10)

    def release(self) -> None:
        self._release.set()
        self._thread.join(10)


def test_reads_run_while_a_catalog_change_is_in_progress(engine, topic_name) -> None:  # type: ignore[no-untyped-def]
    name = topic_name("conc").upper()
    engine.execute(f"CREATE STREAM {name} (ID VARCHAR KEY, V INT) WITH (KAFKA_TOPIC='{name.lower()}', "
                   "VALUE_FORMAT='JSON', PARTITIONS=1);")
    engine.execute(f"INSERT INTO {name} (ID, V) VALUES ('a', 1); INSERT INTO {name} (ID, V) VALUES ('b', 2);")
    held = HeldCommandLock(engine)
    try:
        with ThreadPoolExecutor(4) as pool:
            reads = {
                "show": pool.submit(engine.execute, "SHOW STREAMS;"),
                "describe": pool.submit(engine.execute, f"DESCRIBE {name};"),
                "insert": pool.submit(engine.execute, f"INSERT INTO {name} (ID, V) VALUES ('c', 3);"),
                "pull": pool.submit(engine.execute, f"SELECT ID, V FROM {name};"),
            }
            answered = {kind: future.result(timeout=120) for kind, future in reads.items()}
            # a statement that changes the catalog waits for the one in progress
            create = pool.submit(engine.execute, f"CREATE STREAM {name}_COPY AS SELECT * FROM {name};")
            with pytest.raises(TimeoutError):
                create.result(timeout=1.0)
            held.release()
            assert "Created query" in create.result(timeout=120)[0].message
    finally:
        held.release()
    assert name in [s.name for s in answered["show"][0].sources]
    assert answered["describe"][0].source.name == name
    stream = answered["pull"][0]
    assert isinstance(stream, r.RowStream)
    assert sorted(row[0] for row in stream.rows(timeout=60)) == ["a", "b", "c"]


def test_each_callers_session_is_its_own_while_they_run_at_once(engine) -> None:  # type: ignore[no-untyped-def]
    """Two callers SET the same property at once and each reads its own value back: the
    session is bound to the caller's thread, not swapped into the engine."""
    both_set = threading.Barrier(2, timeout=10)

    def caller(value: str) -> tuple[str, str]:
        with engine.session_scope(Session()):
            engine.execute(f"SET 'ksql.streams.cache.max.bytes.buffering'='{value}';")
            both_set.wait()  # the other caller's SET happened too
            return value, engine.prop("cache.max.bytes.buffering")

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(caller, ["11", "22"]))
    assert results == [("11", "11"), ("22", "22")]
    assert engine.session.properties.get("cache.max.bytes.buffering") is None  # the engine's own: untouched


def test_reads_beside_creates_and_drops_never_fail_unexpectedly(engine, topic_name) -> None:  # type: ignore[no-untyped-def]
    """Four callers create and drop streams while four list and describe them: the readers see a
    consistent catalog (each listing a snapshot), and the only errors are the ones a user would
    get by racing another client (a stream just dropped does not exist)."""
    from streamsql.errors import StreamsqlError

    prefix = topic_name("race").upper()
    stop = threading.Event()
    unexpected: list[BaseException] = []
    counts = {"ddl": 0, "reads": 0}

    def writer(n: int) -> None:
        i = 0
        while not stop.is_set():
            name = f"{prefix}_{n}_{i}"
            try:
                engine.execute(f"CREATE STREAM {name} (ID VARCHAR KEY, V INT) WITH (KAFKA_TOPIC='{prefix.lower()}', "
                               "VALUE_FORMAT='JSON', PARTITIONS=1);")
                engine.execute(f"DROP STREAM {name};")
                counts["ddl"] += 2
            except BaseException as e:  # noqa: BLE001 - every failure is collected and reported
                unexpected.append(e)
            i += 1

    def reader() -> None:
        while not stop.is_set():
            try:
                [listing] = engine.execute("SHOW STREAMS;")
                for info in listing.sources[:5]:
                    try:
                        engine.execute(f"DESCRIBE {info.name};")
                    except StreamsqlError as e:
                        if "does not exist" not in e.message:  # dropped since the listing: as in ksqlDB
                            raise
                engine.execute("SHOW QUERIES;")
                counts["reads"] += 1
            except BaseException as e:  # noqa: BLE001
                unexpected.append(e)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    threads += [threading.Thread(target=reader) for _ in range(4)]
    for th in threads:
        th.start()
    stop.wait(8)
    stop.set()
    for th in threads:
        th.join(60)
    assert not unexpected, [repr(e) for e in unexpected[:5]]
    assert counts["ddl"] > 20 and counts["reads"] > 20, counts
    assert not [n for n in engine.catalog.sources if n.startswith(prefix)]
