"""A Schema Registry over real HTTP for tests: the subset of Confluent's REST API streamsql's client
uses, served from an in-memory store in a background thread.

No Schema Registry can be installed on the project's machines, and ``mock://`` registries are
invisible to other processes (Spark's Python workers, a server under test). This one is reachable
from every process on the machine, so tests exercise the HTTP client, the workers' lookups of ids
they have not seen, and a server process sharing schemas with its test harness. Like confluent's
mock client, it keeps the references a schema lists without checking that they exist.
"""

from __future__ import annotations

import base64
import json
import re
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from streamsql.errors import ConfigError
from streamsql.formats.schema_registry import RegisteredSchema, SchemaReference, _MemoryRegistry

_SUBJECT = r"/subjects/(?P<subject>[^/]+)/versions"


class RegistryServer:
    """``with RegistryServer() as registry: ... registry.url ...``

    ``tls=(certificate, key)`` (PEM files) serves HTTPS, and ``client_ca`` (a PEM file) then asks
    every client for a certificate it signed (mutual TLS); ``user_info="user:password"`` (HTTP
    basic auth) or ``token`` (a bearer token) is asked of every request (401 otherwise), as a
    secured registry does."""

    def __init__(self, tls: tuple[Path, Path] | None = None, user_info: str | None = None,
                 token: str | None = None, client_ca: Path | None = None) -> None:
        self.store = _MemoryRegistry()
        self._lock = threading.Lock()
        self._scheme = "https" if tls else "http"
        expected = ("Basic " + base64.b64encode(user_info.encode()).decode() if user_info
                    else f"Bearer {token}" if token else None)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: Any) -> None:  # quiet
                pass

            def _reply(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _allowed(self) -> bool:
                if expected is None or self.headers.get("Authorization") == expected:
                    return True
                self._reply(401, {"error_code": 401, "message": "Unauthorized"})
                return False

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                if self._allowed():
                    with server._lock:
                        self._reply(*server._get(urlsplit(self.path).path))

            def do_POST(self) -> None:  # noqa: N802
                if not self._allowed():
                    return
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    payload = json.loads(self.rfile.read(length) or b"{}")
                except json.JSONDecodeError:
                    self._reply(422, {"error_code": 42201, "message": "Invalid JSON"})
                    return
                with server._lock:
                    self._reply(*server._post(urlsplit(self.path).path, payload))

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(certfile=str(tls[0]), keyfile=str(tls[1]))
            if client_ca is not None:
                context.verify_mode = ssl.CERT_REQUIRED
                context.load_verify_locations(cafile=str(client_ca))
            self._http.socket = context.wrap_socket(self._http.socket, server_side=True)
        self._thread = threading.Thread(target=self._http.serve_forever, name="registry-server", daemon=True)

    @property
    def url(self) -> str:
        return f"{self._scheme}://127.0.0.1:{self._http.server_address[1]}"

    def start(self) -> RegistryServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()

    def __enter__(self) -> RegistryServer:
        return self.start()

    def __exit__(self, *_exc: Any) -> None:
        self.stop()

    def reset(self) -> None:
        """Forget every schema: test cases that ask for the same ids run one after another."""
        with self._lock:
            self.store = _MemoryRegistry()

    def register(self, subject: str, text: str, schema_type: str, schema_id: int | None = None,
                 references: tuple[SchemaReference, ...] = ()) -> int:
        """Register directly, honouring a requested id (the registry's import mode)."""
        with self._lock:
            return self.store.register(subject, text, schema_type, schema_id, references)

    # -- the API ---------------------------------------------------------------------------------

    def _get(self, path: str) -> tuple[int, Any]:
        m = re.fullmatch(r"/schemas/ids/(\d+)", path)
        if m:
            try:
                rs = self.store.get(int(m.group(1)))
            except ConfigError:
                return 404, {"error_code": 40403, "message": "Schema not found"}
            return 200, _body(rs, {})
        m = re.fullmatch(_SUBJECT + r"(?:/(?P<version>latest|\d+))?", path)
        if not m:
            return 404, {"error_code": 404, "message": f"no such resource {path}"}
        subject = unquote(m.group("subject"))
        ids = self.store.subjects.get(subject)
        if not ids:
            return 404, {"error_code": 40401, "message": f"Subject '{subject}' not found."}
        version = m.group("version")
        if version is None:
            return 200, list(range(1, len(ids) + 1))
        index = len(ids) if version == "latest" else int(version)
        if not 1 <= index <= len(ids):
            return 404, {"error_code": 40402, "message": "Version not found."}
        rs = self.store.by_id[ids[index - 1]]
        return 200, _body(rs, {"subject": subject, "version": index, "id": rs.id})

    def _post(self, path: str, payload: dict[str, Any]) -> tuple[int, Any]:
        m = re.fullmatch(_SUBJECT, path)
        if not m or "schema" not in payload:
            return 404, {"error_code": 404, "message": f"no such resource {path}"}
        references = tuple(SchemaReference(r["name"], r["subject"], int(r["version"]))
                           for r in payload.get("references") or [])
        schema_id = self.store.register(unquote(m.group("subject")), payload["schema"],
                                        payload.get("schemaType", "AVRO"), references=references)
        return 200, {"id": schema_id}


def _body(rs: RegisteredSchema, head: dict[str, Any]) -> dict[str, Any]:
    """A schema as the registry's REST API shows it."""
    body = {**head, "schema": rs.text}
    if rs.type != "AVRO":
        body["schemaType"] = rs.type
    if rs.references:
        body["references"] = [{"name": r.name, "subject": r.subject, "version": r.version} for r in rs.references]
    return body
