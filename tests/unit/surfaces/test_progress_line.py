"""The progress display's line (``streamsql run --progress``)."""

from __future__ import annotations

from streamsql.runtime import results as r
from streamsql.surfaces.progress import status_line


def test_status_line_names_state_batch_rate_and_lag() -> None:
    running = r.QueryDescription("CSAS_A_1", "CREATE STREAM A ...", "A", ["S"], "RUNNING", stats={
        "batchId": 7, "processedRowsPerSecond": 12345.6, "consumerTotalLag": 1500})
    starting = r.QueryDescription("CTAS_B_2", "CREATE TABLE B ...", "B", ["S"], "RUNNING")
    failed = r.QueryDescription("CTAS_C_3", "CREATE TABLE C ...", "C", ["S"], "ERROR", stats={"error": "boom"})
    assert status_line([running, starting, failed]) == (
        "CSAS_A_1 RUNNING batch 7, 12,346 rows/s, lag 1,500 | CTAS_B_2 RUNNING | CTAS_C_3 ERROR")
    assert status_line([]) == "no persistent queries"


def test_the_live_display_redraws_a_line_per_query_within_the_terminal_width(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import io
    from types import SimpleNamespace

    from streamsql.surfaces.progress import ProgressDisplay

    monkeypatch.setenv("COLUMNS", "40")
    queries = [r.QueryDescription(f"CSAS_QUERY_NUMBER_{n}", "CREATE STREAM ...", "S", ["T"], "RUNNING",
                                  stats={"batchId": n, "processedRowsPerSecond": 1000.0, "consumerTotalLag": 5})
               for n in range(5)]
    engine = SimpleNamespace(inspection=SimpleNamespace(describe_queries=lambda: queries))
    out = io.StringIO()
    display = ProgressDisplay(engine, out=out, live=True)  # type: ignore[arg-type]
    display._show(display._lines())
    first = out.getvalue()
    assert first.startswith("\r\x1b[J")
    drawn = first[len("\r\x1b[J"):].splitlines()
    assert len(drawn) == 5 and all(len(line) <= 39 for line in drawn)
    assert drawn[0] == "CSAS_QUERY_NUMBER_0 RUNNING batch 0, 1,"  # cut at 39 columns
    display._show(display._lines())
    assert out.getvalue()[len(first):].startswith("\x1b[5F\x1b[J")  # back to the block's first line
    # never started (no thread): stop() erases the block and prints the final state
    display._thread = SimpleNamespace(join=lambda timeout: None)  # type: ignore[assignment]
    end = len(out.getvalue())
    display.stop()
    final = out.getvalue()[end:]
    assert final.startswith("\x1b[5F\x1b[J")
    assert final.count("\nprogress: CSAS_QUERY_NUMBER_") == 4 and final.endswith("lag 5\n")
