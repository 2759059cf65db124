"""The benchmark workloads are deterministic, their SQL parses, and their Python references count
what a correct pipeline must emit (no broker or Spark: the harness run itself is the smoke test)."""

from __future__ import annotations

import json
import re

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


def test_w4_batches_are_the_sources_gzipped_csv_unkeyed_and_counted_per_quote() -> None:
    import gzip

    w = WORKLOADS["W4"]
    records = list(w.generate(200, w.seed))
    lines = [gzip.decompress(v).decode().splitlines() for _, v, _ in records]
    assert all(k is None for k, _, _ in records) and w.partitions == 1  # the offset names the batch
    assert all(len(line.split(",")) == 5 for batch in lines for line in batch)
    ref = w.reference()
    assert sum(ref(k, v) for k, v, _ in records) == sum(len(b) for b in lines)
    sql = w.sql("in_topic", "out_topic")
    assert {"'out_topic_batches'", "'out_topic_enriched'", "'out_topic'"} <= set(re.findall(r"'out_topic\w*'", sql))
    assert "'cflight_" not in sql.replace("'cflight_searches/'", "")  # every topic is the run's


def test_profile_summary_groups_samples_by_process_kind_and_function(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from benchmarks.profile import summarize

    raw = tmp_path / "w.raw"
    raw.write_text(
        'process 0:"python -m benchmarks";process 1:"python -m pyspark.daemon";read (/x/site-packages/streamsql/kafka/source.py:10);'
        'decode (/x/site-packages/streamsql/formats/json_format.py:5) 30\n'
        'process 0:"python -m benchmarks";process 1:"python -m pyspark.daemon";read (/x/site-packages/streamsql/kafka/source.py:12) 10\n'
        'process 2:"python -m benchmarks.child streamsql";process (/home/user/streamsql/streamsql/runtime/aggregator.py:1) 60\n')
    report = summarize(raw)
    assert "60.0%  driver (streamsql engine)" in report and "40.0%  spark python worker" in report
    assert "75.0%  decode (streamsql/formats/json_format.py)" in report  # self time within the workers
    assert "100.0%  read (streamsql/kafka/source.py)" in report  # inclusive: both lines of read()


# --- completion by final state (aggregations that emit changes) ----------------------------------

def _final_of(name: str, count: int) -> tuple[list, dict]:
    w = WORKLOADS[name]
    records = list(w.generate(count, w.seed))
    final = w.final()
    for k, v, ts in records:
        final.add(k, v, ts)
    return records, final.result()


def test_only_the_emit_changes_aggregations_complete_by_final_state() -> None:
    assert {n for n, w in WORKLOADS.items() if w.final is not None} == {"W2", "W4", "Q4", "Q5", "Q7"}
    assert all((w.output_state is not None) == w.record_cache == (w.final is not None) for w in WORKLOADS.values())


def test_w4_final_state_is_quotes_and_cheapest_price_per_batch() -> None:
    import gzip
    import hashlib
    import uuid

    records, final = _final_of("W4", 300)
    assert len(final) == 300
    for offset, (_k, v, _) in enumerate(records[:20]):  # one partition: the n-th message is at offset n
        prices = [float(line.split(",")[3]) for line in gzip.decompress(v).decode().splitlines()]
        batch = str(uuid.UUID(bytes=hashlib.md5(f"cflight_searches/0/{offset}".encode()).digest()))
        assert final[batch] == [len(prices), min(prices)]
    assert json.loads(json.dumps(final)) == final  # passed to the child as JSON, unchanged


def test_w4_outputs_of_both_systems_normalise_alike() -> None:
    from benchmarks.workloads import W4

    streamsql = W4.output_state(b"batch-3-00000001", b"batch-3-00000001,101.25,7")  # DELIMITED, like its source
    assert W4.output_state(b"b", b"b,1.0E7,2") == ("b", [2, 1e7])  # Java's DOUBLE text
    quix = W4.output_state(b"batch-3-00000001",
                           b'{"BATCH_UUID":"batch-3-00000001","CHEAPEST_QUOTE":101.25,"QUOTES":7}')
    assert streamsql == quix == ("batch-3-00000001", [7, 101.25])
    assert W4.output_state(b"batch-3-00000001", None) == ("batch-3-00000001", None)  # a tombstone never matches


def test_w2_final_state_is_the_seed_heavy_hitters_per_service_window_whatever_the_order() -> None:
    import random

    from benchmarks.workloads import W2_WINDOW_MS, _seed_module

    records, final = _final_of("W2", 12_000)  # 10 ms apart: 2 windows (one partial) x 4 services
    assert 8 <= len(final) <= 12
    words: dict[str, list[str]] = {}
    for _k, v, ts in records:
        d = json.loads(v)
        words.setdefault(f"{d['service']}@{ts // W2_WINDOW_MS * W2_WINDOW_MS}", []).extend(d["msg"].lower().split())
    assert set(words) == set(final)
    hh = _seed_module("sketches").HeavyHitters
    for key, ws in words.items():
        assert len(final[key]) == 10 and final[key][0][1] >= final[key][-1][1]
        # a system may see a window's words in another order (streamsql repartitions log_words):
        # the count-min estimates and this input's top 10 do not depend on it
        shuffled = ws[:]
        random.Random(1).shuffle(shuffled)
        h = hh(10)
        for word in shuffled:
            h.add(word)
        assert [[i, e] for i, e in h.top()] == final[key]


def test_w2_windowed_key_and_value_normalise_to_the_final_state_form() -> None:
    from benchmarks.workloads import W2, windowed_key

    key = windowed_key(b"api", 1_700_000_040_000)
    assert key == b"api" + (1_700_000_040_000).to_bytes(8, "big")
    value = json.dumps({"TOP_WORDS": [{"ITEM": "w0", "ESTIMATE": 12}, {"ITEM": "w1", "ESTIMATE": 5}]}).encode()
    assert W2.output_state(key, value) == ("api@1700000040000", [["w0", 12], ["w1", 5]])
    with pytest.raises(ValueError):
        W2.output_state(b"api", value)  # not windowed


def test_final_state_is_done_when_every_key_latest_record_holds_its_final_value() -> None:
    from benchmarks.measure import FinalState, OutputWatcher
    from benchmarks.workloads import W4

    def rec(batch: str, quotes: int, cheapest: float) -> tuple[bytes, bytes]:
        return batch.encode(), f"{batch},{cheapest},{quotes}".encode()

    state = FinalState({"a": [3, 1.5], "b": [1, 9.0]}, W4.output_state)
    state.update([rec("a", 1, 2.0), rec("b", 1, 9.0)])
    assert not state.done and state.pending == {"a"}
    state.update([rec("a", 3, 1.5)])
    assert state.done
    state.update([(b"a", None)])  # a later record that differs (here a tombstone): pending again
    assert not state.done and state.last_mismatch == ("a", None, [3, 1.5])
    state.update([rec("a", 3, 1.5), rec("zzz", 1, 1.0)])
    assert state.done
    assert state.summary() == {"final_keys": 2, "final_keys_at_final_value": 2, "unexpected_keys": 1,
                               "unexpected_key_examples": ["zzz"]}
    # the watcher's completion: every condition given must hold; none given is never done
    w = OutputWatcher("unused:9092", "t", None, final=state)
    assert w.complete()
    w.expected = 10
    assert not w.complete() and "0 records of 10 expected; 2 of 2 keys at their final value" in w.progress()
    assert not OutputWatcher("unused:9092", "t", None).complete()


def test_rows_and_ratios_carry_outputs_and_the_nocache_system() -> None:
    from benchmarks import report

    rows = [report.row("W4", "streamsql", 100, 2.0, outputs=80),
            report.row("W4", "streamsql-nocache", 100, 4.0, outputs=2000),
            report.row("W4", "quixstreams", 100, 1.0, outputs=2000)]
    assert set(rows[0]) == set(report.ROW_KEYS) and rows[1]["outputs"] == 2000
    text = report.ratios(rows)
    assert "streamsql/quixstreams = 0.50" in text and "streamsql-nocache/quixstreams = 0.25" in text
    assert "2,000" in report.table(rows, 2)


def test_steady_rows_only_where_the_query_reads_the_input_records() -> None:
    from benchmarks.__main__ import rows_for

    res = {"records": 100, "seconds": 10.0, "outputs": 7, "peak_rss_mb": 1.0, "steady_records_per_s": 50.0,
           "steady_rows": 90, "steady_s": 1.8, "input_rows": 100}
    rows = rows_for(WORKLOADS["W1"], "streamsql-nocache", res)
    assert [r["system"] for r in rows] == ["streamsql-nocache", "streamsql-nocache-steady"]
    assert rows[0]["outputs"] == 7 and rows[1]["outputs"] is None
    # W4's query reads a row per quote, W2's aggregation the cutter's words: no steady row
    assert [r["system"] for r in rows_for(WORKLOADS["W4"], "streamsql", {**res, "input_rows": 2_000})] == ["streamsql"]
    assert rows_for(WORKLOADS["W1"], "ceiling-json", res)[0]["outputs"] is None  # ceilings write nothing


# --- Nexmark q3-q8 ------------------------------------------------------------------------------

def _nexmark(count: int) -> list[dict]:
    from benchmarks.workloads import nexmark_events

    return [json.loads(v) for _, v, _ in nexmark_events(count, 6)]


def test_nexmark_events_keep_the_generator_proportions_and_every_join_partner_exists_first() -> None:
    events = _nexmark(5000)
    kinds = [e["event_type"] for e in events]
    assert (kinds.count(0), kinds.count(1), kinds.count(2)) == (100, 300, 4600)  # 1 : 3 : 46
    people: set[int] = set()
    auctions: set[int] = set()
    for e in events:
        member = ("person", "auction", "bid")[e["event_type"]]
        assert [k for k in ("person", "auction", "bid") if e[k] is not None] == [member]
        if e["person"]:
            people.add(e["person"]["id"])
        elif e["auction"]:
            assert e["auction"]["seller"] in people and e["auction"]["dateTime"] < e["auction"]["expires"]
            auctions.add(e["auction"]["id"])
        else:
            assert e["bid"]["auction"] in auctions and e["bid"]["bidder"] in people


def test_nexmark_join_references_count_every_matching_pair() -> None:
    events = _nexmark(20_000)
    people = {e["person"]["id"]: e["person"] for e in events if e["event_type"] == 0}
    auctions = [e["auction"] for e in events if e["event_type"] == 1]
    q3 = sum(1 for a in auctions if a["category"] == 10 and people[a["seller"]]["state"] in ("OR", "ID", "CA"))
    q8 = sum(1 for a in auctions for p in people.values()
             if p["id"] == a["seller"] and abs(p["dateTime"] - a["dateTime"]) <= 10_000)
    for name, want in (("Q3", q3), ("Q8", q8)):
        ref = WORKLOADS[name].reference()
        assert sum(ref(None, json.dumps(e).encode()) for e in events) == want > 0, name


def test_nexmark_aggregations_final_state_and_output_normalisation() -> None:
    import struct

    events = _nexmark(20_000)
    finals = {}
    for name in ("Q4", "Q5", "Q7"):
        final = WORKLOADS[name].final()  # type: ignore[misc]
        for e in events:
            final.add(None, json.dumps(e).encode(), e[("person", "auction", "bid")[e["event_type"]]]["dateTime"])
        finals[name] = final.result()
    bids = [e["bid"] for e in events if e["event_type"] == 2]
    # q5: every bid counts in the 5 hopping windows (10 s by 2 s) that hold it
    assert sum(finals["Q5"].values()) == 5 * len(bids)
    # q7: one maximum per 10-second window, keyed by the grouping constant (event_type 2)
    assert finals["Q7"] == {f"2@{start}": max(b["price"] for b in bids if b["dateTime"] // 10_000 * 10_000 == start)
                            for start in {b["dateTime"] // 10_000 * 10_000 for b in bids}}
    # q4: an average per category of the auctions' highest in-range bid
    assert set(finals["Q4"]) <= {"10", "11", "12", "13", "14"} and all(v > 0 for v in finals["Q4"].values())
    # what streamsql writes (KAFKA keys: BIGINT / INT + the 8-byte window start) normalises to those keys
    assert WORKLOADS["Q5"].output_state(struct.pack(">qq", 1001, 5000), b'{"NUM":3}') == ("1001@5000", 3)  # type: ignore[misc]
    assert WORKLOADS["Q7"].output_state(struct.pack(">iq", 2, 0), b'{"MAXPRICE":9}') == ("2@0", 9)  # type: ignore[misc]
    assert WORKLOADS["Q4"].output_state(struct.pack(">q", 12), b'{"AVG_PRICE":2.5}') == ("12", 2.5)  # type: ignore[misc]


def test_nexmark_per_core_figures_stand_beside_flink() -> None:
    from benchmarks import report

    rows = [report.row("Q5", "streamsql", 1000, 1.0), report.row("Q5", "streamsql-steady", 900, 0.5),
            report.row("Q5", "quixstreams", 1000, 2.0)]
    text = report.nexmark_per_core(rows, {"Q5": 22_000, "Q3": 152_000}, 2)
    assert text.splitlines() == ["Q5: streamsql 500/core, Flink 22,000/core (0.02×)",
                                 "Q5: streamsql-steady 900/core, Flink 22,000/core (0.04×)"]
    assert all(WORKLOADS[n].quix is None and WORKLOADS[n].flink_per_core for n in ("Q3", "Q4", "Q5", "Q7", "Q8"))


@pytest.mark.parametrize("name", ["Q3", "Q4", "Q8"])
def test_nexmark_count_references_do_not_depend_on_the_order_they_read(name: str) -> None:
    """The ceiling reads the two partitions in another order than they were produced."""
    import random

    from benchmarks.workloads import nexmark_events

    values = [v for _, v, _ in nexmark_events(5000, 6)]
    in_order = WORKLOADS[name].reference()
    shuffled = values[:]
    random.Random(1).shuffle(shuffled)
    other = WORKLOADS[name].reference()
    assert sum(in_order(None, v) for v in values) == sum(other(None, v) for v in shuffled) > 0


def test_the_table_filter_emits_a_tombstone_only_for_rows_it_holds_and_its_twin_is_the_stream() -> None:
    from benchmarks.workloads import FS, FT, filter_changes

    assert FT.twin == "FS" and FS.twin is None
    assert list(FT.generate(300, FT.seed)) == list(FS.generate(300, FS.seed))  # the same changes
    passing, failing = json.dumps({"V": 4}).encode(), json.dumps({"V": 9}).encode()
    table, stream = FT.reference(), FS.reference()
    # (key, value, table outputs, stream outputs)
    steps = [(b"a", failing, 0, 0),  # fails, the filtered table never held a: nothing
             (b"a", passing, 1, 1),  # upsert
             (b"a", passing, 1, 1),  # upsert again
             (b"a", failing, 1, 0),  # stops passing: a tombstone
             (b"a", None, 0, 0),  # deleted, not held any more: nothing
             (b"b", passing, 1, 1),
             (b"b", None, 1, 0)]  # deleted while held: a tombstone
    for key, value, want_table, want_stream in steps:
        assert (table(key, value), stream(key, value)) == (want_table, want_stream), (key, value)
    changes = list(filter_changes(1000, 6))
    assert sum(1 for _, v, _ in changes if v is None) == 100
    assert len({k for k, _, _ in changes}) <= 100  # about ten changes per key


def test_the_harness_prints_a_twin_over_its_twin_per_streamsql_row() -> None:
    from benchmarks import report

    rows = [report.row("FT", "streamsql", 1000, 2.0), report.row("FS", "streamsql", 1000, 1.0),
            report.row("FT", "streamsql-steady", 900, 1.0), report.row("FS", "ceiling-raw", 1000, 0.1)]
    assert report.twin_ratios(rows, {"FT": "FS"}) == "FT/FS records/s: streamsql 0.50"
    assert report.twin_ratios(rows, {}) == ""


def test_table_changes_counts_with_the_harness_references() -> None:
    from benchmarks.table_changes import expected

    table, stream = expected(2000, 50)
    assert 0 < stream < table  # the table adds tombstones for rows that stop passing
