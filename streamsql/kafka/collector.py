"""Python's cycle collector, run in a thread of our own once a process makes a Kafka client.

librdkafka calls into Python from threads of its own: confluent-kafka delivers the result of an
admin operation (``create_topics``, ``list_offsets``, ...) from the client's background thread.
CPython starts a cycle collection in whichever thread's allocation crosses the collector's
threshold, so now and then in such a thread; if that collection frees a librdkafka client — above
all the client whose thread it is — librdkafka aborts the process ("calling rd_kafka_destroy()
from librdkafka owned thread is prohibited") or crashes it (CI runs of sessions 33 and 35;
confluent-kafka-python #1761, #2129). A client reaches cyclic garbage more easily than it looks:
an exception raised out of one of its methods keeps that method's frame, and so the client, and an
exception that a frame it references keeps is a cycle (``pytest.raises`` makes one every time).

So once a process creates an admin client (:func:`admin_client`), the automatic collector is off and a
daemon thread applies CPython's generational policy, with the thresholds of
:func:`gc.get_threshold`, every few milliseconds: garbage is only ever freed in a Python thread
that no C library owns. Explicit :func:`gc.collect` calls work as before. A forked child gets the
automatic collector back (the thread does not survive a fork) until it creates an admin client.
"""

from __future__ import annotations

import gc
import os
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

#: how often the thread looks at the collector's counts: CPython looks at every allocation, so
#: garbage cycles live a few milliseconds longer than they would
CHECK_INTERVAL_S = 0.01
#: a full collection waits at least this long after the previous one, and at least 20 times that
#: one's duration: CPython instead skips one while fewer than a quarter of the long-lived objects
#: are new, a count Python code cannot read
FULL_COLLECTION_MIN_GAP_S = 1.0

_lock = threading.Lock()
_owner_pid: int | None = None  # the process whose collector thread runs


def collect_in_own_thread() -> None:
    """Turn the automatic collector off and start the collecting thread (once per process).

    Does nothing if the application had turned the collector off itself: no collection then runs
    anywhere, which is as safe."""
    global _owner_pid
    with _lock:
        if _owner_pid == os.getpid():
            return
        if not gc.isenabled():
            return
        _owner_pid = os.getpid()
        gc.disable()
        threading.Thread(target=_collect_forever, name="streamsql-gc", daemon=True).start()


def collector_thread_running() -> bool:
    """Whether this process's collections run in the collecting thread."""
    return _owner_pid == os.getpid() and any(t.name == "streamsql-gc" for t in threading.enumerate())


def _collect_forever() -> None:
    last_full_at = time.monotonic()
    last_full_s = 0.0
    while True:
        time.sleep(CHECK_INTERVAL_S)
        if gc.isenabled():  # someone turned it back on: collections would again run anywhere
            gc.disable()
        t0, t1, t2 = gc.get_threshold()
        c0, c1, c2 = gc.get_count()
        if t0 == 0 or c0 <= t0:  # threshold 0: the application wants no automatic collection
            continue
        now = time.monotonic()
        if c2 > t2 and now - last_full_at >= max(FULL_COLLECTION_MIN_GAP_S, 20 * last_full_s):
            gc.collect(2)
            last_full_at, last_full_s = time.monotonic(), time.monotonic() - now
        elif c1 > t1:
            gc.collect(1)
        else:
            gc.collect(0)


def _after_fork_in_child() -> None:
    global _owner_pid
    if _owner_pid is not None and _owner_pid != os.getpid():
        _owner_pid = None
        gc.enable()  # the parent's thread is not here: collect as usual until a client is made


os.register_at_fork(after_in_child=_after_fork_in_child)


def admin_client(config: Mapping[str, Any]) -> AdminClient:
    """A confluent-kafka ``AdminClient``, once this process collects garbage in the collecting
    thread. Every ``AdminClient`` streamsql creates is made here: its operations' results are
    what librdkafka delivers from a thread of its own (a ``Producer``'s delivery reports and a
    ``Consumer``'s callbacks are served by ``poll``/``flush`` in the calling thread, so the Spark
    task workers, which make only those, keep CPython's collector as it is)."""
    from confluent_kafka.admin import AdminClient

    collect_in_own_thread()
    return AdminClient(dict(config))


_shared: dict[tuple[int, tuple[tuple[str, str], ...]], AdminClient] = {}
_shared_lock = threading.Lock()


def shared_admin_client(config: Mapping[str, Any]) -> AdminClient:
    """This process's one ``AdminClient`` for ``config`` (plain settings, no callbacks), made on
    first use and kept until the process ends or an embedded broker at its address stops
    (:func:`forget_shared_admin_clients`). An admin client is thread-safe, and the
    callers that list offsets or check a topic now and then (every range read to its end, every
    source's offset runner, every topic check) would otherwise each make and destroy a
    librdkafka instance — threads, connections and a teardown — for one request: the QTT
    ratchet made hundreds a minute from its parallel cases, and session 37's CI crashed
    (SIGSEGV) inside ``list_offsets`` of one made a moment before."""
    key = (os.getpid(), tuple(sorted((str(k), str(v)) for k, v in config.items())))
    with _shared_lock:
        client = _shared.get(key)
        if client is None:
            client = _shared[key] = admin_client(config)
        return client


def forget_shared_admin_clients(bootstrap: str) -> None:
    """Drop this process's shared admin clients of the cluster at ``bootstrap`` (an embedded
    broker that stopped): each holds ~5 file descriptors and retries the gone cluster until the
    process ends. A caller still holding one keeps it until it lets go. (A test process starts
    and stops a hundred brokers; kept, their clients took it past ``select``'s 1,024 descriptors
    in session 38's random-order suite run.)"""
    with _shared_lock:
        for key in [k for k in _shared if ("bootstrap.servers", bootstrap) in k[1]]:
            del _shared[key]
