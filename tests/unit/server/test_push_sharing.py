"""Shared push queries (server/sharing.py): one source query, a row stream per client. The source
here is a plain row stream fed by the test (the server feeds it from a Spark query)."""

from __future__ import annotations

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
    hub = PushQueryHub()
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
