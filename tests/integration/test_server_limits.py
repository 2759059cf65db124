"""The REST server's bounds on connections (docs/reliability.md, "The REST server under abuse"):
at most ``--max-connections`` open (one more is answered 503 and closed), and a request whose
head dribbles in (slowloris) is closed after ``--request-header-timeout-ms``, while idle
keep-alive connections and complete requests are left alone. A real server process over real
sockets."""

from __future__ import annotations

import http.client
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from streamsql.conformance.server_process import ServerProcess

pytestmark = pytest.mark.integration

MAX, HEAD_TIMEOUT_S = 4, 2.0


@pytest.fixture(scope="module")
def limited(bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root: Path = tmp_path_factory.mktemp("server-limits")
    proc = ServerProcess(bootstrap, root / "data", ["--max-connections", str(MAX),
                                                    "--request-header-timeout-ms", str(int(HEAD_TIMEOUT_S * 1000))])
    proc.start()
    yield proc
    proc.stop()


def _connect(server: ServerProcess) -> http.client.HTTPConnection:
    """A connection opened, nothing sent yet."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.connect()
    return conn


def _status(conn: http.client.HTTPConnection) -> int:
    """One keep-alive GET /info on ``conn``: its status."""
    conn.request("GET", "/info")
    response = conn.getresponse()
    response.read()
    return response.status


def _closed_by_server(sock: socket.socket, within_s: float) -> tuple[bool, bytes]:
    """Whether the server closed ``sock`` within the time (reading what it sent first)."""
    deadline = time.monotonic() + within_s
    received = b""
    sock.settimeout(0.2)
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        except ConnectionResetError:
            return True, received
        if not chunk:
            return True, received
        received += chunk
    return False, received


def _served(server: ServerProcess, deadline_s: float = 10) -> bool:
    """A fresh client gets /info answered (retrying while a closed slot is being freed)."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(server.url + "/info", timeout=5).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    return False


def _hold_all(server: ServerProcess, deadline_s: float = 20) -> list[http.client.HTTPConnection]:
    """``MAX`` connections, each served once and kept open. Connections of earlier clients may
    still be counted for a moment after they left (the server learns of a close when it reads
    it): then one of ours is refused, so all are closed and taken again."""
    deadline = time.monotonic() + deadline_s
    while True:
        held = [_connect(server) for _ in range(MAX)]
        try:
            if all(_status(c) == 200 for c in held):
                return held
        except (OSError, http.client.HTTPException):
            pass
        for c in held:
            c.close()
        if time.monotonic() > deadline:
            raise AssertionError(f"{MAX} connections were never all served")
        time.sleep(0.3)


def test_one_connection_over_the_limit_is_answered_503_and_closed(limited: ServerProcess) -> None:
    held = _hold_all(limited)
    try:
        extra = socket.create_connection(("127.0.0.1", limited.port), timeout=10)
        closed, sent = _closed_by_server(extra, 10)
        assert closed, sent
        assert sent.startswith(b"HTTP/1.1 503 ") and b"Connection: close" in sent and b"Too many connections" in sent
        extra.close()
    finally:
        for c in held:
            c.close()
    assert _served(limited)  # the slots come back when their clients leave


def test_a_slow_request_head_is_closed_but_an_idle_keep_alive_connection_is_not(limited: ServerProcess) -> None:
    idle = _connect(limited)
    slow = socket.create_connection(("127.0.0.1", limited.port), timeout=10)
    try:
        assert _status(idle) == 200
        slow.sendall(b"GET /info HTTP/1.1\r\nHost: localhost\r\n")  # the head never ends
        began = time.monotonic()
        closed = False
        while not closed and time.monotonic() - began < HEAD_TIMEOUT_S + 10:
            try:
                slow.sendall(b"X")  # a byte now and then, as slowloris sends
            except OSError:
                closed = True
                break
            closed, _ = _closed_by_server(slow, 0.5)
        took = time.monotonic() - began
        assert closed and HEAD_TIMEOUT_S <= took < HEAD_TIMEOUT_S + 10
        # the idle keep-alive connection, idle longer than the head timeout, still serves
        assert _status(idle) == 200
        assert _served(limited)
    finally:
        idle.close()
        slow.close()
