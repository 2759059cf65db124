"""The ``python`` Spark starts on a local master: asks the zygote to fork the process instead.

Spark starts every Python process it needs as ``<spark.pyspark.python> -m <module> [args]`` — the
worker daemon, one planning daemon per kind of planning call, and a *source runner* for every
streaming query over a Python data source — each a new interpreter importing PySpark, pandas,
pyarrow and our Kafka code before doing anything (~0.5 CPU-s, ~90 MB private memory each).
On a local master ``spark.pyspark.python`` is an executable copy of this file (written by
:mod:`streamsql.runtime.zygote`, with ``SOCKET`` and ``PYTHON`` filled in and run by the real
interpreter with ``-I -S``: nothing but the standard library, a few milliseconds). It hands the
request to the zygote — argv, environment, working directory, and its standard descriptors over
``SCM_RIGHTS`` — and the zygote forks a child with all of that already imported. The launcher
stays as the process Spark knows: it forwards the signals Spark sends (``destroy()`` is SIGTERM)
to the child, ignores a terminal's Ctrl-C (the driver's to act on), and exits with the child's
status; if it is killed outright, the zygote sees its connection close and kills the child.

Anything that is not ``-m module``, or a zygote that cannot be reached before the fork, makes
the launcher ``exec`` the real interpreter with the same arguments: the same process Spark would
have started, only slower. Standard library only: this file runs without ``site``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys
import time

#: filled in when the executable copy is written
SOCKET = ""
PYTHON = sys.executable

_INT = struct.Struct("!i")


def _exec_real(args: list[str]) -> None:
    os.execv(PYTHON, [PYTHON, *args])


def _read_int(conn: socket.socket) -> int | None:
    data = b""
    while len(data) < _INT.size:
        chunk = conn.recv(_INT.size - len(data))
        if not chunk:
            return None
        data += chunk
    return int(_INT.unpack(data)[0])


def _exit_like(status: int) -> None:
    """Leave the way the child left: by the same signal, or with the same code."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def main(args: list[str]) -> None:
    if len(args) < 2 or args[0] != "-m" or not SOCKET:
        _exec_real(args)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(SOCKET)
        request = json.dumps({"argv": args[1:], "env": dict(os.environ), "cwd": os.getcwd()}).encode()
        socket.send_fds(conn, [b"F"], [0, 1, 2])
        conn.sendall(_INT.pack(len(request)) + request)
        pid = _read_int(conn)
    except OSError:
        pid = None
    if pid is None:  # nothing was forked: be the process ourselves
        conn.close()
        _exec_real(args)
        return
    # the child writes to our stdout now; Spark must see it end when the child's copy closes
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 1)
    os.close(devnull)
    child = pid
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, lambda signum, _frame: os.kill(child, signum))
    # SIGINT comes from a terminal's Ctrl-C, sent to the driver's whole process group (Spark
    # never sends it): the driver stops its queries; a worker killed first only fails them
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        status = _read_int(conn)
    except OSError:
        status = None
    if status is None:  # the zygote went away: wait for the child ourselves
        while True:
            try:
                os.kill(child, 0)
            except ProcessLookupError:
                os._exit(1)
            time.sleep(0.2)
    _exit_like(status)


if __name__ == "__main__":
    main(sys.argv[1:])
