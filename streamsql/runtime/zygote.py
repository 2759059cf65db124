"""One pre-imported Python process that forks every Python process Spark starts on a local master.

Why: Spark starts a new interpreter for its worker daemon, for each kind of planning call (five
kinds, each its own daemon) and for every streaming query's *source runner*; each imports
PySpark, pandas, pyarrow and our Kafka code first. A source runner's imports were ~0.5 CPU-s of
every query's start (the QTT corpus starts ~2,000 queries; the suite hundreds), and each daemon
held ~90 MB of imported modules of its own. Here those modules are imported once, in this
process; the launcher Spark runs as its ``python`` (:mod:`streamsql.runtime.python_launcher`)
asks it for a process, and it forks one with everything already imported, sharing those pages
copy-on-write (:func:`gc.freeze` keeps the collector from touching, and so copying, them).
``ps`` shows each child with the command line Spark asked for (``setproctitle``).

The child becomes the process Spark asked for: the launcher's standard descriptors (received
over ``SCM_RIGHTS``), environment, working directory, ``sys.argv``, and ``sys.path`` with the
environment's ``PYTHONPATH`` in front; default signal handlers; then ``runpy`` runs the module as
``__main__``, as ``python -m`` would. Fork safety is the worker daemon's
(:mod:`streamsql.runtime.worker_daemon`): nothing imported here starts Spark, a Kafka client,
or a thread that a forked child would miss.

This process is single-threaded: one loop (``selectors``) accepts requests, reaps children
(SIGCHLD wakes it through a pipe) and reports each child's wait status to its launcher; a
launcher's connection closing before its child ended (the launcher was killed) kills the child.
It leaves when its standard input reaches end of file (the driver that started it is gone) or
on SIGTERM; it runs in its own session, so a terminal's Ctrl-C reaches the driver only.

Local masters only, and only when the user did not choose the workers' Python
(``spark.pyspark.python``/``PYSPARK_PYTHON``); ``STREAMSQL_ZYGOTE=0`` turns it off.
"""

from __future__ import annotations

import atexit
import json
import os
import runpy
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import traceback
from pathlib import Path
from typing import Any

from streamsql.runtime.config import switched_on
from streamsql.runtime.worker_daemon import PRELOADED as WORKER_MODULES
from streamsql.runtime.worker_daemon import preload

#: the worker daemon's modules, and what a streaming query's source runner and the planning
#: calls import (the modules Spark runs as ``__main__`` are run fresh, never preloaded)
PRELOADED = (
    *WORKER_MODULES,
    "pyspark.sql.datasource",
    "pyspark.sql.datasource_internal",
    "pyspark.sql.streaming.datasource",
    "pyspark.worker_util",
    "streamsql.kafka.datasource",
    "setproctitle",
)

_INT = struct.Struct("!i")
_MAX_REQUEST = 16 * 1024 * 1024
_lock = threading.Lock()
_started: dict[str, Any] = {}


def enabled() -> bool:
    return switched_on("STREAMSQL_ZYGOTE")


def ensure_started() -> str | None:
    """Start this process's zygote once and return the path of its launcher (an executable to
    give Spark as ``spark.pyspark.python``), or ``None`` when it cannot run here."""
    with _lock:
        if "launcher" in _started:
            proc = _started["process"]
            if proc.poll() is None:
                return str(_started["launcher"])
            _started.clear()
        workdir = Path(tempfile.mkdtemp(prefix="streamsql-python-"))
        sock_path = workdir / "zygote.sock"
        launcher = workdir / "python"
        if len(_shebang()) > 120 or len(str(sock_path)) > 100:  # the kernel's and AF_UNIX's limits
            shutil.rmtree(workdir, ignore_errors=True)
            return None
        write_launcher(launcher, sock_path)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        env["PYTHONUNBUFFERED"] = "YES"  # as Spark starts its workers
        proc = subprocess.Popen([sys.executable, "-m", __name__, str(sock_path)], stdin=subprocess.PIPE,
                                env=env, start_new_session=True)
        _started.update(process=proc, launcher=launcher, workdir=workdir)
        atexit.register(_stop, proc, workdir)
        return str(launcher)


def running_pid() -> int | None:
    """The pid of this process's zygote while it runs."""
    proc = _started.get("process")
    return proc.pid if proc is not None and proc.poll() is None else None


def _shebang() -> str:
    """The launcher's first line: this interpreter, isolated (``-I``) and without ``site`` (``-S``)."""
    return f"#!{sys.executable} -IS\n"


def write_launcher(path: Path, sock_path: Path) -> None:
    """Write the executable launcher at ``path``: :mod:`streamsql.runtime.python_launcher` for
    the zygote listening at ``sock_path``, run by this interpreter without ``site``."""
    source = Path(__file__).with_name("python_launcher.py").read_text()
    source = source.replace('SOCKET = ""', f"SOCKET = {str(sock_path)!r}", 1)
    source = source.replace("PYTHON = sys.executable", f"PYTHON = {sys.executable!r}", 1)
    path.write_text(_shebang() + source)
    path.chmod(0o755)


def _stop(proc: subprocess.Popen[bytes], workdir: Path) -> None:
    try:
        if proc.stdin is not None:
            proc.stdin.close()  # end of file: the zygote leaves
        proc.wait(5)
    except Exception:  # noqa: BLE001 - leaving anyway
        proc.kill()
    shutil.rmtree(workdir, ignore_errors=True)


# --- the zygote process ---------------------------------------------------------------------

def _read_exact(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("launcher closed its connection mid-request")
        data += chunk
    return data


def _read_request(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    _, fds, _, _ = socket.recv_fds(conn, 1, 3)
    if len(fds) != 3:
        for fd in fds:
            os.close(fd)
        raise ConnectionError(f"expected 3 descriptors, got {len(fds)}")
    (size,) = _INT.unpack(_read_exact(conn, _INT.size))
    if not 0 < size <= _MAX_REQUEST:
        raise ConnectionError(f"bad request size {size}")
    return json.loads(_read_exact(conn, size)), fds


def _set_title(title: str) -> None:
    """What ``ps`` and ``/proc/<pid>/cmdline`` show: the command Spark asked for, not ours."""
    try:
        import setproctitle
    except ImportError:  # an optional nicety: the process works the same without it
        return
    setproctitle.setproctitle(title)


def _become(request: dict[str, Any], fds: list[int], keep_closed: list[int]) -> None:
    """In the forked child: turn into ``python -m <argv[0]> <argv[1:]>`` for the launcher.
    Never returns."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGQUIT):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for fd in keep_closed:
            try:
                os.close(fd)
            except OSError:
                pass
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        _set_title(" ".join([sys.executable, "-m", *request["argv"]]))  # before the environment changes
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        front = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in sys.path]
        sys.path[:0] = front
        module, *args = request["argv"]
        sys.modules.pop(module, None)
        sys.argv = [module, *args]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if e.code is not None and not isinstance(e.code, int):
            print(e.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - what python -m would print
        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)


def serve(sock_path: str, modules: tuple[str, ...] = PRELOADED) -> None:
    """The zygote's loop (see the module docstring), after importing ``modules``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(sock_path)
    listener.listen(128)
    preload(modules)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    stopping = False

    def on_term(*_: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)  # the wake-up pipe ends the select
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, "accept")
    sel.register(wake_r, selectors.EVENT_READ, "wake")
    sel.register(sys.stdin.fileno(), selectors.EVENT_READ, "parent")
    children: dict[int, socket.socket] = {}  # child pid -> its launcher's connection
    pid_of: dict[int, int] = {}  # connection fd -> child pid

    def reap() -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = children.pop(pid, None)
            if conn is not None:
                pid_of.pop(conn.fileno(), None)
                try:
                    sel.unregister(conn)
                except (KeyError, ValueError):
                    pass
                try:
                    conn.sendall(_INT.pack(status))
                except OSError:
                    pass
                conn.close()

    while not stopping:
        for key, _ in sel.select():
            what = key.data
            if what == "wake":
                try:
                    while os.read(wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
                reap()
            elif what == "parent":
                if not os.read(sys.stdin.fileno(), 512):
                    stopping = True
            elif what == "accept":
                conn, _ = listener.accept()
                conn.settimeout(10)
                try:
                    request, fds = _read_request(conn)
                except (OSError, ValueError) as exc:
                    print(f"streamsql zygote: bad request: {exc}", file=sys.stderr)
                    conn.close()
                    continue
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    _become(request, fds, [listener.fileno(), wake_r, wake_w, sys.stdin.fileno(),
                                           conn.fileno(), sel.fileno(), *(c.fileno() for c in children.values())])
                for fd in fds:
                    os.close(fd)
                try:
                    conn.sendall(_INT.pack(pid))
                except OSError:
                    pass
                conn.settimeout(None)
                children[pid] = conn
                pid_of[conn.fileno()] = pid
                sel.register(conn, selectors.EVENT_READ, "launcher")
            else:  # a launcher's connection: it sends nothing more, so this is its end
                gone = key.fileobj
                assert isinstance(gone, socket.socket)
                pid = pid_of.pop(gone.fileno(), 0)
                sel.unregister(gone)
                if pid:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    children.pop(pid, None)
                gone.close()
        reap()
    listener.close()
    try:
        os.unlink(sock_path)
    except OSError:
        pass


if __name__ == "__main__":
    serve(sys.argv[1], tuple(m for m in sys.argv[2].split(",") if m) if len(sys.argv) > 2 else PRELOADED)
    sys.stderr.flush()
    # no interpreter finalization: it would tear down the preloaded C++ libraries (Arrow's
    # allocators, librdkafka) for nothing, with children forked from them possibly still running
    os._exit(0)
