"""A reused Python worker gives back what its last task freed (runtime/worker_daemon.py)."""

from __future__ import annotations

import os

from streamsql.runtime import worker_daemon


def _resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_memory_a_task_freed_in_the_middle_of_glibcs_heap_goes_back_to_the_system() -> None:
    # 1 KB blocks go through malloc (not Python's small-object allocator); keeping every 64th
    # pins the heap's top, so glibc's own trimming of the top cannot return the freed ones
    blocks = [bytes(1000) + bytes([i % 256]) for i in range(200_000)]
    kept = blocks[::64]
    del blocks
    before = _resident_bytes()
    worker_daemon.release_freed_memory()
    after = _resident_bytes()
    assert kept  # still referenced, so the heap stayed as large as the task made it
    assert before - after > 100 * 2**20, (before, after)


def test_the_daemons_task_runner_releases_after_each_task_even_a_failing_one() -> None:
    released = []
    original = worker_daemon.release_freed_memory
    worker_daemon.release_freed_memory = lambda: released.append(True)  # type: ignore[assignment]
    try:
        ok = worker_daemon._releasing(lambda sock, authenticated: 0)
        assert ok(None, True) == 0

        def failing(sock: object, authenticated: bool) -> int:
            raise RuntimeError("task failed")

        try:
            worker_daemon._releasing(failing)(None, True)
        except RuntimeError as exc:
            assert str(exc) == "task failed"
        else:
            raise AssertionError("the task's error was swallowed")
    finally:
        worker_daemon.release_freed_memory = original  # type: ignore[assignment]
    assert released == [True, True]
