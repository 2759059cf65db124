"""A ``streamsql`` command on a pseudo-terminal, as a user runs it: its standard streams are the
terminal (so it behaves as on one: logs to a file, live progress), and Ctrl-C is what the
terminal sends — SIGINT to the whole foreground process group, Spark's JVM and the Python
processes it started included."""

from __future__ import annotations

import os
import pty
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from tests.support.cli import REPO

#: what must never reach the user's terminal
TRACEBACK = re.compile(r"Traceback \(most recent call last\)|Exception in thread|\bat org\.apache\.|"
                       r"\bat java\.|py4j\.protocol|BrokenPipeError")


class Terminal:
    """``python -m streamsql ARGS`` in a new session whose terminal is a pty; everything it
    writes is kept in :attr:`output`."""

    def __init__(self, *args: str, cwd: Path, columns: int = 100) -> None:
        master, slave = pty.openpty()
        import fcntl
        import struct
        import termios

        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
        env = {k: v for k, v in os.environ.items() if k != "STREAMSQL_BOOTSTRAP_SERVERS"}
        env["PYSPARK_PYTHON"] = sys.executable
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
        env.update(COLUMNS=str(columns), TERM="xterm", PROMPT_TOOLKIT_NO_CPR="1")
        self.proc = subprocess.Popen([sys.executable, "-m", "streamsql", *args], cwd=cwd, env=env,
                                     stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
        os.close(slave)
        self._master = master
        self._lock = threading.Lock()
        self._data = b""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self._master, 65536)
            except OSError:  # the last holder of the terminal closed it
                return
            if not chunk:
                return
            with self._lock:
                self._data += chunk

    @property
    def output(self) -> str:
        with self._lock:
            return self._data.decode("utf-8", "replace")

    def wait_for(self, text: str, timeout_s: float = 180) -> None:
        deadline = time.monotonic() + timeout_s
        while text not in self.output:
            if self.proc.poll() is not None:
                time.sleep(0.2)  # the last bytes
                if text in self.output:
                    return
                raise AssertionError(f"ended (code {self.proc.returncode}) before {text!r}:\n{self.output[-4000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no {text!r} within {timeout_s:.0f} s:\n{self.output[-4000:]}")
            time.sleep(0.1)

    def type(self, text: str) -> None:
        os.write(self._master, text.encode())

    def ctrl_c(self) -> None:
        """What a terminal does on Ctrl-C (with its signal keys on): SIGINT to the foreground
        process group, which is the command's own (it leads a new session)."""
        os.killpg(self.proc.pid, signal.SIGINT)

    def processes(self) -> list[psutil.Process]:
        """The command and everything it started that still runs."""
        root = psutil.Process(self.proc.pid)
        return [root, *root.children(recursive=True)]

    def finish(self, timeout_s: float = 60) -> int:
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"still running {timeout_s:.0f} s later:\n{self.output[-4000:]}") from None
        self._reader.join(5)
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        try:
            os.close(self._master)
        except OSError:
            pass


def left_running(processes: list[psutil.Process], keep: set[int], timeout_s: float = 30) -> list[str]:
    """Which of ``processes`` (except the pids in ``keep``) still run after ``timeout_s``; they
    are killed either way, to leave nothing for the next test."""
    watched = [p for p in processes if p.pid not in keep]
    _gone, alive = psutil.wait_procs(watched, timeout=timeout_s)
    left = []
    for p in alive:
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                left.append(f"{p.pid} {' '.join(p.cmdline())[:200]}")
            p.kill()
        except psutil.NoSuchProcess:
            pass
    return left
