"""Shared push queries (server/sharing.py): one source query, a row stream per client. The source
here is a plain row stream fed by the test (the server feeds it from a Spark query)."""

from __future__ import annotations

import threading
import time

import pytest

from streamsql.runtime import results as r
from streamsql.server.sharing import PushQueryHub


def _wait(predicate, timeout: float = 5.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def test_identical_push_queries_share_one_source_with_their_own_limits() -> None:
    hub = PushQueryHub(linger_s=0)
    started: list[r.RowStream] = []
    stopped: list[str] = []

    def start() -> r.RowStream:
        source = r.RowStream("SELECT * FROM s EMIT CHANGES;", f"transient_{len(started)}", [("V", "INTEGER")])
        source.on_close(lambda: stopped.append(source.query_id))
        started.append(source)
        return source

    key = PushQueryHub.key("select * from s emit changes;", {"auto.offset.reset": "latest"}, {})
    same = PushQueryHub.key("SELECT *  FROM s\nEMIT CHANGES LIMIT 2;", {"auto.offset.reset": "latest"}, {})
    assert key == same
    first = hub.subscribe(key, "q", None, start)
    second = hub.subscribe(same, "q", 2, start)
    assert len(started) == 1 and hub.running == 1
    assert first.query_id != second.query_id and first.columns == second.columns == [("V", "INTEGER")]
    for v in (1, 2, 3):
        started[0].put([v])
    assert list(second.rows(timeout=5)) == [[1], [2]]  # its LIMIT ended it
    assert [first.poll(5) for _ in range(3)] == [[1], [2], [3]]
    assert not stopped  # one subscriber left: the source keeps running
    first.close()
    assert _wait(lambda: stopped == ["transient_0"]) and hub.running == 0
    third = hub.subscribe(key, "q", None, start)  # a new source once the old one stopped
    assert len(started) == 2 and not third.closed


def test_a_failing_source_ends_every_subscriber_with_its_error() -> None:
    hub = PushQueryHub()
    source = r.RowStream("q", "transient_x", [("V", "INTEGER")])
    subs = [hub.subscribe(("k", (), ()), "q", None, lambda: source) for _ in range(2)]
    died = RuntimeError("query died")
    source.finish(died)
    for sub in subs:
        assert _wait(lambda: sub.closed)
        with pytest.raises(RuntimeError, match="^query died$") as info:
            list(sub.rows(timeout=1))
        assert info.value is died  # the source's own error, not a new one


def _source(query_id: str, stopped: list[str] | None = None) -> r.RowStream:
    source = r.RowStream("SELECT * FROM s EMIT CHANGES;", query_id, [("V", "INTEGER")])
    if stopped is not None:
        source.on_close(lambda: stopped.append(query_id))
    return source


def test_a_source_lingers_after_its_last_subscriber_and_the_next_client_reuses_it() -> None:
    """Clients of a busy server come and go: the source outlives its last subscriber by the
    linger, so the next client gets rows at once instead of waiting for a new Spark query."""
    hub = PushQueryHub(linger_s=0.5)
    started: list[str] = []
    stopped: list[str] = []

    def start() -> r.RowStream:
        started.append(f"transient_{len(started)}")
        return _source(started[-1], stopped)

    key = ("SELECT * FROM S EMIT CHANGES", (), ())
    hub.subscribe(key, "q", None, start).close()
    again = hub.subscribe(key, "q", 1, start)  # within the linger: the same source
    assert started == ["transient_0"] and not stopped
    again.close()
    time.sleep(0.2)
    hub.subscribe(key, "q", None, start).close()  # a subscriber meanwhile restarts the linger
    time.sleep(0.35)
    assert not stopped  # 0.55 s after the first leave, but 0.35 s after the last one
    assert _wait(lambda: stopped == ["transient_0"]) and hub.running == 0
    hub.subscribe(key, "q", None, start)
    assert started == ["transient_0", "transient_1"]
    hub.close()
    assert _wait(lambda: stopped == ["transient_0", "transient_1"]) and hub.running == 0


def test_a_source_that_starts_slowly_holds_up_only_clients_of_its_own_statement() -> None:
    hub = PushQueryHub(linger_s=0)
    release = threading.Event()
    slow_started = threading.Event()

    def slow() -> r.RowStream:
        slow_started.set()
        release.wait(10)
        return _source("transient_slow")

    waiting = threading.Thread(target=hub.subscribe, args=(("A", (), ()), "a", None, slow))
    waiting.start()
    assert slow_started.wait(5)
    other = hub.subscribe(("B", (), ()), "b", None, lambda: _source("transient_b"))  # not held up
    assert other.query_id.startswith("transient_b") and waiting.is_alive()
    release.set()
    waiting.join(5)
    assert hub.running == 2
    hub.close()
