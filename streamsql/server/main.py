"""``streamsql server``: the engine behind ksqlDB's REST API, with the command log in Kafka.

The listener opens first and answers 503 ``Server initializing`` (as ksqlDB does) while the
engine starts and replays the command topic, which can take a while (Spark start, restarting
every persistent query from its checkpoint).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import socket
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from streamsql.runtime.config import EngineConfig
from streamsql.server.app import KsqlApp, ServerSettings

if TYPE_CHECKING:
    from streamsql.server.service import KsqlService

log = logging.getLogger("streamsql.server")


@dataclass
class ListenOptions:
    host: str = "0.0.0.0"
    port: int = 8088
    tls_cert: str | None = None
    tls_key: str | None = None
    #: open connections at most; one more is answered 503 and closed (:func:`bound_connections`)
    max_connections: int = 1000
    #: seconds a request's head (request line and headers) may take to arrive once it began
    header_timeout_s: float = 30.0
    #: the HTTP listener: ``hypercorn`` (Python) or ``granian`` (Rust; :func:`_serve_granian`)
    http_server: str = "hypercorn"


def build_service(config: EngineConfig) -> KsqlService:
    from streamsql.catalog.kafka_commands import KafkaCommandLog, command_topic_name
    from streamsql.kafka import settings as kafka_settings
    from streamsql.runtime.engine import Engine
    from streamsql.server.service import KsqlService

    assert config.bootstrap_servers
    if not config.spark_master and not os.environ.get("STREAMSQL_SPARK_MASTER"):
        # a long-lived server runs many short transient queries; a task whose Python worker was
        # torn down by a stopped query is retried instead of failing the next query
        config.spark_master = "local[2,4]"
    service_id = config.property("ksql.service.id")
    # the command topic's clients are made before the engine, which registers them too
    kafka_settings.register(config.bootstrap_servers, config.client_settings())
    command_log = KafkaCommandLog(config.bootstrap_servers, command_topic_name(service_id))
    return KsqlService(Engine(config, command_log=command_log), command_log, service_id)


def close_on_client_eof() -> None:
    """Close a connection as soon as its client closes it.

    hypercorn (0.17, 0.18) ignores the end of a connection's input while no request is in
    flight: its HTTP/1.1 protocol drops the "closed" event when it has no stream, and the
    connection waits for its keep-alive timer (an hour here, for clients that keep a
    connection open between statements as ksqlDB's do) before it closes its socket. Each
    request of a client that opens a connection per request left a socket in CLOSE-WAIT: the
    abuse drill's 1,000 statements left 1,003, and past 1,024 descriptors py4j's callback server
    stopped (runtime/spark.py). The read loop ending means the client is gone, so the idle timer
    is stopped then and the connection closes at once.
    """
    from hypercorn.asyncio import tcp_server

    original = tcp_server.TCPServer._read_data
    if getattr(original, "closes_on_eof", False):
        return

    async def read_data(self: tcp_server.TCPServer) -> None:
        await original(self)
        idle = getattr(self, "idle_task", None)
        if idle is not None:
            await idle.stop()

    read_data.closes_on_eof = True  # type: ignore[attr-defined]
    tcp_server.TCPServer._read_data = read_data  # type: ignore[method-assign]


class _Limits:
    """The listener's bounds, read by the patched connection handler (one listener per process)."""

    max_connections = 1000
    header_timeout_s = 30.0
    open = 0


_TOO_MANY = b'{"@type":"generic_error","error_code":50300,"message":"Too many connections: try again later"}'


def bound_connections(max_connections: int, header_timeout_s: float) -> None:
    """Bound what slow or many clients can hold: at most ``max_connections`` open connections
    (one more gets ``503`` with ``Connection: close`` at once), and a request whose head (request
    line and headers) is still incomplete ``header_timeout_s`` after its first byte arrived is
    closed (a slowloris client). hypercorn has neither: its only timer for a connection between
    requests is the keep-alive one, an hour here for ksqlDB's clients, which keep a connection
    open between statements; and its read timeout would also end push queries, whose clients send
    nothing while rows stream. Idle keep-alive connections and requests in flight (a push query,
    a slow body) are not touched by the head deadline.
    """
    from hypercorn.asyncio import tcp_server

    _Limits.max_connections, _Limits.header_timeout_s = max_connections, header_timeout_s
    original = tcp_server.TCPServer.run
    if getattr(original, "bounded", False):
        return

    async def run(self: tcp_server.TCPServer) -> None:
        if _Limits.open >= _Limits.max_connections:
            log.warning("refused a connection: %d open (--max-connections)", _Limits.open)
            await _refuse(self.writer)
            return
        _Limits.open += 1
        watchdog = asyncio.get_running_loop().create_task(_head_deadline(self))
        try:
            await original(self)
        finally:
            watchdog.cancel()
            _Limits.open -= 1

    run.bounded = True  # type: ignore[attr-defined]
    tcp_server.TCPServer.run = run  # type: ignore[method-assign]


async def _refuse(writer: asyncio.StreamWriter) -> None:
    head = (f"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(_TOO_MANY)}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n").encode()
    try:
        writer.write(head + _TOO_MANY)
        await asyncio.wait_for(writer.drain(), 5)
    except (OSError, RuntimeError, TimeoutError):
        pass
    finally:
        writer.close()


async def _head_deadline(connection: object) -> None:
    """Close ``connection`` when an HTTP/1.1 request head has been arriving for longer than the
    limit: h11 holds the received bytes of a head it cannot parse yet (``trailing_data``) while
    the client's state is IDLE. HTTP/2 connections frame their own requests and are left alone."""
    import h11

    began: float | None = None
    loop = asyncio.get_running_loop()
    while True:
        await asyncio.sleep(min(1.0, _Limits.header_timeout_s / 4))
        wrapper = getattr(connection, "protocol", None)
        h11_connection = getattr(getattr(wrapper, "protocol", None), "connection", None)
        if not isinstance(h11_connection, h11.Connection):
            continue
        partial = h11_connection.their_state is h11.IDLE and bool(h11_connection.trailing_data[0])
        if not partial:
            began = None
        elif began is None:
            began = loop.time()
        elif loop.time() - began > _Limits.header_timeout_s:
            log.info("closed a connection whose request head took more than %.0f s", _Limits.header_timeout_s)
            writer = getattr(connection, "writer", None)
            if writer is not None:
                writer.close()
            return


async def _serve_granian(app: KsqlApp, listen: ListenOptions, stop: asyncio.Event) -> None:
    """Serve ``app`` with granian's embedded server on this event loop: HTTP/1.1 and HTTP/2
    (cleartext by prior knowledge, or by ALPN over TLS) parsed and framed in Rust, the ASGI
    calls on this loop. It costs about a fifth of hypercorn's CPU per request (a trivial
    request: 0.13 ms against 0.69 ms, docs/performance.md). A slow request head is closed by
    hyper's own header timer; connections are not counted (``--max-connections`` is hypercorn's),
    and a client's end of input closes its connection at once."""
    from granian.constants import HTTPModes, Interfaces, SSLProtocols
    from granian.http import HTTP1Settings
    from granian.server.embed import Server

    tls = {"ssl_cert": Path(listen.tls_cert), "ssl_key": Path(listen.tls_key),
           "ssl_protocol_min": SSLProtocols.tls12} if listen.tls_cert and listen.tls_key else {}
    server = Server(app, address=listen.host, port=listen.port, interface=Interfaces.ASGINL, http=HTTPModes.auto,
                    backlog=1024, log_enabled=False,
                    http1_settings=HTTP1Settings(header_read_timeout=int(listen.header_timeout_s * 1000),
                                                 keep_alive=True),
                    **tls)  # type: ignore[arg-type]

    async def stop_when_told() -> None:
        await stop.wait()
        server.stop()

    stopper = asyncio.get_running_loop().create_task(stop_when_told())
    try:
        await server.serve()
    finally:
        stopper.cancel()


async def _serve_hypercorn(app: KsqlApp, listen: ListenOptions, stop: asyncio.Event) -> None:
    """Serve ``app`` with hypercorn on this event loop, with the connection bounds and the
    client-EOF close this module adds to it."""
    from hypercorn.asyncio import serve as hypercorn_serve
    from hypercorn.config import Config

    close_on_client_eof()
    bound_connections(listen.max_connections, listen.header_timeout_s)
    hc = Config()
    hc.bind = [f"{listen.host}:{listen.port}"]
    hc.accesslog = None
    hc.errorlog = logging.getLogger("hypercorn.error")
    hc.keep_alive_timeout = 3600
    hc.graceful_timeout = 2
    if listen.tls_cert or listen.tls_key:
        hc.certfile, hc.keyfile = listen.tls_cert, listen.tls_key
        hc.alpn_protocols = ["h2", "http/1.1"]
    await hypercorn_serve(app, hc, shutdown_trigger=stop.wait)  # type: ignore[arg-type]


def _address_in_use(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be listened on, or None. Asked before anything starts: either
    listener fails on a taken port with a stack trace (granian's from Rust)."""
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as e:
        return e.strerror or str(e)
    return None


def serve(config: EngineConfig, listen: ListenOptions, settings: ServerSettings) -> int:
    problem = _address_in_use(listen.host, listen.port)
    if problem is not None:
        print(f"Error: cannot listen on {listen.host}:{listen.port}: {problem} (--port, --host)",
              file=sys.stderr, flush=True)
        return 1
    service = build_service(config)
    app = KsqlApp(service, settings)
    for warning in app.policy.warnings():
        print(f"streamsql: {warning}", file=sys.stderr, flush=True)
    scheme = "https" if listen.tls_cert else "http"

    def start_engine() -> None:
        try:
            for notice in service.start():
                print(f"streamsql: {notice}", file=sys.stderr, flush=True)
            # what the start made (modules, the catalog, Spark's and Kafka's clients) lives as long
            # as the server: out of the cycle collector's full passes, which otherwise walk it all
            # (~80,000 objects, 25-250 ms with the GIL held: a stall for every request then)
            gc.freeze()
            print(f"streamsql: server ready at {scheme}://{listen.host}:{listen.port} (command topic "
                  f"{service.command_log.topic})", file=sys.stderr, flush=True)
        except Exception as e:
            log.exception("engine failed to start")
            print(f"streamsql: server failed to start: {e}", file=sys.stderr, flush=True)

    stop = asyncio.Event()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        threading.Thread(target=start_engine, name="engine-start", daemon=True).start()
        print(f"streamsql: listening on {scheme}://{listen.host}:{listen.port} (HTTP/1.1 and HTTP/2"
              f"{', granian' if listen.http_server == 'granian' else ''})", file=sys.stderr, flush=True)
        listener = _serve_granian if listen.http_server == "granian" else _serve_hypercorn
        await listener(app, listen, stop)

    try:
        asyncio.run(main())
    finally:
        try:
            service.close()
        except Exception as e:  # closing a half-started engine: nothing more to save
            log.debug("closing the engine: %s", e)
        app.pool.shutdown(wait=False, cancel_futures=True)
    return 0
