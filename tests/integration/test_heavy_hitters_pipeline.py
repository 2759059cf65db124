"""Seed pipeline 000 (queries/heavy_hitters.sql, then queries/heavy_hitters_elasticsearch.sql) end
to end on the session broker and SparkSession: JSON log lines → SPLIT_WORDS + EXPLODE →
HEAVY_HITTERS per 1-minute window, exact counts per word per window, and those counts as
``{name, count, time}`` documents in a real search server process — checked against counts
computed here."""

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
              for name in ("log_lines", "log_words", "heavy_hitters", "word_counts", "word_count_docs")}
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


def run_pipeline(engine, topics: dict[str, str], text: str, sink_text: str, search_url: str) -> None:  # type: ignore[no-untyped-def]
    from tests.integration.test_elasticsearch_sink import documents

    rng = random.Random(0)
    vocabulary = [f"w{i}" for i in range(60)]
    weights = [1 / (rank ** 1.3) for rank in range(1, 61)]
    lines, exact = [], Counter()
    for i in range(240):  # two minutes of log lines, 2 per second
        ts = 1_700_000_040_000 + i * 500  # starts on a minute boundary
        words = rng.choices(vocabulary, weights=weights, k=rng.randint(3, 8))
        msg = " ".join(w.upper() if j == 0 else w for j, w in enumerate(words))  # cutter lower-cases
        service = "api" if i % 3 else None
        lines.append((None, json.dumps({"service": service, "msg": msg}), ts))
        for w in words:
            exact[(service or "all", w, ts - ts % MINUTE)] += 1
    lines.append((None, "not json at all", lines[-1][2]))  # a bad line: processing log, pipeline goes on
    engine.admin.create_topic(topics["log_lines"], 1)
    produce(engine.admin, topics["log_lines"], lines)

    # statement by statement, idle in between: each query start spawns a Python source runner
    # that must connect back to Spark within 10 s (several at once can miss it on 2 busy cores)
    for stmt in parse(text):
        engine.execute_statement(stmt)
        engine.wait_until_idle()
    engine.execute(sink_text)
    engine.wait_until_idle()

    per_word: Counter = Counter()
    for (_service, word, window), n in exact.items():
        per_word[(word, window)] += n
    counts = {k: v["TOTAL"] for k, v in latest(engine.admin, topics["word_counts"]).items()}
    assert counts == dict(per_word)

    hitters = latest(engine.admin, topics["heavy_hitters"])
    windows = sorted({w for (_, _, w) in exact})
    assert set(hitters) == {(s, w) for (s, _, w) in exact}
    for (service, window), value in hitters.items():
        truth = Counter({word: n for (s, word, w), n in exact.items() if s == service and w == window})
        top = value["TOP_WORDS"]
        assert len(top) == 10
        for entry in top:
            assert entry["ESTIMATE"] >= truth[entry["ITEM"]]
        true_top5 = {w for w, _ in truth.most_common(5)}
        assert len(true_top5 & {e["ITEM"] for e in top}) >= 4, (service, window, top, truth.most_common(10))
    assert len(windows) == 2

    # the search server holds one document per word per minute with the exact count
    index = topics["word_count_docs"].lower()
    docs = documents(search_url, index)
    assert docs == {f"{word}+{window}": {"name": word, "count": n, "time": window}
                    for (word, window), n in per_word.items()}
    mapping = httpx.get(f"{search_url}/{index}/_mapping", timeout=30).json()[index]["mappings"]["properties"]
    assert mapping["time"]["type"] == "date" and mapping["name"]["type"] == "keyword"
    assert engine.failed_queries() == []
