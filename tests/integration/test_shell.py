"""The interactive shell as a user drives it: a real ``streamsql shell`` process in a
pseudo-terminal, on the session's broker, typing keys and reading the screen."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from streamsql.kafka.admin import KafkaAdmin

pytestmark = pytest.mark.integration

T0 = time.monotonic()
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][A-Za-z0-9]|\x1b[=>]|\r")


def _readable(fd: int, timeout_s: float) -> bool:
    """Whether ``fd`` has output within ``timeout_s``. ``poll``, not ``select``: late in a long
    suite the test process's descriptors pass 1,024, which ``select`` refuses (session 38)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(timeout_s * 1000))


class PtyShell:
    """A child process on the slave side of a pty (120x40), read and written from the master."""

    def __init__(self, args: list[str], cwd: Path) -> None:
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, TERM="xterm", PROMPT_TOOLKIT_NO_CPR="1",
                   COLUMNS="120", LINES="40")
        pid, fd = pty.fork()
        if pid == 0:  # child: size the terminal, then become the shell
            try:
                fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
                os.chdir(cwd)
                os.execvpe(sys.executable, [sys.executable, "-m", "streamsql", *args], env)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self.screen = ""  # everything shown so far, escape sequences removed
        self._seen = 0

    def expect(self, pattern: str, timeout: float = 90.0) -> re.Match[str]:
        """Wait for ``pattern`` in the output after the previous match; move past it."""
        deadline = time.monotonic() + timeout
        regex = re.compile(pattern)
        while True:
            m = regex.search(self.screen, self._seen)
            if m:
                self._seen = m.end()
                if os.environ.get("SHELL_TEST_TIMES"):
                    print(f"{time.monotonic() - T0:7.1f}s {pattern}", file=sys.stderr)
                return m
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"timed out waiting for {pattern!r}; screen tail:\n{self.screen[-3000:]}")
            if _readable(self.fd, min(remaining, 0.5)):
                try:
                    data = os.read(self.fd, 65536)
                except OSError:
                    data = b""
                if not data:
                    raise AssertionError(f"shell exited while waiting for {pattern!r}:\n{self.screen[-3000:]}")
                self.screen += ANSI.sub("", data.decode("utf-8", "replace"))

    def send(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def line(self, text: str) -> None:
        """Type a line and press Enter (pausing so the prompt handles it as typed input)."""
        self.send(text)
        time.sleep(0.2)
        self.send("\r")

    def wait(self, timeout: float = 60.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                _readable(self.fd, 0.2)
                os.read(self.fd, 65536)
            except OSError:
                pass
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
        raise AssertionError("the shell did not exit")

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(self.fd)


def test_interactive_session(bootstrap, topic_name, tmp_path):  # type: ignore[no-untyped-def]
    topic = topic_name("shell_orders")
    sh = PtyShell(["shell", "--embedded", "--bootstrap-servers", bootstrap, "--data-dir", str(tmp_path / "state")],
                  tmp_path)
    try:
        sh.expect(r"Connected to the embedded engine")
        sh.expect(r"streamsql>")

        # DEFINE + ${name}, and a statement over three lines: Enter continues until the ';'
        sh.line(f"DEFINE orders_topic = '{topic}';")
        sh.expect(r"Defined variable ORDERS_TOPIC")
        sh.line("CREATE STREAM shell_orders (")
        sh.expect(r"> ")
        sh.line("  id VARCHAR KEY, qty INT)")
        sh.line("  WITH (KAFKA_TOPIC='${orders_topic}', VALUE_FORMAT='JSON', PARTITIONS=1);")
        sh.expect(r"Stream created")

        # Tab completes the stream name: DESCRIBE shows the completed source
        sh.send("describe SHELL_ORD")
        time.sleep(0.3)
        sh.send("\t")
        time.sleep(0.5)
        sh.line(";")
        sh.expect(r"Name\s+: SHELL_ORDERS")
        sh.expect(r"QTY\s+\| INTEGER")

        sh.line("SET 'auto.offset.reset' = 'earliest';")
        sh.expect(r"Successfully changed local property 'auto.offset.reset'")
        for key, qty in (("o1", 5), ("o2", 12)):
            sh.line(f"INSERT INTO shell_orders (id, qty) VALUES ('{key}', {qty});")
            sh.expect(r"Inserted 1 row", timeout=180)

        # a push query streams until Ctrl-C, which ends the query and not the shell
        sh.line("SELECT id, qty FROM shell_orders EMIT CHANGES;")
        sh.expect(r"Press CTRL-C to interrupt")
        sh.expect(r"\|ID\s+\|QTY\s+\|")
        sh.expect(r"\|o1\s+\|5\s+\|", timeout=180)
        sh.expect(r"\|o2\s+\|12\s+\|")
        sh.send("\x03")
        sh.expect(r"Query terminated")
        sh.expect(r"streamsql>")
        sh.line("SHOW STREAMS;")
        sh.expect(r"SHELL_ORDERS\s+\| " + re.escape(topic))

        # a parse error names line:column within the input, points at it, and the shell goes on
        sh.line("SELECT id,")
        sh.line("  qty FORM shell_orders;")
        sh.expect(r"line 2:(\d+): Syntax Error\s+Expecting 'FROM'")  # ksqlDB's two-line rendering
        sh.expect(r"\n\s*\^")
        sh.line("DESCRIBE no_such_stream;")
        sh.expect(r"NO_SUCH_STREAM does not exist")

        # a push query with LIMIT ends by itself; JSON output mode
        sh.line("SELECT id FROM shell_orders WHERE qty > 10 EMIT CHANGES LIMIT 1;")
        sh.expect(r"\|o2\s+\|", timeout=180)
        sh.expect(r"Limit Reached\s+Query terminated")
        sh.line("output JSON")
        sh.expect(r"Output format set to JSON")
        sh.line("SHOW STREAMS;")
        sh.expect(r'"@type": "streams"')
        # wait for the next prompt: a Ctrl-D typed while output is still printing reaches a terminal in
        # cooked mode, where the line discipline eats it as end-of-file before the prompt can see it
        sh.expect(r'"warnings": \[\]\s*\}')
        sh.expect(r"streamsql>")
        sh.send("\x04")  # Ctrl-D at an empty prompt leaves
        sh.expect(r"Exiting streamsql.")
        assert sh.wait() == 0
    finally:
        sh.kill()


def test_execute_and_file_modes(bootstrap, topic_name, tmp_path):  # type: ignore[no-untyped-def]
    """``--execute`` and ``--file`` run without a prompt; the catalog one left is there for the
    next; the first error ends the run with exit code 1."""
    topic = topic_name("shell_exec")

    def shell(*args: str) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
        return subprocess.run([sys.executable, "-m", "streamsql", "shell", "--embedded", "--bootstrap-servers",
                               bootstrap, "--data-dir", str(tmp_path / "state"), *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)

    first = shell("--define", f"t={topic}", "--execute",
                  "CREATE STREAM exec_s (id VARCHAR KEY, n INT) WITH (KAFKA_TOPIC='${t}', VALUE_FORMAT='JSON', "
                  "PARTITIONS=1); SHOW STREAMS;")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "Stream created" in first.stdout
    assert re.search(r"EXEC_S\s+\| " + re.escape(topic), first.stdout)

    admin = KafkaAdmin(bootstrap)
    admin.produce(topic, b"k1", b'{"N":41}', 1000)
    admin.close()
    (tmp_path / "more.sql").write_text("DEFINE answer = '42';\nSHOW VARIABLES;\n")
    script = tmp_path / "script.sql"
    script.write_text(f"DESCRIBE exec_s;\nhelp\nRUN SCRIPT '{tmp_path / 'more.sql'}'\n"
                      f"PRINT '{topic}' FROM BEGINNING LIMIT 1;\n"
                      "output JSON\nSHOW STREAMS;\nDESCRIBE missing_s;\nSHOW TOPICS;\n")
    second = shell("--file", str(script))
    assert second.returncode == 1, second.stdout + second.stderr
    assert re.search(r"N\s+\| INTEGER", second.stdout)
    assert "Shell commands" in second.stdout  # help
    assert re.search(r"ANSWER\s+\| 42", second.stdout)  # RUN SCRIPT ran the other file
    assert re.search(r'key: k1, value: \{"N":41\}', second.stdout)
    assert "Topic printing ceased" in second.stdout
    assert '"name": "EXEC_S"' in second.stdout
    assert "MISSING_S does not exist" in second.stdout
    assert "kafka_topics" not in second.stdout  # nothing runs after the error
