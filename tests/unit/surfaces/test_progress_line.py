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
