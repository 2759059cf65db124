"""Headless runner: ``streamsql run FILE.sql`` (ksqlDB's headless mode).

Statements run in order. Persistent queries keep running until interrupted; with ``until_idle``
the runner processes what the source topics hold, through every chain of queries, and exits 0
(for CI). Push-query rows print as they arrive. A failing statement prints its error (with the
statement text) and the runner exits non-zero after stopping its queries cleanly.

Running the same file again against the same cluster and data directory is idempotent: the
command log restores the catalog, identical statements are kept, and each persistent query
resumes from its checkpoint.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from streamsql.errors import StreamsqlError
from streamsql.runtime import results as r
from streamsql.runtime.engine import Engine
from streamsql.runtime.supervisor import QuerySupervisor
from streamsql.sql import parse
from streamsql.surfaces.render import render, row_line


def run_file(engine: Engine, path: Path, until_idle: bool, out: TextIO | None = None,
             stop: threading.Event | None = None, statements_done: Callable[[], object] | None = None) -> int:
    """``out``: where results go, ``sys.stdout`` as it is when called (a default bound at import
    would keep whatever stream was ``sys.stdout`` then, closed later under a test's capture)."""
    text = path.read_text(encoding="utf-8")
    return run_script(engine, text, until_idle, out, stop, statements_done)


def run_script(engine: Engine, text: str, until_idle: bool, out: TextIO | None = None,
               stop: threading.Event | None = None, statements_done: Callable[[], object] | None = None) -> int:
    """``statements_done``: called once every statement has run and printed its result, while
    the queries run on (the live progress display starts there, below the results)."""
    out = out if out is not None else sys.stdout
    stop = stop or threading.Event()
    try:
        statements = parse(text, variables=engine.session.variables, custom_types=engine.catalog.types)
    except StreamsqlError as e:
        print(f"Error: {e}", file=out)
        return 1
    for stmt in statements:
        if stop.is_set():
            break
        try:
            result = engine.execute_statement(stmt)
        except StreamsqlError as e:
            print(f"Error in statement: {stmt.text}\n  {e}", file=out, flush=True)
            return 1
        if isinstance(result, r.RowStream):
            _print_rows(result, out, stop, until_idle)
        else:
            print(render(result), file=out, flush=True)
    if until_idle:
        if statements_done is not None:
            statements_done()
        try:
            engine.wait_until_idle()
        except StreamsqlError as e:
            print(f"Error: {e}", file=out, flush=True)
            return 1
        return 0
    if engine.queries:
        print(f"Running {len(engine.queries)} persistent query(ies); Ctrl-C to stop.", file=out, flush=True)
        if statements_done is not None:
            statements_done()
        # a query that fails (Kafka away for a while, a worker that could not start) is restarted
        # from its checkpoint with a growing back-off, as the server and ksqlDB do; each failure
        # is reported once
        supervisor = QuerySupervisor(engine)
        reported: set[tuple[str, str]] = set()
        while not stop.is_set():
            stop.wait(1.0)
            for qid, message in engine.failed_queries():
                if (qid, message) not in reported:
                    reported.add((qid, message))
                    print(f"Query {qid} failed: {message}; restarting it from its checkpoint", file=out, flush=True)
            supervisor.check()
    return 0


def _print_rows(stream: r.RowStream, out: TextIO, stop: threading.Event, until_idle: bool) -> None:
    """Print rows as they arrive until the stream ends, the user interrupts, or (--until-idle,
    push query without LIMIT) no row came for a while."""
    if stream.kind != "print":
        print("|" + "|".join(name for name, _ in stream.columns) + "|", file=out, flush=True)
    idle_limit = 5.0 if until_idle and stream.limit is None and stream.kind != "pull" else None
    idle = 0.0
    try:
        while not stop.is_set():
            row = stream.poll(0.25)
            if row is None:
                break
            if row is r.RowStream.TIMEOUT:
                idle += 0.25
                if idle_limit is not None and idle >= idle_limit:
                    break
                continue
            idle = 0.0
            print(row[0] if stream.kind == "print" else row_line(stream.columns, row), file=out, flush=True)
    except StreamsqlError as e:
        print(f"Error: {e}", file=out, flush=True)
    finally:
        stream.close()
    if stream.limit_reached:
        print("Limit Reached", file=out, flush=True)


def install_interrupt(stop: threading.Event) -> None:
    """First Ctrl-C/SIGTERM asks the runner to stop cleanly; a second one exits at once."""

    def handler(signum: int, _frame: object) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
