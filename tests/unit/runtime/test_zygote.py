"""The zygote and its launcher as real processes (no Spark): a launched module gets the
launcher's arguments, environment, directory and standard streams, its exit status comes back,
signals reach it, and without a zygote the launcher is plain Python."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from streamsql.runtime.zygote import write_launcher

REPO = Path(__file__).resolve().parents[3]

ECHO = """\
import os, sys
print("argv", sys.argv[1:])
print("cwd", os.getcwd())
print("env", os.environ.get("ZYGOTE_TEST"))
print("stdin", sys.stdin.read().strip())
print("ppid", os.getppid())
print("to stderr", file=sys.stderr)
sys.exit(int(os.environ.get("ZYGOTE_TEST_CODE", "0")))
"""

SLEEP = """\
import os, time
print(os.getpid(), flush=True)
time.sleep(60)
"""

FAIL = "raise ValueError('broken module')\n"


@pytest.fixture
def zygote(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[bytes]]]:
    """A zygote preloading nothing, its launcher, and a directory of modules to launch."""
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "zt_echo.py").write_text(ECHO)
    (mods / "zt_sleep.py").write_text(SLEEP)
    (mods / "zt_fail.py").write_text(FAIL)
    sock = tmp_path / "z.sock"
    launcher = tmp_path / "python"
    write_launcher(launcher, sock)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "streamsql.runtime.zygote", str(sock), ""],
                            stdin=subprocess.PIPE, env=env, start_new_session=True)
    deadline = time.monotonic() + 30
    while not sock.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the zygote did not start"
        time.sleep(0.02)
    yield launcher, proc
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(10)


def _launch(launcher: Path, *args: str, cwd: Path, stdin: bytes = b"",
            **env: str) -> subprocess.CompletedProcess[bytes]:
    full_env = {**os.environ, "PYTHONPATH": str(cwd), **env}
    return subprocess.run([str(launcher), *args], input=stdin, capture_output=True, cwd=cwd, env=full_env, timeout=30)


def test_a_launched_module_is_forked_by_the_zygote_with_the_launcher_s_world(zygote) -> None:  # type: ignore[no-untyped-def]
    launcher, proc = zygote
    mods = launcher.parent / "mods"
    out = _launch(launcher, "-m", "zt_echo", "a", "b c", cwd=mods, stdin=b"hello\n",
                  ZYGOTE_TEST="42", ZYGOTE_TEST_CODE="3")
    lines = out.stdout.decode().splitlines()
    assert lines[:4] == ["argv ['a', 'b c']", f"cwd {mods}", "env 42", "stdin hello"], out
    assert lines[4] == f"ppid {proc.pid}"  # forked by the zygote, not started by the launcher
    assert out.stderr.decode().strip() == "to stderr"
    assert out.returncode == 3


def test_a_module_that_raises_prints_its_traceback_and_exits_1(zygote) -> None:  # type: ignore[no-untyped-def]
    launcher, _ = zygote
    out = _launch(launcher, "-m", "zt_fail", cwd=launcher.parent / "mods")
    assert out.returncode == 1
    assert "ValueError: broken module" in out.stderr.decode()


def _start_sleeper(launcher: Path) -> tuple[subprocess.Popen[bytes], int]:
    mods = launcher.parent / "mods"
    proc = subprocess.Popen([str(launcher), "-m", "zt_sleep"], cwd=mods, stdout=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(mods)})
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    return proc, child


def test_sigterm_to_the_launcher_reaches_the_child_and_comes_back_as_its_status(zygote) -> None:  # type: ignore[no-untyped-def]
    launcher, _ = zygote
    proc, child = _start_sleeper(launcher)
    assert psutil.pid_exists(child)
    proc.send_signal(signal.SIGTERM)  # what Spark's Process.destroy() sends
    assert proc.wait(10) == -signal.SIGTERM
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE


def test_a_launcher_killed_outright_takes_its_child_with_it(zygote) -> None:  # type: ignore[no-untyped-def]
    launcher, _ = zygote
    proc, child = _start_sleeper(launcher)
    proc.kill()
    proc.wait(10)
    deadline = time.monotonic() + 10
    while _alive(child):
        assert time.monotonic() < deadline, "the child outlived its launcher"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (not a zombie); a process that ends while it is asked about is gone
    (the suite saw NoSuchProcess between ``pid_exists`` and reading its status)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_without_a_zygote_the_launcher_runs_the_module_itself(tmp_path: Path) -> None:
    launcher = tmp_path / "python"
    write_launcher(launcher, tmp_path / "nobody-listens.sock")
    (tmp_path / "zt_echo.py").write_text(ECHO)
    out = _launch(launcher, "-m", "zt_echo", "x", cwd=tmp_path, stdin=b"in\n", ZYGOTE_TEST="7")
    lines = out.stdout.decode().splitlines()
    assert lines[:4] == ["argv ['x']", f"cwd {tmp_path}", "env 7", "stdin in"], out
    assert lines[4] == f"ppid {os.getpid()}"  # the launcher became the module's process
    assert out.returncode == 0


def test_anything_but_dash_m_is_plain_python(zygote) -> None:  # type: ignore[no-untyped-def]
    launcher, _ = zygote
    out = subprocess.run([str(launcher), "-c", "import sys; print(sys.version_info[:2])"],
                         capture_output=True, timeout=30)
    assert out.stdout.decode().strip() == str(tuple(sys.version_info[:2]))


def test_the_zygote_leaves_when_its_parent_s_pipe_closes(zygote) -> None:  # type: ignore[no-untyped-def]
    _, proc = zygote
    proc.stdin.close()
    assert proc.wait(10) == 0


def test_a_malformed_request_is_dropped_and_the_zygote_keeps_serving(zygote) -> None:  # type: ignore[no-untyped-def]
    import socket

    launcher, proc = zygote
    sock_path = str(launcher.parent / "z.sock")
    for payload in (b"F", b"Fxxxx", b""):  # no descriptors passed, bytes after them, nothing at all
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(sock_path)
        if payload:
            conn.sendall(payload)
        conn.close()
    out = _launch(launcher, "-m", "zt_echo", cwd=launcher.parent / "mods", ZYGOTE_TEST="after")
    assert proc.poll() is None
    assert "env after" in out.stdout.decode() and out.returncode == 0, out
