"""A signal ends a command with a SystemExit raised where nothing swallows it.

Commands that own processes stop them in ``finally`` blocks: ``streamsql test`` its REST server
(with Spark's JVM), its registry and its embedded broker; ``streamsql broker`` its broker. So
SIGTERM (a CI job's timeout, ``docker stop``, systemd) raises SystemExit in the main thread.
Python runs a signal's handler inside whatever code that thread is executing, and kafka-python
3's event loop — driven on the calling thread by the exact-timestamp writer and the conformance
runner's raw producer — catches BaseException around each of its tasks and only logs it: a
SystemExit raised there is lost and the command runs on with everything it started (session
38: a ``streamsql test`` run ignored SIGTERM; its server, broker and JVM were still up 90 s
later). The handler therefore raises only when no frame of such a loop is on the main thread's
stack; otherwise it re-checks every 50 ms (SIGALRM, which interrupts a waiting ``select``) and
raises once the thread has left the loop. A second signal while the first waits changes nothing;
one after the SystemExit was raised raises again, as a plain handler would.
"""

from __future__ import annotations

import signal
import sys
from types import FrameType

#: modules whose loops catch BaseException: a SystemExit raised under them is logged, not raised
SWALLOWING_MODULES = ("kafka",)
#: how often a deferred exit looks again whether the main thread has left such a loop
RECHECK_S = 0.05


def exit_on_signal(signum: int = signal.SIGTERM, code: int = 143) -> None:
    """On ``signum``, raise ``SystemExit(code)`` in the main thread at the first point outside a
    loop of :data:`SWALLOWING_MODULES` (call from the main thread; uses SIGALRM meanwhile)."""
    pending = False

    def exit_now_or_later(frame: FrameType | None) -> None:
        nonlocal pending
        if inside_swallowing_loop(frame):
            pending = True
            signal.setitimer(signal.ITIMER_REAL, RECHECK_S)
            return
        pending = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        sys.exit(code)

    def on_signal(_signum: int, frame: FrameType | None) -> None:
        exit_now_or_later(frame)

    def on_recheck(_signum: int, frame: FrameType | None) -> None:
        if pending:  # a timer that fired after the exit was raised does nothing
            exit_now_or_later(frame)

    signal.signal(signal.SIGALRM, on_recheck)
    signal.signal(signum, on_signal)


def inside_swallowing_loop(frame: FrameType | None) -> bool:
    """Whether a frame of :data:`SWALLOWING_MODULES` is on the stack from ``frame`` down."""
    while frame is not None:
        name = frame.f_globals.get("__name__")
        if isinstance(name, str) and name.split(".", 1)[0] in SWALLOWING_MODULES:
            return True
        frame = frame.f_back
    return False
