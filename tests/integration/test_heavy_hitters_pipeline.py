"""Seed pipeline 000 (queries/heavy_hitters.sql, then queries/heavy_hitters_elasticsearch.sql) end
to end on the session broker and SparkSession: log lines with a text field → the cutter
(SPLIT_WORDS + EXPLODE) → HEAVY_HITTERS per service and per 1-minute window → the window's top 10
as ``{name, count, time}`` documents in a real search server process. The lines arrive in two
rounds into the same windows, the second pushing new words up, so words leave a window's top 10
and the index must hold only the final one; checked against counts and sketches computed here."""

from __future__ import annotations

import json
import random
import struct
from collections import Counter
from pathlib import Path

import httpx
import pytest

from streamsql.seeds import PIPELINES_DIR
from streamsql.sql import parse
from tests.integration.test_engine import produce

pytestmark = pytest.mark.integration
SCRIPT = PIPELINES_DIR / "heavy_hitters.sql"
SINK_SCRIPT = SCRIPT.with_name("heavy_hitters_elasticsearch.sql")
#: the index template the containerised stack provisions (docker/docker-compose.yml, search-setup)
TEMPLATE = Path(__file__).resolve().parents[2] / "docker" / "search" / "word-counts-template.json"
MINUTE = 60_000


def windowed(key: bytes) -> tuple[str, int]:
    return key[:-8].decode(), struct.unpack(">q", key[-8:])[0]


def latest(admin, topic: str) -> dict[tuple[str, int], dict]:  # type: ignore[no-untyped-def]
    out = {}
    for rec in admin.read_all(topic):
        out[windowed(rec.key)] = json.loads(rec.value) if rec.value is not None else None
    return out


def test_heavy_hitters_pipeline(engine, topic_name):  # type: ignore[no-untyped-def]
    from osmem_server import OsmemServer

    topics = {name: topic_name(name)
              for name in ("log_lines", "log_words", "heavy_hitters", "top_words", "top_word_places",
                           "word_count_docs")}
    text, sink_text = SCRIPT.read_text(), SINK_SCRIPT.read_text()
    for name, unique in topics.items():
        text = text.replace(f"'{name}'", f"'{unique}'")
        sink_text = sink_text.replace(f"'{name}'", f"'{unique}'")
    search = OsmemServer.start()
    engine.session.variables["elasticsearch_url"] = search.url  # streamsql run --define elasticsearch_url=…
    try:
        # as the stack does before the sink creates the index: `time` mapped as a date
        put = httpx.put(f"{search.url}/_index_template/word_counts", content=TEMPLATE.read_bytes(),
                        headers={"Content-Type": "application/json"}, timeout=30)
        assert put.status_code == 200, put.text
        run_pipeline(engine, topics, text, sink_text, search.url)
    finally:
        search.close()


def log_lines(rng: random.Random, vocabulary: list[str], weights: list[float], start: int, count: int,
              exact: Counter, order: list[tuple[int, str]]) -> list[tuple[None, str, int]]:
    """``count`` lines, 2 per second from ``start``, each 3-8 words drawn with ``weights``; every
    word is counted in ``exact`` by (service, word, window) and appended to ``order`` with its
    window, as the cutter emits them (lower-cased)."""
    lines = []
    for i in range(count):
        ts = start + i * 500
        words = rng.choices(vocabulary, weights=weights, k=rng.randint(3, 8))
        msg = " ".join(w.upper() if j == 0 else w for j, w in enumerate(words))  # cutter lower-cases
        service = "api" if i % 3 else None
        lines.append((None, json.dumps({"service": service, "msg": msg}), ts))
        for w in words:
            exact[(service or "all", w, ts - ts % MINUTE)] += 1
            order.append((ts - ts % MINUTE, w))
    return lines


def run_pipeline(engine, topics: dict[str, str], text: str, sink_text: str, search_url: str) -> None:  # type: ignore[no-untyped-def]
    from streamsql.seeds.functions.sketches import HeavyHitters
    from tests.integration.test_elasticsearch_sink import documents

    rng = random.Random(0)
    exact: Counter = Counter()
    order: list[tuple[int, str]] = []
    start = 1_700_000_040_000  # a minute boundary: two minutes of lines
    vocabulary = [f"w{i}" for i in range(60)]
    first = log_lines(rng, vocabulary, [1 / (rank ** 1.3) for rank in range(1, 61)], start, 240, exact, order)
    first.append((None, "not json at all", first[-1][2]))  # a bad line: processing log, pipeline goes on
    engine.admin.create_topic(topics["log_lines"], 1)
    produce(engine.admin, topics["log_lines"], first)

    # statement by statement, idle in between: each query start spawns a Python source runner
    # that must connect back to Spark within 10 s (several at once can miss it on 2 busy cores)
    for stmt in parse(text):
        engine.execute_statement(stmt)
        engine.wait_until_idle()
    engine.execute(sink_text)
    engine.wait_until_idle()
    index = topics["word_count_docs"].lower()
    first_top: dict[int, set[str]] = {}
    for doc in documents(search_url, index).values():
        first_top.setdefault(doc["time"], set()).add(doc["name"])
    assert len(first_top) == 2 and all(len(names) == 10 for names in first_top.values())

    # the second round, late into the same two windows: new words outnumber most of the first top 10
    late = log_lines(rng, [f"x{i}" for i in range(8)], [1.0] * 8, start, 240, exact, order)
    produce(engine.admin, topics["log_lines"], late)
    engine.wait_until_idle()

    windows = sorted({w for (_, _, w) in exact})
    assert len(windows) == 2
    per_window: dict[int, Counter] = {w: Counter() for w in windows}
    for (_service, word, window), n in exact.items():
        per_window[window][word] += n
    sketches = {w: HeavyHitters(10) for w in windows}  # the sketch of every window, fed in the cutter's order
    for window, word in order:
        sketches[window].add(word)

    # the search server holds, per window, exactly the sketch's final top 10 with its estimates
    docs = documents(search_url, index)
    assert docs == {f"{window}+{place}": {"name": word, "count": estimate, "time": window}
                    for window in windows
                    for place, (word, estimate) in enumerate(sketches[window].top(), start=1)}
    dropped = 0
    for window in windows:
        held = {d["name"]: d["count"] for d in docs.values() if d["time"] == window}
        truth = per_window[window]
        assert len(held) == 10  # N = 10 distinct words
        assert all(count >= truth[name] for name, count in held.items())  # count-min never undercounts
        assert {w for w, _ in truth.most_common(3)} <= set(held)  # the true top 3
        dropped += len(first_top[window] - set(held))
    assert dropped > 0  # words did leave a top 10: their documents are gone, no other words remain

    mapping = httpx.get(f"{search_url}/{index}/_mapping", timeout=30).json()[index]["mappings"]["properties"]
    assert mapping["time"]["type"] == "date" and mapping["name"]["type"] == "keyword"

    # statement 2, per service: 10 words per (service, window), estimates never below the truth
    hitters = latest(engine.admin, topics["heavy_hitters"])
    assert set(hitters) == {(s, w) for (s, _, w) in exact}
    for (service, window), value in hitters.items():
        truth = Counter({word: n for (s, word, w), n in exact.items() if s == service and w == window})
        top = value["TOP_WORDS"]
        assert len(top) == 10
        assert all(entry["ESTIMATE"] >= truth[entry["ITEM"]] for entry in top)
        assert {w for w, _ in truth.most_common(3)} <= {e["ITEM"] for e in top}, (service, window, top)
    assert engine.failed_queries() == []
