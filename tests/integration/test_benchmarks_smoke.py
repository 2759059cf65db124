"""The benchmark harness's quick path works end to end and writes rows of the right shape.

Runs ``python -m benchmarks --quick`` as a subprocess on tiny data (it starts its own embedded
broker and Spark). No timing assertions: benchmarks are never timed tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
ROW_KEYS = {"workload", "system", "records", "seconds", "records_per_s", "peak_rss_mb", "peak_pss_mb", "p50_ms",
            "p99_ms", "outputs"}


@pytest.mark.drill  # ~50 s: the benchmark harness's own check, run with it (python -m benchmarks.drills)
@pytest.mark.timeout(300)
def test_quick_benchmark_writes_rows(tmp_path: Path) -> None:
    # The peer (quixstreams) is a benchmark-only install (`.[bench]`); the smoke test checks the
    # harness with the systems the test install has.
    systems = "ceiling-raw,ceiling-json,streamsql"
    out = tmp_path / "bench.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--records", "2000", "--workloads", "W1", "--systems", systems,
         "--latency-seconds", "1", "--latency-warmup", "3", "--json", str(out)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "records/s" in proc.stdout

    rows = json.loads(out.read_text())
    assert isinstance(rows, list) and rows
    for row in rows:
        assert set(row) == ROW_KEYS, row
        assert row["workload"] == "W1"
        for key in ("records", "seconds", "records_per_s", "peak_rss_mb", "p50_ms", "p99_ms"):
            assert row[key] is None or isinstance(row[key], (int, float)), (key, row)
    by_system = {r["system"]: r for r in rows}
    assert set(systems.split(",")) <= set(by_system)
    for name in systems.split(","):
        assert by_system[name]["records"] == 2000
        assert by_system[name]["records_per_s"] > 0
        assert by_system[name]["peak_rss_mb"] > 0
    # PSS divides shared pages among their sharers: never above the summed RSS
    assert 0 < by_system["streamsql"]["peak_pss_mb"] <= by_system["streamsql"]["peak_rss_mb"]

    meta = json.loads(out.with_name("bench.meta.json").read_text())
    assert meta["records"] == 2000 and len(meta["loadavg_start"]) == 3
    # a writing system reports the records it wrote (W1 is done at exactly the reference's count);
    # the ceilings only read
    expected = meta["workloads"]["W1"]["expected_outputs"]
    assert isinstance(expected, int) and expected > 0
    assert by_system["streamsql"]["outputs"] == expected
    assert by_system["ceiling-raw"]["outputs"] is None and by_system["ceiling-json"]["outputs"] is None
    if _has_matplotlib():
        assert out.with_suffix(".png").stat().st_size > 0


def _has_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def test_a_stalled_watcher_recounts_the_topic_and_reports_what_it_missed(bootstrap, topic_name) -> None:  # type: ignore[no-untyped-def]
    """The output watcher's recount (its consumer stalled at the topic's end with records never
    received): a new consumer reads the whole topic; the records the watcher missed are counted
    and reported, and the run ends at the watcher's last receipt."""
    from benchmarks.measure import OutputWatcher
    from streamsql.kafka.admin import KafkaAdmin

    topic = topic_name("recount")
    admin = KafkaAdmin(bootstrap)
    try:
        admin.create_topic(topic, partitions=2)
        for i in range(10):
            admin.produce(topic, key=str(i).encode(), value=b"v", flush=False)
        admin.flush()
    finally:
        admin.close()
    watcher = OutputWatcher(bootstrap, topic, expected=10)
    watcher.count = 7  # as if three records never reached its consumer
    assert watcher._recount([0, 1]) is True
    assert (watcher.count, watcher.missed) == (10, 3)
    assert OutputWatcher(bootstrap, topic, expected=11)._recount([0, 1]) is False  # still short: no end


def test_w4_over_partitions_lands_where_its_reference_expects(bootstrap: str, topic_name) -> None:  # type: ignore[no-untyped-def]
    """The scale-out benchmark writes W4's keyless batches round robin over the partitions; its
    reference names each batch by the (partition, offset) the transform will read it at, so every
    message must land exactly there."""
    from benchmarks.__main__ import produce
    from benchmarks.scaleout import scaled
    from benchmarks.workloads import WORKLOADS
    from streamsql import samples
    from streamsql.kafka.admin import KafkaAdmin

    w = scaled(WORKLOADS["W4"], 3)
    topic = topic_name("w4rr")
    _updates, final, _seconds = produce(bootstrap, topic, w, 12, round_robin=True)
    assert final is not None and len(final) == 12
    admin = KafkaAdmin(bootstrap)
    try:
        records = admin.read_all(topic)
    finally:
        admin.close()
    sent = [value for _key, value, _ts in w.generate(12, w.seed)]
    assert len(records) == 12
    for rec in records:
        assert rec.value == sent[rec.offset * 3 + rec.partition], (rec.partition, rec.offset)
        batch = samples.enrich_flight_batch(rec.value, rec.partition, rec.offset, rec.timestamp)[0].split(",")[6]
        assert batch in final
