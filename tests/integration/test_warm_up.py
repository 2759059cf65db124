"""The session warm-up runs its queries to their end on a real session, leaves none of them
running, and never stops a session when it fails."""

from __future__ import annotations

import logging

import pytest

from streamsql.runtime import warm_up

pytestmark = pytest.mark.integration


def _warm_up_queries(spark) -> list[str]:  # type: ignore[no-untyped-def]
    return [q.name for q in spark.streams.active if (q.name or "").startswith("streamsql-warm-up")]


def test_the_warm_up_runs_in_the_background_and_leaves_no_query_running(spark, monkeypatch, caplog) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("STREAMSQL_WARM_UP", raising=False)
    monkeypatch.setattr(warm_up, "last_seconds", None)
    with caplog.at_level(logging.WARNING, logger=warm_up.__name__):
        thread = warm_up.start_in_background(lambda: spark)
        assert thread is not None
        thread.join(timeout=120)
    assert not thread.is_alive()
    assert warm_up.last_seconds is not None and warm_up.last_seconds > 0
    assert "failed" not in caplog.text
    assert not _warm_up_queries(spark)


def test_switched_off_it_starts_nothing(spark, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("STREAMSQL_WARM_UP", "0")
    assert warm_up.start_in_background(lambda: spark) is None


def test_a_failing_warm_up_is_logged_and_stops_its_queries(spark, monkeypatch, caplog) -> None:  # type: ignore[no-untyped-def]
    def fail(_batch_df: object, _batch_id: int) -> None:
        raise RuntimeError("the warm-up's batch failed on purpose")

    monkeypatch.setattr(warm_up, "_write_batch", fail)
    with caplog.at_level(logging.WARNING, logger=warm_up.__name__):
        seconds = warm_up.run(spark)
    assert seconds > 0
    assert "the session's warm-up failed" in caplog.text and "on purpose" in caplog.text
    assert not _warm_up_queries(spark)
    assert spark.range(3).count() == 3  # the session goes on


def test_a_session_that_cannot_start_is_left_to_the_statement_that_needs_it(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("STREAMSQL_WARM_UP", raising=False)
    monkeypatch.setattr(warm_up, "last_seconds", None)

    def no_session():  # type: ignore[no-untyped-def]
        raise RuntimeError("no JVM")

    thread = warm_up.start_in_background(no_session)
    assert thread is not None
    thread.join(timeout=10)
    assert warm_up.last_seconds is None
