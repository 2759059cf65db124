"""``streamsql server``: the engine behind ksqlDB's REST API, with the command log in Kafka.

The listener opens first and answers 503 ``Server initializing`` (as ksqlDB does) while the
engine starts and replays the command topic, which can take a while (Spark start, restarting
every persistent query from its checkpoint).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
from dataclasses import dataclass
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


def serve(config: EngineConfig, listen: ListenOptions, settings: ServerSettings) -> int:
    from hypercorn.asyncio import serve as hypercorn_serve
    from hypercorn.config import Config

    close_on_client_eof()

    service = build_service(config)
    app = KsqlApp(service, settings)
    hc = Config()
    hc.bind = [f"{listen.host}:{listen.port}"]
    hc.accesslog = None
    hc.errorlog = logging.getLogger("hypercorn.error")
    hc.keep_alive_timeout = 3600
    hc.graceful_timeout = 2
    if listen.tls_cert or listen.tls_key:
        hc.certfile, hc.keyfile = listen.tls_cert, listen.tls_key
        hc.alpn_protocols = ["h2", "http/1.1"]
    scheme = "https" if hc.certfile else "http"

    def start_engine() -> None:
        try:
            for notice in service.start():
                print(f"streamsql: {notice}", file=sys.stderr, flush=True)
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
        print(f"streamsql: listening on {scheme}://{listen.host}:{listen.port} (HTTP/1.1 and HTTP/2)",
              file=sys.stderr, flush=True)
        await hypercorn_serve(app, hc, shutdown_trigger=stop.wait)  # type: ignore[arg-type]

    try:
        asyncio.run(main())
    finally:
        try:
            service.close()
        except Exception as e:  # closing a half-started engine: nothing more to save
            log.debug("closing the engine: %s", e)
        app.pool.shutdown(wait=False, cancel_futures=True)
    return 0
