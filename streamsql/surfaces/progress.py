"""``streamsql run --progress`` (and on a terminal by default): what the queries are doing,
updated every few seconds on standard error — per query its state, micro-batches, last rate and
consumer lag (``runtime/progress.py``). On a terminal a line per query, within the terminal's
width, is redrawn in place once the file's statements have run (so it never overwrites their
output); otherwise (``--progress`` into a file or a CI log) one line is printed per interval. The
last state is printed when the run ends."""

from __future__ import annotations

import shutil
import sys
import threading
from typing import TYPE_CHECKING, TextIO

from streamsql.errors import StreamsqlError

if TYPE_CHECKING:
    from streamsql.runtime import results as r
    from streamsql.runtime.engine import Engine


def query_status(q: r.QueryDescription) -> str:
    """``QUERY STATE batch N, R rows/s, lag L``: one query's line."""
    text = f"{q.id} {q.state}"
    stats = q.stats
    if stats.get("batchId") is not None:
        text += f" batch {stats['batchId']}"
    rate = stats.get("processedRowsPerSecond")
    if rate is not None:
        text += f", {float(rate):,.0f} rows/s"
    if "consumerTotalLag" in stats:
        text += f", lag {stats['consumerTotalLag']:,}"
    return text


def status_lines(queries: list[r.QueryDescription]) -> list[str]:
    """A line per query (one line saying there is none when there are none)."""
    return [query_status(q) for q in queries] or ["no persistent queries"]


def status_line(queries: list[r.QueryDescription]) -> str:
    """Every query on one line, ``|``-separated (a log line)."""
    return " | ".join(status_lines(queries))


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
        #: lines of the live block on the terminal now (redrawn in place)
        self._drawn = 0
        self._thread = threading.Thread(target=self._run, name="streamsql-progress", daemon=True)

    def start(self) -> ProgressDisplay:
        self._thread.start()
        return self

    def _lines(self) -> list[str]:
        try:
            return status_lines(self.engine.inspection.describe_queries())
        except StreamsqlError as e:  # Kafka unreachable for the lag: say so, keep going
            return [f"progress unavailable: {e}"]

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._show(self._lines())

    def _show(self, lines: list[str]) -> None:
        """Live: the block of lines drawn last time is redrawn in place, a line per query cut
        to the terminal's width (a longer one would wrap, and the next redraw would miss its
        second half). Otherwise: all queries on one ``progress:`` line per interval."""
        if self.live:
            width = shutil.get_terminal_size((120, 20)).columns
            self.out.write(self._erase() + "".join(f"{line[: width - 1]}\n" for line in lines))
            self._drawn = len(lines)
        else:
            self.out.write(f"progress: {' | '.join(lines)}\n")
        self.out.flush()

    def _erase(self) -> str:
        """Move to the first line drawn last time and clear from there down."""
        return (f"\x1b[{self._drawn}F" if self._drawn else "\r") + "\x1b[J"

    def stop(self) -> None:
        """Stop updating and print the final state (a ``progress:`` line per query)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(timeout=10)
        if self.live:
            self.out.write(self._erase())
            self._drawn = 0
        self.out.write("".join(f"progress: {line}\n" for line in self._lines()))
        self.out.flush()
