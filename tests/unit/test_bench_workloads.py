"""The benchmark workloads are deterministic, their SQL parses, and their Python references count
what a correct pipeline must emit (no broker or Spark: the harness run itself is the smoke test)."""

from __future__ import annotations

import json

import pytest

from benchmarks.workloads import Q2_MODULUS, W3_GRACE_MS, W3_WINDOW_MS, WORKLOADS, w3_keys
from streamsql.sql import parse


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_workload_is_deterministic_and_its_sql_parses(name: str) -> None:
    w = WORKLOADS[name]
    first = list(w.generate(500, w.seed))
    assert first == list(w.generate(500, w.seed))
    assert len(first) == 500
    assert first != list(w.generate(500, w.seed + 1))
    statements = parse(w.sql("in_topic", "out_topic"))
    assert len(statements) >= 2
    assert any("out_topic" in s.text for s in statements)


def test_w3_reference_counts_each_sensor_window_once_and_ignores_sentinels() -> None:
    w = WORKLOADS["W3"]
    records = list(w.generate(5000, w.seed))
    keys = w3_keys(5000)
    sentinels = [r for r in records if json.loads(r[1])["reading"] == 0.0 and json.loads(r[1]).get("sentinel")]
    assert len(sentinels) == keys
    last_reading_ts = max(json.loads(r[1])["ts"] for r in records if not json.loads(r[1]).get("sentinel"))
    # every reading window closes (stream time reaches its end + grace), none expires unemitted
    # (the sentinels stay within the window store's retention of that last window)
    closes = last_reading_ts // W3_WINDOW_MS * W3_WINDOW_MS + W3_WINDOW_MS + W3_GRACE_MS
    assert all(closes <= json.loads(r[1])["ts"] <= closes + 1_000 for r in sentinels)
    pairs = {(k, json.loads(v)["ts"] // W3_WINDOW_MS) for k, v, _ in records if not json.loads(v).get("sentinel")}
    ref = w.reference()
    assert sum(ref(k, v) for k, v, _ in records) == len(pairs)


def test_nexmark_q2_reference_matches_its_filter() -> None:
    w = WORKLOADS["Q2"]
    records = list(w.generate(20000, w.seed))
    ref = w.reference()
    expected = sum(1 for _, v, _ in records if json.loads(v)["auction"] % Q2_MODULUS == 0)
    assert expected > 0
    assert sum(ref(k, v) for k, v, _ in records) == expected
    bid = json.loads(records[0][1])
    assert set(bid) == {"auction", "bidder", "price", "channel", "url", "dateTime", "extra"}


def test_w2_reference_counts_one_update_per_word() -> None:
    w = WORKLOADS["W2"]
    records = list(w.generate(300, w.seed))
    assert {k for k, _, _ in records} <= {s.encode() for s in ("api", "auth", "billing", "search")}
    words = sum(len(json.loads(v)["msg"].split()) for _, v, _ in records)
    ref = w.reference()
    assert sum(ref(k, v) for k, v, _ in records) == words > 300 * 3 - 1


def test_w4_batches_are_gzipped_csv_keyed_by_batch_and_counted_per_quote() -> None:
    import gzip

    w = WORKLOADS["W4"]
    records = list(w.generate(200, w.seed))
    lines = [gzip.decompress(v).decode().splitlines() for _, v, _ in records]
    assert all(line.split(",")[6] == k.decode() for (k, _, _), batch in zip(records, lines) for line in batch)
    assert all(len(line.split(",")) == 8 for batch in lines for line in batch)
    ref = w.reference()
    assert sum(ref(k, v) for k, v, _ in records) == sum(len(b) for b in lines)


def test_profile_summary_groups_samples_by_process_kind_and_function(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from benchmarks.profile import summarize

    raw = tmp_path / "w.raw"
    raw.write_text(
        'process 0:"python -m benchmarks";process 1:"python -m pyspark.daemon";read (/x/site-packages/streamsql/kafka/source.py:10);'
        'decode (/x/site-packages/streamsql/formats/json_format.py:5) 30\n'
        'process 0:"python -m benchmarks";process 1:"python -m pyspark.daemon";read (/x/site-packages/streamsql/kafka/source.py:12) 10\n'
        'process 2:"python -m benchmarks.child streamsql";process (/work/main/streamsql/runtime/aggregator.py:1) 60\n')
    report = summarize(raw)
    assert "60.0%  driver (streamsql engine)" in report and "40.0%  spark python worker" in report
    assert "75.0%  decode (streamsql/formats/json_format.py)" in report  # self time within the workers
    assert "100.0%  read (streamsql/kafka/source.py)" in report  # inclusive: both lines of read()
