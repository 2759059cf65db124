"""TLS for tests: a self-signed certificate, and a TLS terminator in front of a plaintext port.

The terminator is a real process (``python -m tests.support.tls``): it accepts TLS connections
with the given certificate and relays the bytes to the plaintext port, as stunnel does in front
of a broker (tansu's own TLS cannot be used: research/facts.md). Clients that verify the
certificate against another CA are refused by their own TLS layer.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path


def self_signed(directory: Path, name: str = "server") -> tuple[Path, Path]:
    """A certificate for ``localhost`` and ``127.0.0.1`` and its key (PEM files)."""
    cert, key = directory / f"{name}-cert.pem", directory / f"{name}-key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


class TlsTerminator:
    """``with TlsTerminator(port, target_port, cert, key):`` TLS on ``port`` relayed to ``target_port``."""

    def __init__(self, port: int, target_port: int, cert: Path, key: Path) -> None:
        self.port, self.target_port, self.cert, self.key = port, target_port, cert, key
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> TlsTerminator:
        self._proc = subprocess.Popen([sys.executable, "-m", "tests.support.tls", str(self.port), str(self.target_port),
                                       str(self.cert), str(self.key)], cwd=Path(__file__).parents[2])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                if self._proc.poll() is not None:
                    raise RuntimeError(f"the TLS terminator exited ({self._proc.returncode})") from None
                time.sleep(0.05)
        raise RuntimeError("the TLS terminator did not listen in 20 s")

    def __exit__(self, *_exc: object) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(10)


async def _relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, ssl.SSLError, OSError):
        pass
    finally:
        writer.close()


async def _serve(port: int, target_port: int, cert: str, key: str) -> None:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)

    async def handle(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            broker_reader, broker_writer = await asyncio.open_connection("127.0.0.1", target_port)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(_relay(client_reader, broker_writer), _relay(broker_reader, client_writer))

    server = await asyncio.start_server(handle, "127.0.0.1", port, ssl=context)
    async with server:
        await server.serve_forever()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("port", type=int)
    p.add_argument("target_port", type=int)
    p.add_argument("cert")
    p.add_argument("key")
    args = p.parse_args()
    asyncio.run(_serve(args.port, args.target_port, args.cert, args.key))


if __name__ == "__main__":
    main()
