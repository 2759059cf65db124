"""The engine's claim on its data directory: one engine per directory, one Kafka cluster per state.

A data directory holds an engine's catalog (``commands.jsonl``), query checkpoints and table
stores. Two engines on one directory would replay the same commands and run the same queries on
the same checkpoints, each undoing the other (issue #18); so the engine holds an exclusive lock
(``engine.lock``, an ``flock`` that the kernel releases when the process dies, however it dies)
from :meth:`DataDirLock.acquire` to :meth:`DataDirLock.release`. The data directory's local broker
(``kafka/broker.py``) is shared by every command and has its own lock.

The state also belongs to one Kafka cluster (``cluster.json``): its checkpoints name offsets of
that cluster's topics. When the cluster changes, the state is reset (:func:`check_cluster`) only if
the old cluster was a broker whose topics ended with it (the local or an embedded broker, in
memory): nothing it refers to exists any more. State written against any other cluster is never
deleted: the engine refuses to start and says how to go on.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sys
import time
from pathlib import Path

from streamsql.errors import DataDirError
from streamsql.runtime import paths

LOCK_FILE = "engine.lock"
CLUSTER_FILE = "cluster.json"


class DataDirLock:
    """An exclusive claim on a data directory's engine state, held while the engine runs."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.path = data_dir / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the claim, or raise DataDirError naming the process that holds it."""
        if self._fd is not None:
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise DataDirError(
                f"the data directory {self.data_dir} is in use by another streamsql engine ({holder}); one "
                f"engine per data directory, or each would undo the other's queries. To work beside a running "
                f"pipeline, run it on the data directory's local server (`streamsql server start`, then `streamsql "
                f"run FILE` sends the file to it) and watch it with `streamsql shell`, which connects to that "
                f"server; or stop the other command first.") from None
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "command": " ".join(sys.argv),
                                 "since": time.strftime("%Y-%m-%d %H:%M:%S")}).encode())
        self._fd = fd

    def release(self) -> None:
        """Give the claim up (the file stays: removing it would race with a new claimant)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    @property
    def held(self) -> bool:
        return self._fd is not None


def _holder(fd: int) -> str:
    """What the lock file says about its holder: ``pid N, `command`, since T``."""
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
        return f"pid {int(info['pid'])}, `{info.get('command', '?')}`, since {info.get('since', '?')}"
    except (ValueError, KeyError, TypeError, OSError):
        return "a process that is starting"


def check_cluster(data_dir: Path, cluster_id: str, bootstrap_servers: str) -> str | None:
    """Whether ``data_dir``'s state may run on the cluster ``cluster_id``. None: it belongs to
    that cluster (or there is none yet). A notice: it belongs to an earlier in-memory broker's
    cluster, whose topics are gone, and the caller resets it (then :func:`record_cluster`).
    DataDirError: it belongs to another cluster that may still exist, and nothing is deleted."""
    path = data_dir / CLUSTER_FILE
    try:
        known = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(known, dict) or known.get("cluster_id") in (None, cluster_id):
        return None
    # a record from before this rule has no "ephemeral": its state was reset then, as now
    if not known.get("ephemeral", True):
        was = f" at {known['bootstrap_servers']}" if known.get("bootstrap_servers") else ""
        raise DataDirError(
            f"the data directory {data_dir} holds the catalog and query checkpoints of Kafka cluster "
            f"{known['cluster_id']}{was}, and {bootstrap_servers} is cluster {cluster_id}; nothing was changed. "
            f"Use another --data-dir for this cluster, or, to start this one afresh here, delete "
            f"{data_dir / 'commands.jsonl'}, {data_dir / paths.CHECKPOINTS}, {data_dir / paths.TABLES} and {path}.")
    return (f"new Kafka cluster {cluster_id} (was {known['cluster_id']}: its topics are gone, as when the "
            f"local broker was stopped): reset the catalog, checkpoints and table stores in {data_dir}")


def reset_state(data_dir: Path) -> None:
    """Delete what the data directory keeps per query and table (checkpoints, table stores): a
    new cluster's catalog starts empty, and a table store left from the old one would answer
    pull queries with another cluster's rows. The command log is reset by its owner."""
    for area in (paths.CHECKPOINTS, paths.TABLES):
        shutil.rmtree(data_dir / area, ignore_errors=True)


def record_cluster(data_dir: Path, cluster_id: str, bootstrap_servers: str, ephemeral: bool) -> None:
    """Bind ``data_dir``'s state to ``cluster_id``. ``ephemeral``: the cluster's topics end with
    its broker (the local or an embedded broker), so a later change of cluster may reset it."""
    (data_dir / CLUSTER_FILE).write_text(json.dumps({"cluster_id": cluster_id, "bootstrap_servers": bootstrap_servers,
                                                     "ephemeral": ephemeral}), encoding="utf-8")
