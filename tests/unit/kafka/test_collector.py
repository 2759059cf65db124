"""The cycle collector runs in streamsql's own thread once a process makes a Kafka client
(streamsql/kafka/collector.py): never in one of librdkafka's threads."""

from __future__ import annotations

import gc
import os
import threading
import time

from streamsql.kafka.collector import collect_in_own_thread, collector_thread_running


class _Cycle:
    freed_in: list[str] = []

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        _Cycle.freed_in.append(threading.current_thread().name)


def test_garbage_cycles_are_freed_by_the_collecting_thread() -> None:
    collect_in_own_thread()
    assert not gc.isenabled()  # no allocation anywhere else starts a collection
    assert collector_thread_running()
    _Cycle.freed_in.clear()
    for _ in range(2000):  # past the first generation's threshold (700)
        _Cycle()
    deadline = time.monotonic() + 5
    while len(_Cycle.freed_in) < 2000 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(_Cycle.freed_in) == 2000
    assert set(_Cycle.freed_in) == {"streamsql-gc"}


def test_turning_the_collector_back_on_does_not_move_collections_elsewhere() -> None:
    collect_in_own_thread()
    gc.enable()
    deadline = time.monotonic() + 5
    while gc.isenabled() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not gc.isenabled()


def test_a_forked_child_collects_as_usual_until_it_makes_a_client() -> None:
    collect_in_own_thread()
    pid = os.fork()
    if pid == 0:  # the child: report through the exit status only
        ok = gc.isenabled() and not collector_thread_running()
        collect_in_own_thread()
        ok = ok and not gc.isenabled() and collector_thread_running()
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert collector_thread_running()  # the parent's is untouched


def test_every_admin_client_is_made_by_admin_client() -> None:
    """An ``AdminClient`` made elsewhere would leave its process's collector where it was."""
    import ast
    from pathlib import Path

    import streamsql

    root = Path(streamsql.__file__).parent
    made_elsewhere = []
    for path in root.rglob("*.py"):
        if path.name == "collector.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
                if name == "AdminClient":
                    made_elsewhere.append(f"{path.relative_to(root)}:{node.lineno}")
    assert made_elsewhere == []


def test_the_shared_admin_client_is_one_per_configuration() -> None:
    from streamsql.kafka.collector import shared_admin_client

    a = shared_admin_client({"bootstrap.servers": "127.0.0.1:9", "log_level": 0})
    assert shared_admin_client({"log_level": 0, "bootstrap.servers": "127.0.0.1:9"}) is a
    assert shared_admin_client({"bootstrap.servers": "127.0.0.1:7", "log_level": 0}) is not a


def test_a_stopped_clusters_shared_admin_clients_are_dropped_and_no_other() -> None:
    """Kept for stopped embedded brokers, each held ~5 descriptors: a test process of a hundred
    brokers passed ``select``'s 1,024 (session 38)."""
    from streamsql.kafka.collector import forget_shared_admin_clients, shared_admin_client

    gone = [shared_admin_client({"bootstrap.servers": "127.0.0.1:5", "log_level": n}) for n in (0, 1)]
    kept = shared_admin_client({"bootstrap.servers": "127.0.0.1:55", "log_level": 0})
    forget_shared_admin_clients("127.0.0.1:5")
    assert shared_admin_client({"bootstrap.servers": "127.0.0.1:5", "log_level": 0}) is not gone[0]
    assert shared_admin_client({"bootstrap.servers": "127.0.0.1:55", "log_level": 0}) is kept
