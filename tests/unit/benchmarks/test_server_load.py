"""The pure parts of ``benchmarks/server_load.py``: percentiles, the open-loop schedule, the PSS sum
over a process tree, the 1,500-term query and the count check (running the benchmark is its own
smoke test: it needs a server, a broker and two cores)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from benchmarks.server_load import (
    big_expression,
    check_counts,
    client_offset,
    is_error_line,
    open_loop_schedule,
    percentile,
    pss_of,
    summarize,
    tree_pids,
    tree_pss,
)


def test_percentiles_are_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert percentile(values, 50) == 50
    assert percentile(values, 90) == 90
    assert percentile(values, 99) == 99
    assert percentile(values, 100) == 100
    assert percentile(list(reversed(values)), 99) == 99  # order does not matter
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 50) is None
    # one slow request in ten: p90 does not see it, p99 and max do
    assert percentile([10.0] * 9 + [5000.0], 90) == 10.0
    assert percentile([10.0] * 9 + [5000.0], 99) == 5000.0


def test_summary_rounds_and_counts() -> None:
    assert summarize([1.04, 2.0, 3.0]) == {"count": 3, "p50_ms": 2.0, "p90_ms": 3.0, "p99_ms": 3.0, "max_ms": 3.0}
    assert summarize([]) == {"count": 0, "p50_ms": None, "p90_ms": None, "p99_ms": None, "max_ms": None}


def test_open_loop_schedule_is_fixed_in_advance() -> None:
    times = list(open_loop_schedule(start=100.0, period=2.0, offset=0.5, end=107.0))
    assert times == [100.5, 102.5, 104.5, 106.5]
    # the schedule is a function of start, period and offset only: how long answers take cannot
    # move it (latency is measured from these times, so a stalled server shows in each of them)
    assert list(open_loop_schedule(100.0, 2.0, 0.5, 107.0)) == times
    assert list(open_loop_schedule(100.0, 2.0, 0.0, 100.0)) == []  # end is exclusive
    with pytest.raises(ValueError, match="period must be positive"):
        list(open_loop_schedule(0.0, 0.0, 0.0, 1.0))


def test_clients_are_spread_over_the_period() -> None:
    offsets = [client_offset(i, 4, 2.0) for i in range(4)]
    assert offsets == [0.0, 0.5, 1.0, 1.5]
    # 100 clients every 2 s: one round every 20 ms, not 100 at once
    rounds = sorted(t for i in range(100) for t in open_loop_schedule(0.0, 2.0, client_offset(i, 100, 2.0), 4.0))
    gaps = {round(b - a, 6) for a, b in zip(rounds, rounds[1:])}
    assert gaps == {0.02}
    assert len(rounds) == 200


def test_pss_of_the_tree_sums_every_process() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; b = bytearray(64 * 2**20); time.sleep(30)"])
    try:
        deadline = time.monotonic() + 20
        while pss_of(child.pid) < 60 * 2**20 and time.monotonic() < deadline:
            time.sleep(0.1)  # the child's 64 MB are touched once it has started
        me = __import__("os").getpid()
        assert child.pid in tree_pids(me)
        assert me in tree_pids(me)
        tree = tree_pss(me)
        assert set(tree["by_pid_mb"]) == {str(p) for p in tree_pids(me)}
        assert tree["by_pid_mb"][str(child.pid)] >= 64  # the child's buffer is in its share
        assert tree["total_mb"] == pytest.approx(sum(tree["by_pid_mb"].values()), abs=0.1 * len(tree["by_pid_mb"]))
        # the child alone is a smaller tree than its parent's
        assert tree_pss(child.pid)["total_mb"] < tree["total_mb"]
    finally:
        child.kill()
        child.wait()
    assert pss_of(child.pid) == 0  # gone: 0, not an error
    assert child.pid not in tree_pids(__import__("os").getpid())


def test_the_big_expression_has_1500_terms_and_a_known_answer() -> None:
    yes, no = big_expression(), big_expression(positive=False)
    assert yes.count(" + ") == 1499 and yes.count("N") >= 1500
    assert yes.endswith(">= 0;") and no.endswith("< 0;")
    assert "WHERE K = 'k0' AND (" in yes
    assert 6000 <= len(yes) <= 6200  # the "6 KB expression"


def test_every_acknowledged_row_must_be_counted() -> None:
    assert check_counts({"k0": 3, "k1": 2}, acked={"k0": 3, "k1": 1}, sent={"k0": 3, "k1": 2}) == []
    assert check_counts({"k0": 2}, acked={"k0": 3}, sent={"k0": 3}) == ["k0: counted 2 < 3 acknowledged"]
    assert check_counts({}, acked={"k1": 1}, sent={"k1": 1}) == ["k1: counted 0 < 1 acknowledged"]
    # a timed-out insert may have been written: more than acknowledged is fine, more than sent is not
    assert check_counts({"k0": 5}, acked={"k0": 3}, sent={"k0": 4}) == ["k0: counted 5 > 4 sent"]


def test_error_lines_in_a_stream() -> None:
    assert is_error_line({"@type": "generic_error", "error_code": 50000, "message": "x"})
    assert is_error_line({"error_code": 40001, "message": "x"})
    assert not is_error_line({"queryId": "q", "columnNames": ["K"]})
    assert not is_error_line(["k0", 1])
