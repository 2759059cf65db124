"""The benchmark workloads are deterministic, their SQL parses, and their Python references count
what a correct pipeline must emit (no broker or Spark: the harness run itself is the smoke test)."""

from __future__ import annotations

import json

import pytest

from benchmarks.workloads import Q2_MODULUS, W3_WINDOW_MS, WORKLOADS, w3_keys
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
    assert all(json.loads(r[1])["ts"] > last_reading_ts + W3_WINDOW_MS for r in sentinels)
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
