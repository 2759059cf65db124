"""Background processes a data directory owns — the local broker, its object store, the local
server — each found through a JSON record in that directory.

A command starts such a process when none runs and leaves it running for the next command, so
every one of them needs the same few pieces: a record written atomically and read defensively
(a damaged record must never name pid 0 or 1), a lock so two commands starting at once share
one process, a liveness check that a recycled pid does not fool (the process's command line must
name a marker of its own, such as its data directory), and a stop that asks first and kills
after a grace period. They live here, once.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class RecordFile:
    """``<directory>/<name>.json``, the record of one background process, and its lock file
    ``<name>.lock``."""

    def __init__(self, directory: str | Path, name: str) -> None:
        self.directory = Path(directory)
        self.path = self.directory / f"{name}.json"
        self.lock_path = self.directory / f"{name}.lock"

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the record's lock (exclusive, across processes) for the body."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def read(self) -> dict[str, Any] | None:
        """The record's fields, or None when there is none or it is damaged (no object, no pid
        above 1: a pid of 0 or -1 would name a process group or every process)."""
        try:
            fields = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(fields, dict):
            return None
        pid = fields.get("pid")
        return fields if isinstance(pid, int) and not isinstance(pid, bool) and pid > 1 else None

    def write(self, fields: dict[str, Any]) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(fields), encoding="utf-8")
        tmp.replace(self.path)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def is_process(pid: int, marker: str) -> bool:
    """Whether ``pid`` is alive, ours, and the process meant: its command line contains
    ``marker`` (a pid reused by another process after a restart is not mistaken for it). Without
    /proc (macOS) a live pid is taken at its word."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):  # gone, or another user's: not ours
        return False
    if Path("/proc/self").exists():
        try:
            return marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:  # gone between the two checks
            return False
    return pid_running(pid)


def pid_running(pid: int) -> bool:
    """Alive and not a zombie (a background process's parent may be this very process, in tests:
    it is reaped here)."""
    with contextlib.suppress(ChildProcessError):
        done, _status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    if stat.exists():
        with contextlib.suppress(OSError):
            return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return True


def terminate(pid: int, grace_s: float, kill_wait_s: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if ``pid`` still runs after ``grace_s``; returns once it is gone
    (or ``kill_wait_s`` after the SIGKILL)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            if not pid_running(pid):
                return
            time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + kill_wait_s
        while time.monotonic() < deadline and pid_running(pid):
            time.sleep(0.05)
