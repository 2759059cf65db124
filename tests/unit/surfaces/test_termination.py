"""SIGTERM ends a command even while its main thread is inside kafka-python's event loop, which
catches BaseException around its tasks (session 38: a `streamsql test` run survived a CI
timeout's SIGTERM that landed there, its server, broker and JVM left running)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest

from streamsql.surfaces.termination import inside_swallowing_loop

#: A command whose main thread is inside a kafka-python task (as the raw producer's connect was)
#: when SIGTERM arrives; it prints what it reached.
_CHILD = textwrap.dedent("""
    import signal, sys, time
    from kafka.net.selector import NetworkSelector
    {install}
    selector = NetworkSelector()
    def task():
        print("in task", flush=True)
        time.sleep(1.5)
    selector.call_soon(task)
    try:
        selector.poll(timeout_ms=100)
        print("after the loop", flush=True)
        time.sleep(2)
        print("survived", flush=True)
    finally:
        print("cleanup", flush=True)
""")


def _run(install: str) -> tuple[int, list[str]]:
    child = subprocess.Popen([sys.executable, "-c", _CHILD.format(install=install)], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "in task"
    time.sleep(0.3)
    child.send_signal(signal.SIGTERM)
    out, _ = child.communicate(timeout=30)
    return child.returncode, out.split()


def test_sigterm_inside_kafka_pythons_loop_exits_through_the_finally_blocks_once_out_of_it() -> None:
    code, lines = _run("from streamsql.surfaces.termination import exit_on_signal; exit_on_signal(signal.SIGTERM, 143)")
    # the exit waits for the task (the loop would swallow it) and comes at the next re-check
    # after the loop returned: within the 2 s sleep, never after it
    assert code == 143 and "survived" not in lines and lines[-1] == "cleanup", (code, lines)


def test_a_plain_handler_there_is_swallowed() -> None:
    """Why termination.py exists: the same command with ``sys.exit`` as its handler runs on."""
    code, lines = _run("signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))")
    assert (code, lines) == (0, ["after", "the", "loop", "survived", "cleanup"])


def test_only_frames_of_the_swallowing_modules_count() -> None:
    def called_from(module: str) -> bool:
        scope: dict[str, object] = {"__name__": module, "sys": sys, "inside": inside_swallowing_loop}
        exec("def probe():\n    return inside(sys._getframe())\n", scope)  # noqa: S102 - a frame of that module
        return scope["probe"]()  # type: ignore[operator,no-any-return]

    assert called_from("kafka.net.selector") and called_from("kafka")
    assert not called_from("streamsql.kafka.sink") and not called_from("kafkaesque")
    assert not inside_swallowing_loop(sys._getframe())


if sys.platform == "win32":  # pragma: no cover - SIGALRM and SIGTERM delivery are POSIX
    pytestmark = pytest.mark.skip("POSIX signals")
