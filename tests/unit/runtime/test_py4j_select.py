"""py4j's callback server (the JVM's way back into Python for ``foreachBatch``) waits for
connections with ``select()``, which raises "filedescriptor out of range" for a descriptor
numbered 1,024 or more. The abuse drill's server held over 1,400 sockets when its first push
query started the callback server, which then died: none of 200 push clients got its row.
``streamsql.runtime.spark`` gives py4j a select over the platform's selector."""

from __future__ import annotations

import resource
import socket

import py4j.java_gateway  # type: ignore[import-untyped]

import streamsql.runtime.spark  # noqa: F401 - importing it installs the select py4j uses


def test_py4j_waits_on_a_socket_numbered_past_1024() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    filler = []
    try:
        while True:  # take the low descriptor numbers, as a busy server's connections do
            s = socket.socket()
            filler.append(s)
            if s.fileno() >= 1024:
                break
        server = filler.pop()
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        assert server.fileno() >= 1024
        assert py4j.java_gateway.select.select([server], [], [], 0.05) == ([], [], [])
        client = socket.create_connection(server.getsockname())
        readable, _, _ = py4j.java_gateway.select.select([server], [], [], 5)
        assert readable == [server]  # a waiting connection is seen, as the callback server needs
        client.close()
        server.close()
    finally:
        for s in filler:
            s.close()
