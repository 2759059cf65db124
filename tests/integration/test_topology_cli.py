"""``streamsql topology FILE.sql``: seed 000's pipeline planned (nothing runs, no Kafka) and
drawn; every source, query, sink and internal topic is named in the DOT and Mermaid text."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from streamsql.seeds import PIPELINES_DIR
from streamsql.surfaces.cli import main

pytestmark = pytest.mark.integration

SEED = PIPELINES_DIR / "heavy_hitters.sql"


def test_seed_000_pipeline_as_dot_and_mermaid(tmp_path: Path, spark, capsys) -> None:  # type: ignore[no-untyped-def]
    names = ["LOG_LINES", "LOG_WORDS", "HEAVY_HITTERS", "TOP_WORDS", "TOP_WORDS_CHANGES", "TOP_WORD_PLACES",
             "WORD_COUNT_DOCS",  # sources and sinks
             "CSAS_LOG_WORDS_1", "CTAS_HEAVY_HITTERS_2", "CTAS_TOP_WORDS_3", "CSAS_TOP_WORD_PLACES_5",
             "CSAS_WORD_COUNT_DOCS_6",  # queries
             "log_lines", "log_words", "heavy_hitters", "top_words", "top_word_places", "word_count_docs",  # topics
             "default_ksql_processing_log"]  # the internal topic every query reports to
    for fmt in ("dot", "mermaid"):
        out = tmp_path / f"seed.{fmt}"
        assert main(["topology", str(SEED), "--format", fmt, "--output", str(out)]) == 0
        text = out.read_text()
        missing = [n for n in names if n not in text]
        assert not missing, f"{fmt} lacks {missing}"
        assert "Aggregate" in text and "Select" in text  # the queries' steps
        if fmt == "dot":  # step labels wrap: no line of a label is wider than a few words
            labels = re.findall(r'label="((?:[^"\\]|\\.)*)"', text)
            assert max(len(line) for label in labels for line in label.split("\\n")) <= 60, labels
    # the picture reads on a screen: long step labels wrap, queries stack top to bottom (it was
    # 4,625 px wide with each step on one line, left to right)
    if shutil.which("dot"):
        png = tmp_path / "seed.png"
        assert main(["topology", str(SEED), "--format", "png", "--output", str(png)]) == 0
        width = int.from_bytes(png.read_bytes()[16:20], "big")  # the PNG header's IHDR width
        assert 0 < width <= 1600, width
    assert main(["topology", str(SEED), "--query", "CTAS_TOP_WORDS_3"]) == 0
    text = capsys.readouterr().out
    assert "Query CTAS_TOP_WORDS_3: LOG_WORDS → TOP_WORDS" in text and "CTAS_HEAVY_HITTERS_2" not in text
    assert "window TUMBLING (SIZE 1 MINUTE, GRACE PERIOD 1 DAY)" in text  # durations as the statement says them


def test_bad_arguments_are_named(tmp_path: Path, spark, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["topology", str(tmp_path / "nope.sql")]) == 2
    assert "file not found" in capsys.readouterr().err
    assert main(["topology", str(SEED), "--query", "CTAS_NOPE_9"]) == 1
    assert "Query with id:CTAS_NOPE_9 does not exist" in capsys.readouterr().err
    bad = tmp_path / "bad.sql"
    bad.write_text("CREATE STREAM s (a INT) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON');\n"
                   "CREATE STREAM t AS SELECT b FROM s;\n")
    assert main(["topology", str(bad)]) == 1
    assert "B" in capsys.readouterr().err
    svg = tmp_path / "seed.svg"
    code = main(["topology", str(SEED), "--format", "svg", "--output", str(svg)])
    if shutil.which("dot") is None:  # Graphviz is optional: the error says how to get it
        assert code == 2 and "needs Graphviz's `dot`" in capsys.readouterr().err
    else:
        assert code == 0 and svg.read_text().lstrip().startswith(("<?xml", "<svg"))
