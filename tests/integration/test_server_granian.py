"""``streamsql server --http-server granian``: the same application behind granian's listener
(HTTP in Rust), over real HTTP/1.1 and HTTP/2 cleartext: statements, pull and push queries, a
push query whose client leaves ends on the server, closed connections are closed, and a request
head that never ends is cut off by the header timer."""

from __future__ import annotations

import json
import socket
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from streamsql.conformance.server_process import ServerProcess
from tests.support.cli import run_streamsql

pytestmark = pytest.mark.integration

HEAD_TIMEOUT_S = 3


@pytest.fixture(scope="module")
def server(bootstrap: str, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("granian")
    proc = ServerProcess(bootstrap, root / "data", ["--http-server", "granian", "--request-header-timeout-ms",
                                                     str(HEAD_TIMEOUT_S * 1000)],
                         service_id=f"gr{uuid.uuid4().hex[:8]}_")
    proc.start()
    yield proc
    proc.stop()


def _lines(resp: httpx.Response) -> list[Any]:
    return [json.loads(line) for line in resp.text.splitlines() if line.strip()]


def _running_push_queries(c: httpx.Client) -> list[dict[str, Any]]:
    resp = c.post("/ksql", json={"ksql": "SHOW QUERIES;"})
    assert resp.status_code == 200, resp.text
    return [q for q in resp.json()[0]["queries"] if q["queryType"] == "PUSH"]


def test_statements_and_queries_over_http1_and_http2(server: ServerProcess) -> None:
    name = f"G_{uuid.uuid4().hex[:8]}".upper()
    with httpx.Client(base_url=server.url, timeout=300) as h1, \
            httpx.Client(base_url=server.url, http1=False, http2=True, timeout=300) as h2:
        created = h1.post("/ksql", json={"ksql": f"CREATE STREAM {name} (ID VARCHAR KEY, V INT) WITH (KAFKA_TOPIC="
                                                 f"'{name.lower()}', VALUE_FORMAT='JSON', PARTITIONS=1);"
                                                 f"CREATE TABLE {name}_T AS SELECT ID, COUNT(*) AS N FROM {name} "
                                                 f"GROUP BY ID;"})
        assert created.status_code == 200 and created.http_version == "HTTP/1.1", created.text
        inserted = h2.post("/ksql", json={"ksql": " ".join(f"INSERT INTO {name} (ID, V) VALUES ('k{i}', {i});"
                                                           for i in range(3))})
        assert inserted.status_code == 200 and inserted.http_version == "HTTP/2", inserted.text

        push = h2.post("/query-stream", json={"sql": f"SELECT * FROM {name} EMIT CHANGES LIMIT 3;",
                                              "properties": {"auto.offset.reset": "earliest"}})
        assert push.status_code == 200 and push.http_version == "HTTP/2"
        assert _lines(push)[1:] == [["k0", 0], ["k1", 1], ["k2", 2]]

        deadline = time.monotonic() + 120
        while True:
            pull = h1.post("/query-stream", json={"sql": f"SELECT * FROM {name}_T WHERE ID = 'k1';"})
            assert pull.status_code == 200, pull.text
            if _lines(pull)[1:] == [["k1", 1]] or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert _lines(pull)[0]["columnNames"] == ["ID", "N"] and _lines(pull)[1:] == [["k1", 1]]

        # a push query whose client leaves after the header ends on the server
        with h1.stream("POST", "/query-stream", json={"sql": f"SELECT * FROM {name} EMIT CHANGES;"}) as resp:
            assert json.loads(next(resp.iter_lines()))["queryId"]
            assert _running_push_queries(h2)
        deadline = time.monotonic() + 60
        while _running_push_queries(h2) and time.monotonic() < deadline:
            time.sleep(0.3)
        assert _running_push_queries(h2) == []


def test_closed_connections_close_and_a_slow_request_head_is_cut_off(server: ServerProcess) -> None:
    assert server.proc is not None
    process = psutil.Process(server.proc.pid)
    for _ in range(20):
        with httpx.Client(base_url=server.url, timeout=30) as c:
            assert c.get("/info").status_code == 200

    def lingering() -> int:
        return sum(1 for c in process.net_connections("inet")
                   if c.laddr.port == server.port and c.status == psutil.CONN_CLOSE_WAIT)

    deadline = time.monotonic() + 10
    while lingering() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert lingering() == 0

    slow = socket.create_connection(("127.0.0.1", server.port), timeout=HEAD_TIMEOUT_S + 20)
    try:
        slow.sendall(b"GET /info HTTP/1.1\r\nHost: localhost\r\n")  # the head never ends
        began = time.monotonic()
        answered = b""
        while chunk := slow.recv(4096):  # the server closes it (hyper may answer 408 first)
            answered += chunk
        assert answered == b"" or answered.startswith(b"HTTP/1.1 408"), answered
        assert HEAD_TIMEOUT_S - 0.5 <= time.monotonic() - began < HEAD_TIMEOUT_S + 20
    finally:
        slow.close()


@pytest.mark.parametrize("listener", ["hypercorn", "granian"])
def test_a_taken_port_is_a_clear_error_not_a_stack_trace(listener: str, tmp_path: Path) -> None:
    """Both listeners failed on a port in use with a stack trace (granian's a Rust panic)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_streamsql("server", "--port", str(port), "--http-server", listener,
                             "--bootstrap-servers", "127.0.0.1:9", "--data-dir", str(tmp_path / "data"), cwd=tmp_path)
    assert done.returncode == 1
    assert f"Error: cannot listen on 127.0.0.1:{port}: Address already in use" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "panicked" not in done.stderr
