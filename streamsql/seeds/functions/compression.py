"""Seed functions GZIP / GUNZIP: text <-> gzip-compressed bytes (UTF-8 inside)."""

from __future__ import annotations

import gzip as _gzip

from streamsql.udf import udf


@udf(name="GZIP", returns="BYTES", params=["VARCHAR"], description="Gzip-compresses the UTF-8 text.")
def gzip_text(text: str | None) -> bytes | None:
    return None if text is None else _gzip.compress(text.encode("utf-8"), mtime=0)


@udf(name="GUNZIP", returns="VARCHAR", params=["BYTES"],
     description="Decompresses gzip bytes to UTF-8 text; bytes that are not gzip go to the processing log.")
def gunzip_bytes(data: bytes | None) -> str | None:
    return None if data is None else _gzip.decompress(bytes(data)).decode("utf-8")
