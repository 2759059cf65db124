"""The REST server under abuse (issue #18 item 8): does one client's misbehaviour reach the others?

``python -m benchmarks.rest_abuse [--push-clients 200] [--statements-per-minute 1000] [--seconds 60]``

One ``streamsql server`` process on an embedded broker. A *probe* client, the well-behaved user,
sends ``GET /info`` and ``SHOW STREAMS`` every 0.25 s through every phase and records each answer's
status and latency; the server's memory (its process tree's RSS) is sampled alongside. Phases:

1. **quiet**: the probe alone (its latency is the baseline).
2. **slowloris**: 200 connections that send a request's headers one byte every second, never
   finishing, plus 50 requests whose ``Content-Length`` promises 1 MB and whose client closes
   after 10 bytes (truncated bodies), plus 50 bodies that are not JSON, 20 of 8 MB (over the
   request limit) and 50 requests to unknown endpoints.
3. **statements**: ``--statements-per-minute`` statements for ``--seconds`` (CREATE STREAM, DESCRIBE,
   INSERT VALUES, DROP STREAM in turn, each its own stream), from 8 threads.
4. **push**: ``--push-clients`` identical push queries held open at once (from the latest offset:
   they share one Spark query), then one row inserted: how many clients received it, and when.

The report: per phase, the probe's answers (non-200 count, p50/p99 ms), server errors (any 5xx
anywhere), peak RSS; then each abuse's own counts. It fails (exit 1) on a 5xx, a probe failure,
a crashed server, or a push client that missed its row.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import psutil

from benchmarks.report import finish_drill
from streamsql.kafka.broker import EmbeddedBroker
from streamsql.conformance.server_process import ServerProcess

KSQL_HEADERS = {"Accept": "application/vnd.ksql.v1+json", "Content-Type": "application/vnd.ksql.v1+json"}


class Probe:
    """The well-behaved client: /info and SHOW STREAMS every 0.25 s, and the server's memory."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.samples: list[tuple[str, int, float]] = []  # (phase, status, ms)
        self.rss: list[tuple[str, float]] = []
        self.phase = "quiet"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Probe:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        with httpx.Client(base_url=self.server.url, timeout=30) as c:
            while not self._stop.is_set():
                for send in (lambda: c.get("/info"), lambda: c.post("/ksql", json={"ksql": "SHOW STREAMS;"},
                                                                    headers=KSQL_HEADERS)):
                    started = time.perf_counter()
                    try:
                        status = send().status_code
                    except httpx.HTTPError:
                        status = 0
                    self.samples.append((self.phase, status, (time.perf_counter() - started) * 1000))
                self.rss.append((self.phase, rss_mb(self.server)))
                time.sleep(0.25)

    def summary(self, phase: str) -> dict[str, Any]:
        ms = sorted(m for p, _s, m in self.samples if p == phase)
        failed = sum(1 for p, s, _m in self.samples if p == phase and s != 200)
        peak = max((r for p, r in self.rss if p == phase), default=0.0)
        if not ms:
            return {"requests": 0}
        return {"requests": len(ms), "failed": failed, "p50_ms": round(statistics.median(ms), 1),
                "p99_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.99))], 1), "peak_rss_mb": round(peak)}


def rss_mb(server: ServerProcess) -> float:
    assert server.proc is not None
    try:
        root = psutil.Process(server.proc.pid)
        return sum(p.memory_info().rss for p in [root, *root.children(recursive=True)]) / 1e6
    except psutil.Error:
        return 0.0


def slowloris(port: int, connections: int, stop: threading.Event) -> int:
    """Open ``connections`` sockets sending a request line and headers one byte a second; returns
    how many the server had closed by the time ``stop`` was set."""
    request = b"POST /ksql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Slow: " + b"a" * 4096
    socks = []
    for _ in range(connections):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.setblocking(False)
        socks.append(s)
    closed: set[int] = set()
    i = 0
    while not stop.is_set():
        for n, s in enumerate(socks):
            if n in closed:
                continue
            try:
                s.send(request[i % len(request): i % len(request) + 1])
            except OSError:
                closed.add(n)
        i += 1
        stop.wait(1.0)
    for s in socks:
        s.close()
    return len(closed)


def truncated_bodies(port: int, count: int) -> int:
    """Requests promising 1 MB of body, closed after 10 bytes; returns how many were sent."""
    for _ in range(count):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"POST /ksql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 1000000\r\n\r\n{\"ksql\": \"")
    return count


def statuses(send: Callable[[], httpx.Response], count: int) -> Counter[int]:
    out: Counter[int] = Counter()
    for _ in range(count):
        try:
            out[send().status_code] += 1
        except httpx.HTTPError:
            out[0] += 1
    return out


def statement_load(url: str, per_minute: int, seconds: float) -> dict[str, Any]:
    """``per_minute`` statements a minute for ``seconds``; each round creates, describes, inserts
    into and drops a stream of its own."""
    total = int(per_minute * seconds / 60)
    interval = 60.0 / per_minute
    codes: Counter[int] = Counter()
    latencies: list[float] = []
    lock = threading.Lock()
    start = time.monotonic()

    def one(n: int) -> None:
        name = f"ABUSE_{n // 4}"
        step = n % 4
        text = [f"CREATE STREAM {name} (ID VARCHAR KEY, V INT) WITH (KAFKA_TOPIC='{name.lower()}', "
                f"VALUE_FORMAT='JSON', PARTITIONS=1);",
                f"DESCRIBE {name};", f"INSERT INTO {name} (ID, V) VALUES ('k', {n});",
                f"DROP STREAM {name} DELETE TOPIC;"][step]
        delay = start + n * interval - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        began = time.perf_counter()
        try:
            with httpx.Client(base_url=url, timeout=60) as c:
                code = c.post("/ksql", json={"ksql": text}, headers=KSQL_HEADERS).status_code
        except httpx.HTTPError:
            code = 0
        with lock:
            codes[code] += 1
            latencies.append((time.perf_counter() - began) * 1000)

    # each stream's four statements in order: one worker per stream's round, rounds in parallel
    def round_of(r: int) -> None:
        for k in range(4):
            one(r * 4 + k)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(round_of, range(total // 4)))
    latencies.sort()
    return {"statements": sum(codes.values()), "seconds": round(time.monotonic() - start, 1),
            "statuses": dict(codes), "p50_ms": round(statistics.median(latencies), 1),
            "p99_ms": round(latencies[int(len(latencies) * 0.99)], 1)}


def push_fanout(url: str, clients: int) -> dict[str, Any]:
    """``clients`` identical push queries open at once; one row inserted; who got it, when."""
    with httpx.Client(base_url=url, timeout=60) as c:
        c.post("/ksql", json={"ksql": "CREATE STREAM FAN (ID VARCHAR KEY, V INT) WITH (KAFKA_TOPIC='fan', "
                                      "VALUE_FORMAT='JSON', PARTITIONS=1);"}, headers=KSQL_HEADERS)
    ready = threading.Barrier(clients + 1, timeout=300)
    got: list[float] = []
    errors: Counter[str] = Counter()
    lock = threading.Lock()
    sent_at: list[float] = []

    def client() -> None:
        body = {"sql": "SELECT ID, V FROM FAN EMIT CHANGES LIMIT 1;", "properties": {"auto.offset.reset": "latest"}}
        try:
            with httpx.Client(base_url=url, timeout=300) as c, c.stream("POST", "/query-stream", json=body) as resp:
                if resp.status_code != 200:
                    errors[f"status {resp.status_code}"] += 1
                    ready.wait()
                    return
                lines = resp.iter_lines()
                next(lines)  # the header: the query is accepted
                ready.wait()
                for line in lines:
                    if line.strip():
                        with lock:
                            got.append(time.monotonic())
                        return
        except (httpx.HTTPError, threading.BrokenBarrierError, StopIteration) as e:
            errors[type(e).__name__] += 1

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    ready.wait()
    with httpx.Client(base_url=url, timeout=60) as c:
        sent_at.append(time.monotonic())
        inserted = c.post("/ksql", json={"ksql": "INSERT INTO FAN (ID, V) VALUES ('x', 1);"}, headers=KSQL_HEADERS)
    for t in threads:
        t.join(120)
    delays = sorted((g - sent_at[0]) * 1000 for g in got)
    return {"clients": clients, "insert_status": inserted.status_code, "insert_answer": inserted.text[:500],
            "received": len(got), "errors": dict(errors),
            "p50_ms": round(statistics.median(delays), 1) if delays else None,
            "max_ms": round(delays[-1], 1) if delays else None}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--push-clients", type=int, default=200)
    p.add_argument("--statements-per-minute", type=int, default=1000)
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--slow-connections", type=int, default=200)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    broker = EmbeddedBroker().start()
    server = ServerProcess(broker.bootstrap_servers, Path(tempfile.mkdtemp(prefix="bench-abuse-")) / "data",
                           ["--max-request-bytes", str(4 * 1024 * 1024)], service_id="abuse_")
    report: dict[str, Any] = {}
    failures: list[str] = []
    try:
        server.start()
        probe = Probe(server).start()
        time.sleep(10)

        probe.phase = "slowloris"
        stop = threading.Event()
        slow_closed: list[int] = []
        slow = threading.Thread(target=lambda: slow_closed.append(slowloris(server.port, args.slow_connections, stop)))
        slow.start()
        with httpx.Client(base_url=server.url, timeout=60) as c:
            abuse = {
                "truncated_bodies": truncated_bodies(server.port, 50),
                "not_json": dict(statuses(lambda: c.post("/ksql", content=b"{not json",
                                                         headers={"Content-Type": "application/json"}), 50)),
                "huge_8mb": dict(statuses(lambda: c.post("/ksql", content=b"x" * (8 * 1024 * 1024),
                                                         headers={"Content-Type": "application/json"}), 20)),
                "unknown_endpoint": dict(statuses(lambda: c.get("/no/such/thing"), 50)),
            }
        time.sleep(15)
        stop.set()
        slow.join(60)
        abuse["slow_connections"] = args.slow_connections
        abuse["slow_connections_closed_by_server"] = slow_closed[0] if slow_closed else None
        report["abuse"] = abuse

        probe.phase = "statements"
        report["statement_load"] = statement_load(server.url, args.statements_per_minute, args.seconds)

        probe.phase = "push"
        report["push"] = push_fanout(server.url, args.push_clients)
        probe.phase = "after"
        time.sleep(5)
        probe.stop()
        phases = ("quiet", "slowloris", "statements", "push", "after")
        report["probe"] = {phase: probe.summary(phase) for phase in phases}

        assert server.proc is not None
        if server.proc.poll() is not None:
            failures.append(f"the server exited with {server.proc.returncode}")
        fives = [(k, v) for k, v in report["statement_load"]["statuses"].items() if int(k) >= 500 or int(k) == 0]
        for name, counts in abuse.items():
            if isinstance(counts, dict):
                fives += [(f"{name} {k}", v) for k, v in counts.items() if int(k) >= 500 or int(k) == 0]
        if fives:
            failures.append(f"server errors or dropped connections: {fives}")
        for phase, s in report["probe"].items():
            if s.get("failed"):
                failures.append(f"the probe failed {s['failed']} of {s['requests']} requests during {phase}")
        if report["push"]["received"] != args.push_clients:
            failures.append(f"{args.push_clients - report['push']['received']} push clients missed their row "
                            f"({report['push']['errors']})")
    finally:
        server.stop()
        broker.stop()
    return finish_drill(report, failures, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
