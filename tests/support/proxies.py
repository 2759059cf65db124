"""Secured Kafka for tests: terminators in front of the embedded broker's plaintext port.

No broker installable here speaks TLS or SASL to librdkafka (tansu's own TLS and SASL cannot be
used: research/facts.md), so a real process in front of it does, as stunnel does for TLS:

* :class:`TlsTerminator` accepts TLS connections with a certificate and relays the bytes;
* :class:`SaslPlainTerminator` answers a client's SASL handshake and PLAIN login itself (Kafka's
  ``SaslHandshake`` and ``SaslAuthenticate`` requests, which tansu lists in its ApiVersions), and
  relays every other request once the login succeeded; a wrong password gets Kafka's
  ``SASL_AUTHENTICATION_FAILED`` answer and the connection is closed.

The broker must advertise the terminator's port (``EmbeddedBroker(advertised_port=...)``), so
every connection of a client goes through it. Run as ``python -m tests.support.proxies``.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import ssl
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

_API_VERSIONS, _SASL_HANDSHAKE, _SASL_AUTHENTICATE = 18, 17, 36
_SASL_AUTHENTICATION_FAILED = 58


def self_signed(directory: Path, name: str = "server") -> tuple[Path, Path]:
    """A certificate for ``localhost`` and ``127.0.0.1`` and its key (PEM files)."""
    cert, key = directory / f"{name}-cert.pem", directory / f"{name}-key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


class _Terminator:
    """A terminator process listening on ``port`` in front of ``target_port``."""

    def __init__(self, kind: str, port: int, target_port: int, *extra: str) -> None:
        self.args = [kind, str(port), str(target_port), *extra]
        self.port = port
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> _Terminator:
        self._proc = subprocess.Popen([sys.executable, "-m", "tests.support.proxies", *self.args],
                                      cwd=Path(__file__).parents[2])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                if self._proc.poll() is not None:
                    raise RuntimeError(f"the terminator exited ({self._proc.returncode})") from None
                time.sleep(0.05)
        raise RuntimeError("the terminator did not listen in 20 s")

    def __exit__(self, *_exc: object) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(10)


class TlsTerminator(_Terminator):
    """``with TlsTerminator(port, target_port, cert, key):`` TLS on ``port``."""

    def __init__(self, port: int, target_port: int, cert: Path, key: Path) -> None:
        super().__init__("tls", port, target_port, str(cert), str(key))


class SaslPlainTerminator(_Terminator):
    """``with SaslPlainTerminator(port, target_port, user, password):`` SASL/PLAIN on ``port``."""

    def __init__(self, port: int, target_port: int, user: str, password: str) -> None:
        super().__init__("sasl", port, target_port, user, password)


# --- the processes -------------------------------------------------------------------------------


async def _relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, ssl.SSLError, OSError):
        pass
    finally:
        writer.close()


async def _frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


def _sized(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def _uvarint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


def _to_uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _skip_tags(data: bytes, at: int) -> int:
    count, at = _uvarint(data, at)
    for _ in range(count):
        _tag, at = _uvarint(data, at)
        size, at = _uvarint(data, at)
        at += size
    return at


def _plain_login(request: bytes, version: int) -> tuple[str, str]:
    """The user and password of a ``SaslAuthenticate`` request carrying a PLAIN message."""
    (client_id_len,) = struct.unpack(">h", request[8:10])
    at = 10 + max(client_id_len, 0)
    if version >= 2:  # flexible: header tags, then compact bytes
        at = _skip_tags(request, at)
        size, at = _uvarint(request, at)
        auth = request[at:at + size - 1]
    else:
        (size,) = struct.unpack(">i", request[at:at + 4])
        auth = request[at + 4:at + 4 + size]
    _authzid, user, password = auth.split(b"\0")
    return user.decode(), password.decode()


def _authenticate_response(correlation: int, version: int, error: int, message: str | None) -> bytes:
    text = message.encode() if message is not None else None
    if version >= 2:
        head = struct.pack(">i", correlation) + b"\0"
        body = struct.pack(">h", error) + (_to_uvarint(len(text) + 1) + text if text is not None else b"\0")
        return _sized(head + body + b"\x01" + struct.pack(">q", 0) + b"\0")
    shown = struct.pack(">h", len(text)) + text if text is not None else struct.pack(">h", -1)
    body = struct.pack(">h", error) + shown
    body += struct.pack(">i", 0) + (struct.pack(">q", 0) if version >= 1 else b"")
    return _sized(struct.pack(">i", correlation) + body)


async def _broker(target_port: int, client_writer: asyncio.StreamWriter
                  ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
    """A connection to the broker for one client's; None (the client's closed) when refused."""
    try:
        return await asyncio.open_connection("127.0.0.1", target_port)
    except OSError:
        client_writer.close()
        return None


async def _listen(handle: Any, port: int, context: ssl.SSLContext | None = None) -> None:
    server = await asyncio.start_server(handle, "127.0.0.1", port, ssl=context)
    async with server:
        await server.serve_forever()


async def _serve_sasl(port: int, target_port: int, user: str, password: str) -> None:
    async def handle(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        connected = await _broker(target_port, client_writer)
        if connected is None:
            return
        broker_reader, broker_writer = connected
        try:
            while True:
                request = await _frame(client_reader)
                api_key, version, correlation = struct.unpack(">hhi", request[:8])
                if api_key == _SASL_HANDSHAKE:  # mechanisms: PLAIN only
                    mechanism = b"PLAIN"
                    body = struct.pack(">hi", 0, 1) + struct.pack(">h", len(mechanism)) + mechanism
                    client_writer.write(_sized(struct.pack(">i", correlation) + body))
                elif api_key == _SASL_AUTHENTICATE:
                    try:
                        given = _plain_login(request, version)
                    except ValueError:  # not a PLAIN message
                        given = ("", "")
                    if given != (user, password):
                        client_writer.write(_authenticate_response(
                            correlation, version, _SASL_AUTHENTICATION_FAILED,
                            "Authentication failed: Invalid username or password"))
                        await client_writer.drain()
                        client_writer.close()
                        broker_writer.close()
                        return
                    client_writer.write(_authenticate_response(correlation, version, 0, None))
                    await client_writer.drain()
                    break
                elif api_key != _API_VERSIONS:  # a request before the login: a SASL listener hangs up
                    client_writer.close()
                    broker_writer.close()
                    return
                else:  # ApiVersions before the login: the broker answers
                    broker_writer.write(_sized(request))
                    await broker_writer.drain()
                    client_writer.write(_sized(await _frame(broker_reader)))
                await client_writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            client_writer.close()
            broker_writer.close()
            return
        await asyncio.gather(_relay(client_reader, broker_writer), _relay(broker_reader, client_writer))

    await _listen(handle, port)


async def _serve_tls(port: int, target_port: int, cert: str, key: str) -> None:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)

    async def handle(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        connected = await _broker(target_port, client_writer)
        if connected is not None:
            broker_reader, broker_writer = connected
            await asyncio.gather(_relay(client_reader, broker_writer), _relay(broker_reader, client_writer))

    await _listen(handle, port, context)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("kind", choices=["tls", "sasl"])
    p.add_argument("port", type=int)
    p.add_argument("target_port", type=int)
    p.add_argument("first", help="tls: certificate file; sasl: user")
    p.add_argument("second", help="tls: key file; sasl: password")
    args = p.parse_args()
    serve = _serve_tls if args.kind == "tls" else _serve_sasl
    asyncio.run(serve(args.port, args.target_port, args.first, args.second))


if __name__ == "__main__":
    main()
