"""A reused Python worker gives back what a task that grew it freed (runtime/worker_daemon.py)."""

from __future__ import annotations

import pytest

from streamsql.runtime import worker_daemon


def test_memory_a_task_freed_in_the_middle_of_glibcs_heap_goes_back_to_the_system() -> None:
    # 1 KB blocks go through malloc (not Python's small-object allocator); keeping every 64th
    # pins the heap's top, so glibc's own trimming of the top cannot return the freed ones
    blocks = [bytes(1000) + bytes([i % 256]) for i in range(200_000)]
    kept = blocks[::64]
    del blocks
    before = worker_daemon.resident_bytes()
    worker_daemon.release_freed_memory()
    after = worker_daemon.resident_bytes()
    assert kept  # still referenced, so the heap stayed as large as the task made it
    assert before - after > 100 * 2**20, (before, after)


def _runner(sizes: list[int], released: list[bool], growth: int) -> tuple[object, list[int]]:
    """A task runner over a fake resident size: each task adds its growth to the size."""
    seen: list[int] = []

    def measure() -> int:
        return sizes[-1]

    def task(sock: object, authenticated: bool) -> int:
        sizes.append(sizes[-1] + growth)
        seen.append(sizes[-1])
        return 0

    def release() -> None:
        released.append(True)
        sizes.append(sizes[0])

    runner = worker_daemon.releasing_after_growth(task, growth=32, measure=measure, release=release)
    return runner, seen


def test_a_task_that_grew_the_worker_is_followed_by_a_release() -> None:
    sizes, released = [100], []  # type: ignore[var-annotated]
    runner, _ = _runner(sizes, released, growth=33)
    assert runner(None, True) == 0  # type: ignore[operator]
    assert released == [True] and sizes[-1] == 100


def test_tasks_that_leave_the_worker_the_same_size_release_nothing() -> None:
    # a steady stream of similar batches (W1): the worker reuses what it freed
    sizes, released = [100], []  # type: ignore[var-annotated]
    runner, _ = _runner(sizes, released, growth=0)
    for _ in range(5):
        runner(None, True)  # type: ignore[operator]
    runner2, _ = _runner(sizes, released, growth=32)  # grew by exactly the bound: not more
    runner2(None, True)  # type: ignore[operator]
    assert released == []


def test_a_failing_task_that_grew_the_worker_still_releases_and_its_error_goes_on() -> None:
    released = []

    def failing(sock: object, authenticated: bool) -> int:
        sizes.append(sizes[-1] + 64)
        raise RuntimeError("task failed")

    sizes = [100]
    runner = worker_daemon.releasing_after_growth(
        failing, growth=32, measure=lambda: sizes[-1], release=lambda: released.append(True))
    with pytest.raises(RuntimeError, match="task failed"):
        runner(None, True)
    assert released == [True]
