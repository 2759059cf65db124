"""``streamsql run --progress`` (and on a terminal by default): what the queries are doing,
updated every few seconds on standard error — per query its state, micro-batches, last rate and
consumer lag (``runtime/progress.py``). On a terminal one line is rewritten in place; otherwise
(``--progress`` into a file or a CI log) a line is printed per interval. The last state is
printed when the run ends."""

from __future__ import annotations

import shutil
import sys
import threading
from typing import TYPE_CHECKING, TextIO

from streamsql.errors import StreamsqlError

if TYPE_CHECKING:
    from streamsql.runtime import results as r
    from streamsql.runtime.engine import Engine


def status_line(queries: list[r.QueryDescription]) -> str:
    """One line: ``QUERY STATE batch N, R rows/s, lag L`` per query, ``|``-separated."""
    parts = []
    for q in queries:
        text = f"{q.id} {q.state}"
        stats = q.stats
        if stats.get("batchId") is not None:
            text += f" batch {stats['batchId']}"
        rate = stats.get("processedRowsPerSecond")
        if rate is not None:
            text += f", {float(rate):,.0f} rows/s"
        if "consumerTotalLag" in stats:
            text += f", lag {stats['consumerTotalLag']:,}"
        parts.append(text)
    return " | ".join(parts) if parts else "no persistent queries"


class ProgressDisplay:
    def __init__(self, engine: Engine, out: TextIO | None = None, interval_s: float = 2.0,
                 live: bool | None = None) -> None:
        self.engine = engine
        #: standard error as it is when the display starts (not when this module was imported)
        self.out = out if out is not None else sys.stderr
        self.interval_s = interval_s
        #: rewrite one line in place (a terminal) or print a line per interval
        self.live = self.out.isatty() if live is None else live
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="streamsql-progress", daemon=True)

    def start(self) -> ProgressDisplay:
        self._thread.start()
        return self

    def _line(self) -> str:
        try:
            return status_line(self.engine.inspection.describe_queries())
        except StreamsqlError as e:  # Kafka unreachable for the lag: say so, keep going
            return f"progress unavailable: {e}"

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._show(self._line())

    def _show(self, line: str) -> None:
        if self.live:
            width = shutil.get_terminal_size((120, 20)).columns
            self.out.write("\r\x1b[2K" + line[: width - 1])
        else:
            self.out.write(f"progress: {line}\n")
        self.out.flush()

    def stop(self) -> None:
        """Stop updating and print the final state on a line of its own."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(timeout=10)
        if self.live:
            self.out.write("\r\x1b[2K")
        self.out.write(f"progress: {self._line()}\n")
        self.out.flush()
