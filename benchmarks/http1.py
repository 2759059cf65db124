"""A lean HTTP/1.1 keep-alive client for load generators (wrk's approach in Python).

httpx spends about 1.5 ms of CPU per request in the generator's process; at 1,000 requests/s
that is most of a core taken from the server it measures on a 2-core machine. This client sends
a prebuilt request and reads the answer with asyncio streams, so the generator costs a tenth of
that. It speaks only what the benchmarks need: POST with a JSON body, answers with a
Content-Length or chunked body, one request at a time per connection.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import urlsplit


class Http1Error(Exception):
    """The connection broke or the answer was not HTTP/1.1 as expected."""


class LeanResponse:
    def __init__(self, status: int, body: bytes) -> None:
        self.status_code = status
        self.content = body

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")


class LeanClient:
    """One keep-alive connection to ``url``; reconnects when the server closes it."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def __aenter__(self) -> LeanClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._writer is not None:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except OSError:
                pass
        self._reader = self._writer = None

    async def post(self, path: str, json_body: Any) -> LeanResponse:
        body = json.dumps(json_body).encode()
        head = (f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        assert self._reader is not None and self._writer is not None
        try:
            self._writer.write(head + body)
            return await self._read(self._reader)
        except (OSError, asyncio.IncompleteReadError, ValueError) as e:
            await self.aclose()
            raise Http1Error(f"{type(e).__name__}: {e}") from None

    async def _read(self, reader: asyncio.StreamReader) -> LeanResponse:
        header = await reader.readuntil(b"\r\n\r\n")
        lines = header.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        fields = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
        if fields.get("transfer-encoding", "").lower() == "chunked":
            parts = []
            while True:
                size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                chunk = await reader.readexactly(size + 2)
                if size == 0:
                    break
                parts.append(chunk[:-2])
            body = b"".join(parts)
        else:
            body = await reader.readexactly(int(fields.get("content-length", "0")))
        if fields.get("connection", "").lower() == "close":
            await self.aclose()
        return LeanResponse(status, body)
