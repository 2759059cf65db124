"""The pure parts of the on-demand benchmarks pull_visibility and key_space: which micro-batch of
a checkpoint read a record, when it committed, Spark's progress end, the summaries and the RSS
milestones (no broker or Spark: running the benchmarks is their smoke test)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from benchmarks.key_space import at_fraction, milestones
from benchmarks.pull_visibility import batch_holding, batch_offsets, commit_time, progress_end, summary


def _checkpoint(tmp_path: Path, batches: dict[int, dict[str, int]], committed: dict[int, float]) -> Path:
    """A Spark checkpoint's offsets/ and commits/ logs as Spark writes them (v1 text files)."""
    (tmp_path / "offsets").mkdir()
    (tmp_path / "commits").mkdir()
    for batch_id, ends in batches.items():
        meta = {"batchWatermarkMs": 0, "batchTimestampMs": 1, "conf": {}}
        (tmp_path / "offsets" / str(batch_id)).write_text(f"v1\n{json.dumps(meta)}\n{json.dumps(ends)}")
    (tmp_path / "offsets" / f".{len(batches)}.tmp").write_text("v1\n")  # a temporary file is not a batch
    for batch_id, at in committed.items():
        path = tmp_path / "commits" / str(batch_id)
        path.write_text('v1\n{"nextBatchWatermarkMs":0}')
        os.utime(path, (at, at))
    return tmp_path


def test_the_batch_holding_a_record_is_the_first_whose_end_is_past_its_offset(tmp_path: Path) -> None:
    cp = _checkpoint(tmp_path, {0: {"0": 5, "1": 3}, 1: {"0": 5, "1": 4}, 2: {"0": 9, "1": 4}}, {0: 100.0, 1: 101.5})
    assert batch_offsets(cp, 1) == {0: 5, 1: 4}
    assert batch_offsets(cp, 7) is None
    assert batch_holding(cp, 0, 4) == 0
    assert batch_holding(cp, 1, 3) == 1
    assert batch_holding(cp, 0, 5) == 2
    assert batch_holding(cp, 0, 9) is None  # not read by any planned batch yet
    assert batch_holding(cp, 0, 4, from_batch=1) == 1  # only batches at or after from_batch
    assert commit_time(cp, 1) == 101.5
    assert commit_time(cp, 2) is None  # planned, not committed


def test_progress_end_is_the_trigger_start_plus_its_execution() -> None:
    progress = [{"batchId": 3, "timestamp": "2026-11-25T14:00:00.250Z", "durationMs": {"triggerExecution": 1500}}]
    assert progress_end(progress, 3) == 1795615200.25 + 1.5
    assert progress_end(progress, 4) is None
    idle = {"batchId": 3, "timestamp": "2026-11-25T13:59:20.000Z", "durationMs": {"triggerExecution": 2}}
    assert progress_end([idle, *progress], 3) == 1795615200.25 + 1.5  # the batch's, not an idle report


def test_summary_of_millisecond_values() -> None:
    s = summary([float(v) for v in range(1, 101)])
    assert (s["n"], s["p50"], s["max"], s["min"]) == (100, 51.0, 100.0, 1.0)
    assert s["p95"] == 95.0
    assert summary([])["p50"] is None


def test_rss_milestones_follow_the_changelog_count() -> None:
    samples = [
        {"t": 0.0, "driver_mb": 150.0, "jvm_mb": 700.0, "python-worker_mb": 10.0, "broker_mb": 20.0},
        {"t": 1.0, "driver_mb": 151.0, "jvm_mb": 900.0, "python-worker_mb": 900.0, "broker_mb": 30.0,
         "changelog_records": 100},
        {"t": 2.0, "driver_mb": 155.0, "jvm_mb": 950.0, "python-worker_mb": 800.0, "broker_mb": 40.0,
         "changelog_records": 600},
        {"t": 3.0, "driver_mb": 152.0, "jvm_mb": 990.0, "python-worker_mb": 700.0, "broker_mb": 50.0,
         "changelog_records": 1000},
    ]
    assert at_fraction(samples, 1000, 0.5) == {"t": 2.0, "changelog_records": 600, "driver_mb": 155.0}
    assert at_fraction(samples, 2000, 1.0) is None
    m = milestones(samples, 1000)
    assert m["driver"] == {"start": 150.0, "10%": 151.0, "50%": 155.0, "100%": 152.0, "max": 155.0}
    assert m["jvm"]["100%"] == 990.0
    assert m["t_s"] == {"10%": 1.0, "50%": 2.0, "100%": 3.0}


def test_the_peak_pss_is_split_by_the_module_each_python_process_runs() -> None:
    """A real child tree (no Spark): the sampler's peak PSS names ``python:<module>`` for a
    process started with ``-m`` and sums to the peak it reports."""
    import subprocess
    import sys
    import time

    from benchmarks.measure import TreeSampler

    child = subprocess.Popen([sys.executable, "-c", "import subprocess, sys; subprocess.run("
                              "[sys.executable, '-m', 'timeit', '-n', '1', 'import time; time.sleep(3)'])"])
    try:
        time.sleep(1.0)
        sampler = TreeSampler(child.pid, interval_s=0.05, pss_every=1).start()
        time.sleep(0.5)
        sampler.stop()
    finally:
        import psutil

        for p in [*psutil.Process(child.pid).children(recursive=True), psutil.Process(child.pid)]:
            p.kill()  # the grandchild too: it would sleep on as an orphan
        child.wait()
    split = sampler.peak_pss_by_process
    assert "python:timeit" in split and split["python:timeit"] > 0
    assert sum(split.values()) == sampler.peak_pss
