"""Keep a terminal for the user: engine logs go to a file of the data directory.

A command that runs an engine has many writers on its standard error besides itself: Spark's
JVM (start-up lines, log4j errors, Java stacks of queries stopped at shutdown), PySpark's Python
workers and source runners (which inherit the JVM's, or the zygote's, standard error and print
``BrokenPipeError`` tracebacks when the JVM goes first), librdkafka's connection messages and
Python's own logging. On a terminal they garble the prompt and the rows, and none of it is
something the user acts on there.

:func:`engine_logs_to_file` therefore points file descriptor 2 — which every process started
later inherits — at ``<data dir>/<command>.log``, and keeps ``sys.stderr`` (what streamsql prints
for the user: notices, errors, progress) on the terminal through a duplicate of the original
descriptor. Python's logging keeps writing to the old stream object, so to the file as well;
an exception that ends a thread is logged there too. Off a terminal (CI, containers, a pipe)
nothing changes: standard error stays one stream, as log collectors expect.
"""

from __future__ import annotations

import io
import logging
import os
import sys
import threading
import time
from pathlib import Path

log = logging.getLogger("streamsql")


def engine_logs_to_file(data_dir: str | Path, command: str) -> Path | None:
    """On a terminal, send this process's descriptor 2 (and so its children's) to
    ``<data_dir>/<command>.log`` and return that path; otherwise change nothing and return None."""
    if not _stderr_is_terminal():
        return None
    path = Path(data_dir) / f"{command}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    terminal = os.dup(2)  # not inherited by children (PEP 446)
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.write(target, f"--- streamsql {command} (pid {os.getpid()}) started {time.strftime('%Y-%m-%d %H:%M:%S')}\n"
             .encode())
    os.dup2(target, 2)
    os.close(target)
    sys.stderr = io.TextIOWrapper(io.FileIO(terminal, "w"), line_buffering=True, errors="backslashreplace")
    threading.excepthook = _log_thread_exception
    return path


def _stderr_is_terminal() -> bool:
    try:
        return os.isatty(2)
    except OSError:
        return False


def _log_thread_exception(args: threading.ExceptHookArgs) -> None:
    """An exception that ended a thread: into the log (a thread a shutdown interrupted is
    nothing the user acts on; a real failure is there with its trace)."""
    if args.exc_type is SystemExit:
        return
    name = args.thread.name if args.thread is not None else "?"
    log.error("thread %s ended with an exception", name,
              exc_info=(args.exc_type, args.exc_value, args.exc_traceback))  # type: ignore[arg-type]


class ErrorCount(logging.Handler):
    """Counts the errors this process logs (for a command's closing summary), from when it is
    attached to the root logger until it is detached."""

    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1

    def __enter__(self) -> ErrorCount:
        logging.getLogger().addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger().removeHandler(self)
