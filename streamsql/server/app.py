"""The HTTP surface: a small ASGI application with ksqlDB's routes, served by hypercorn
(HTTP/1.1, HTTP/2 cleartext with prior knowledge or upgrade, and TLS with ALPN).

Handlers parse the request, call :class:`~streamsql.server.service.KsqlService` on worker threads
(engine calls block on Spark and Kafka, and must not stall the event loop that streams other
clients' rows), and write ksqlDB's wire formats. Every failure answers with ksqlDB's error
envelope (``errors.py``); an unexpected exception is logged with its trace and the client gets
the sanitized 50000 message, never a stack trace.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import json
import logging
import secrets
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from streamsql import entities
from streamsql.errors import StreamsqlError
from streamsql.runtime import results as r
from streamsql.runtime.session import Session
from streamsql.server import authorization as authz
from streamsql.server import web_console
from streamsql.server.authorization import Account, Principal, RolePolicy
from streamsql.server.errors import (
    BAD_REQUEST,
    HTTP2_ONLY,
    METHOD_NOT_ALLOWED,
    NOT_FOUND,
    PAYLOAD_TOO_LARGE,
    SANITIZED_SERVER_ERROR,
    SERVER_ERROR,
    SERVER_NOT_READY,
    UNAUTHORIZED,
    UNEXPECTED_ERRORS,
    ServerError,
    bad_request,
    client_message,
    statement_error,
)
from streamsql.server.limits import DEFAULTS, PERSISTENT_ACTIVE_LIMIT, PULL_MAX_QPS, LimitSettings, QueryLimits
from streamsql.server.service import KsqlService, QueryHandle, normalize_overrides, normalize_variables
from streamsql.sql import ast

log = logging.getLogger("streamsql.server")

KSQL_JSON = "application/vnd.ksql.v1+json"
JSON = "application/json"
DELIMITED = "application/vnd.ksqlapi.delimited.v1"
#: the ksqlDB version clients see in /info (the CLI and Java client compare it); streamsql speaks 0.29's API
KSQL_API_VERSION = "0.29.0"
#: how much of an over-limit body the server reads (and drops) before answering 413
DRAIN_BYTES = 64 * 1024 * 1024
#: how long a refused request's remaining body is read before the answer goes anyway
DRAIN_WAIT_S = 5.0

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass
class ServerSettings:
    max_request_bytes: int = 4 * 1024 * 1024
    #: user -> password and roles for HTTP basic auth (``authorization.load_users``); empty = no
    #: authentication
    users: dict[str, Account] = field(default_factory=dict)
    #: seconds a request with commandSequenceNumber waits for that command
    command_wait_s: float = 5.0
    #: ksqlDB's query limits (``limits.py``)
    limits: LimitSettings = field(default_factory=LimitSettings)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"'{name}' is not a JSON value")


def parse_json(raw: bytes | str, what: str) -> Any:
    """A client's JSON as ksqlDB's Jackson reads it: strict (``NaN``/``Infinity`` are not JSON)
    and a 400 naming the problem for anything else, nesting too deep for the parser included."""
    try:
        return json.loads(raw, parse_constant=_refuse_constant)
    except RecursionError:
        raise bad_request(f"Invalid JSON in {what}: nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise bad_request(f"Invalid JSON in {what}: {e}") from None


class Request:
    def __init__(self, scope: Scope, receive: Receive, settings: ServerSettings) -> None:
        self.scope = scope
        self.receive = receive
        self.settings = settings
        self.method: str = scope["method"]
        self.path: str = scope["path"].rstrip("/") or "/"
        self.headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        self.body_done = False
        #: who sent the request (set by authentication; anyone may do anything without it)
        self.principal = Principal("", authz.ADMIN)

    @property
    def params(self) -> dict[str, str]:
        """The query string's parameters (the last value of a repeated one)."""
        from urllib.parse import parse_qsl

        return dict(parse_qsl(self.scope.get("query_string", b"").decode("latin-1")))

    @property
    def http2(self) -> bool:
        return str(self.scope.get("http_version", "1.1")).startswith("2")

    def accepts(self, *types: str) -> str | None:
        """The first of ``types`` the Accept header lists (None if it lists none of them)."""
        accept = self.headers.get("accept", "")
        listed = [part.split(";")[0].strip().lower() for part in accept.split(",") if part.strip()]
        for ty in listed:
            if ty in types:
                return ty
        return None

    async def body(self) -> bytes:
        limit = self.settings.max_request_bytes
        declared = self.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await self._discard_body(DRAIN_BYTES)
            raise ServerError(PAYLOAD_TOO_LARGE, f"Request body of {declared} bytes exceeds the limit of {limit} bytes")
        chunks: list[bytes] = []
        size = 0
        while not self.body_done:
            msg = await self.receive()
            if msg["type"] == "http.disconnect":
                raise ConnectionAbortedError("client went away")
            chunk = msg.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise ServerError(PAYLOAD_TOO_LARGE, f"Request body exceeds the limit of {limit} bytes")
            chunks.append(chunk)
            self.body_done = not msg.get("more_body", False)
        return b"".join(chunks)

    async def _discard_body(self, at_most: int) -> None:
        """Read and drop up to ``at_most`` bytes of a body about to be refused: answering while
        the client is still sending makes many clients see a reset instead of the 413."""
        size = 0
        while not self.body_done and size <= at_most:
            msg = await self.receive()
            if msg["type"] == "http.disconnect":
                return
            size += len(msg.get("body", b""))
            self.body_done = not msg.get("more_body", False)

    async def json(self) -> dict[str, Any]:
        data = parse_json(await self.body() or b"{}", "request")
        if not isinstance(data, dict):
            raise bad_request("Invalid JSON in request: expected a JSON object")
        return data


class Response:
    """Writes one response: headers once, then body chunks (chunked on HTTP/1.1)."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.started = False
        self.closed = False

    async def start(self, status: int, content_type: str, extra: list[tuple[str, str]] | None = None) -> None:
        headers = [(b"content-type", content_type.encode())]
        headers += [(k.encode(), v.encode()) for k, v in (extra or [])]
        self.started = True
        await self._send({"type": "http.response.start", "status": status, "headers": headers})

    async def write(self, data: str | bytes) -> None:
        if self.closed:
            return
        await self._send({"type": "http.response.body", "body": data.encode() if isinstance(data, str) else data,
                          "more_body": True})

    async def end(self, data: str | bytes = b"") -> None:
        if self.closed:
            return
        self.closed = True
        await self._send({"type": "http.response.body", "body": data.encode() if isinstance(data, str) else data,
                          "more_body": False})

    async def json(self, status: int, body: Any, content_type: str = JSON,
                   extra: list[tuple[str, str]] | None = None) -> None:
        await self.start(status, content_type, extra)
        await self.end(json.dumps(body))


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


class KsqlApp:
    """The ASGI application."""

    def __init__(self, service: KsqlService, settings: ServerSettings | None = None) -> None:
        self.service = service
        self.settings = settings or ServerSettings()
        self.pool = ThreadPoolExecutor(max_workers=256, thread_name_prefix="ksql-http")
        self.routes: dict[tuple[str, str], Callable[[Request, Response], Awaitable[None]]] = {
            ("GET", "/"): self.root, ("GET", "/info"): self.info, ("GET", "/healthcheck"): self.healthcheck,
            ("GET", "/chc/ready"): self.empty, ("GET", "/chc/live"): self.empty, ("GET", "/status"): self.statuses,
            ("GET", "/v1/metadata"): self.metadata, ("GET", "/v1/metadata/id"): self.metadata_id,
            ("POST", "/ksql"): self.ksql, ("POST", "/ksql/terminate"): self.terminate, ("POST", "/query"): self.query,
            ("POST", "/query-stream"): self.query_stream, ("POST", "/close-query"): self.close_query,
            ("POST", "/inserts-stream"): self.inserts_stream, ("GET", "/topology"): self.topology,
            ("GET", "/metrics"): self.metrics, ("GET", "/vocabulary"): self.vocabulary,
            ("GET", "/processing-log"): self.processing_log,
            ("GET", "/console"): self.console_page, ("GET", "/console/session"): self.console_session,
            ("POST", "/console/login"): self.console_login, ("POST", "/console/logout"): self.console_logout,
        }
        #: paths anyone may reach: health checks, and the console's page and login (its data
        #: comes from the API behind the login)
        self.open_paths = {"/healthcheck", "/chc/ready", "/chc/live", "/console", "/console/login",
                           "/console/logout"}
        self.console_sessions = web_console.ConsoleSessions()
        self.policy = RolePolicy(self.settings.users)
        self.limits = QueryLimits(self.settings.limits)
        #: requests that start persistent queries run one at a time while their limit is set, so
        #: two of them cannot both pass the check
        self._persistent_gate = threading.Lock()
        #: query id -> the user whose request runs it: only they (or an admin) may close it
        self._query_owners: dict[str, str] = {}
        from streamsql.runtime.metrics import ServerMetrics

        #: counted from the server's start, not from the first scrape
        self.server_metrics = ServerMetrics(service.engine)
        self.server_metrics.watch_push_queries(lambda: self.limits.push_queries)

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.pool, fn, *args)

    # --- dispatch ------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif msg["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        req = Request(scope, receive, self.settings)
        resp = Response(send)
        try:
            await self.dispatch(req, resp)
        except ServerError as e:
            self.server_metrics.count_request(self._endpoint(req.path), e.status)
            if not resp.started:
                # a page's own fetch gets no basic auth challenge: the browser would open its
                # login dialog over the console's login form
                challenge = e.status == 401 and req.headers.get("sec-fetch-mode", "navigate") == "navigate"
                extra = [("WWW-Authenticate", 'Basic realm="KsqlServer"')] if challenge else []
                if e.error_code == SERVER_NOT_READY:
                    extra.append(("Retry-After", "10"))
                await self._drain_refused(req)
                await resp.json(e.status, e.envelope(), extra=extra)
            else:
                await resp.end()
        except ConnectionAbortedError:
            pass
        except Exception:
            self.server_metrics.count_request(self._endpoint(req.path), 500)
            UNEXPECTED_ERRORS.record()
            log.exception("%s %s failed", req.method, req.path)
            if not resp.started:
                await resp.json(500, ServerError(SERVER_ERROR, SANITIZED_SERVER_ERROR).envelope())
            else:
                await resp.end()

    async def _drain_refused(self, req: Request) -> None:
        """Read the rest of a refused request's body (bounded, briefly) before answering: an
        HTTP/2 stream answered while its client still sends lost the whole connection, so the
        client's next request on it failed (a 401 to a chunked /inserts-stream did so)."""
        if req.body_done:
            return
        try:
            await asyncio.wait_for(req._discard_body(self.settings.max_request_bytes), DRAIN_WAIT_S)
        except (TimeoutError, ConnectionAbortedError):
            pass

    async def dispatch(self, req: Request, resp: Response) -> None:
        elsewhere = web_console.cross_origin(req.headers, str(req.scope.get("scheme", "http")))
        if elsewhere is not None:
            raise ServerError(authz.FORBIDDEN, f"Forbidden: a browser's request from another origin is refused "
                                               f"({elsewhere}). Nothing was executed.")
        asset = req.method == "GET" and req.path.startswith("/console/") and req.path != "/console/session"
        # a browser opening the server's address is sent to the console's login, not challenged
        browser_root = req.path == "/" and req.accepts("text/html") is not None
        if self.settings.users and req.path not in self.open_paths and not asset and not browser_root:
            req.principal = self.policy.principal(self.authenticate(req))
        handler = self.routes.get((req.method, req.path))
        if handler is None and asset:
            handler = self.console_asset
        if handler is None and req.method == "GET" and req.path.startswith("/status/"):
            handler = self.status_one
        if handler is None and req.method == "GET" and req.path.startswith("/is_valid_property/"):
            handler = self.is_valid_property
        if handler is None:
            if any(path == req.path for _, path in self.routes):
                raise ServerError(METHOD_NOT_ALLOWED, f"Method {req.method} is not allowed on {req.path}")
            raise ServerError(NOT_FOUND, f"Not Found: {req.path}")
        if not self.service.ready.is_set() and req.path not in self.open_paths and not asset:
            raise ServerError(SERVER_NOT_READY, self.service.start_error and
                              f"Server failed to start: {self.service.start_error}" or "Server initializing")
        await handler(req, resp)
        self.server_metrics.count_request(self._endpoint(req.path), 200)

    def _endpoint(self, path: str) -> str:
        """A metrics label for the request's path: a route, or a family of them (a client's
        random paths must not each make a series)."""
        if any(route == path for _, route in self.routes):
            return path
        for prefix in ("/status/", "/is_valid_property/", "/console/"):
            if path.startswith(prefix):
                return prefix + "*"
        return "other"

    def authenticate(self, req: Request) -> str:
        """The user of the request's basic auth credentials or console session, or 401."""
        header = req.headers.get("authorization", "")
        if header[:6].lower() == "basic ":
            try:
                user, _, password = base64.b64decode(header[6:].strip()).decode("utf-8").partition(":")
            except (binascii.Error, UnicodeDecodeError):
                user, password = "", ""
            if self._password_matches(user, password):
                return user
            raise ServerError(UNAUTHORIZED, "Unauthorized")
        token = web_console.cookie_token(req.headers)
        session_user = self.console_sessions.user(token) if token is not None else None
        if session_user is not None and session_user in self.settings.users:
            return session_user
        raise ServerError(UNAUTHORIZED, "Unauthorized")

    def _password_matches(self, user: str, password: str) -> bool:
        account = self.settings.users.get(user)
        # compared even for an unknown user, so the answer's time does not tell which users exist
        expected = account.password if account is not None else secrets.token_hex(16)
        return hmac.compare_digest(expected.encode(), password.encode()) and account is not None

    # --- simple endpoints ----------------------------------------------------------------------

    async def root(self, req: Request, resp: Response) -> None:
        """ksqlDB's redirect to ``/info``; a browser asking for a page goes to the console."""
        target = "/console" if req.accepts("text/html") else "/info"
        await resp.start(307, "text/plain", [("Location", target)])
        await resp.end()

    # --- the web console (web_console.py) ------------------------------------------------------

    async def console_page(self, req: Request, resp: Response) -> None:
        await self._send_asset(resp, "index.html")

    async def console_asset(self, req: Request, resp: Response) -> None:
        await self._send_asset(resp, req.path[len("/console/"):])

    async def _send_asset(self, resp: Response, name: str) -> None:
        found = await self.run(web_console.asset, name)
        if found is None:
            raise ServerError(NOT_FOUND, f"Not Found: /console/{name}")
        body, content_type = found
        await resp.start(200, content_type, web_console.SECURITY_HEADERS)
        await resp.end(body)

    async def console_session(self, req: Request, resp: Response) -> None:
        """Who the console is logged in as (401 when it is not)."""
        await resp.json(200, {"user": req.principal.user, "role": req.principal.role,
                              "authentication": bool(self.settings.users)})

    async def console_login(self, req: Request, resp: Response) -> None:
        """``{"user", "password"}`` checked against the users file; a session cookie on success."""
        fields = web_console.login_fields(await req.json())
        if fields is None:
            raise bad_request("Expected {\"user\": \"...\", \"password\": \"...\"}")
        user, password = fields
        if not self.settings.users:
            await resp.json(200, {"user": "", "role": authz.ADMIN, "authentication": False})
            return
        if not self._password_matches(user, password):
            raise ServerError(UNAUTHORIZED, "Unauthorized: wrong user or password")
        token = self.console_sessions.open(user)
        principal = self.policy.principal(user)
        secure = req.scope.get("scheme") == "https"
        cookie = web_console.set_cookie(token, secure, self.console_sessions.lifetime_s)
        await resp.json(200, {"user": user, "role": principal.role, "authentication": True},
                        extra=[("Set-Cookie", cookie), ("Cache-Control", "no-store")])

    async def console_logout(self, req: Request, resp: Response) -> None:
        token = web_console.cookie_token(req.headers)
        if token is not None:
            self.console_sessions.close(token)
        await req.body()
        secure = req.scope.get("scheme") == "https"
        await resp.json(200, {}, extra=[("Set-Cookie", web_console.set_cookie("", secure, 0))])

    async def processing_log(self, req: Request, resp: Response) -> None:
        """The processing log's latest records (``?limit=N``, at most 100), newest last: what the
        console shows beside the pipeline. Anyone who may PRINT it may read it here."""
        raw = req.params.get("limit", "20")
        if not raw.isdigit() or not 1 <= int(raw) <= 100:
            raise bad_request(f"'limit' must be a number from 1 to 100, not '{raw}'")
        try:
            entries = await self.run(self.service.processing_log, int(raw))
        except StreamsqlError as e:  # Kafka did not answer: said, not a trace
            raise ServerError(SERVER_ERROR, f"Could not read the processing log: {e.message}") from None
        await resp.json(200, {"topic": self.service.engine.processing_log_topic, "entries": entries})

    async def vocabulary(self, req: Request, resp: Response) -> None:
        """What completion offers, for the console and the remote shell (``runtime/vocabulary.py``)."""
        from streamsql.runtime.vocabulary import engine_vocabulary, to_json

        vocab = await self.run(engine_vocabulary, self.service.engine)
        await resp.json(200, to_json(vocab))

    async def empty(self, req: Request, resp: Response) -> None:
        await resp.json(200, {})

    async def info(self, req: Request, resp: Response) -> None:
        await resp.json(200, {"KsqlServerInfo": {"version": KSQL_API_VERSION, "kafkaClusterId": self.service.cluster_id,
                                                 "ksqlServiceId": self.service.service_id, "serverStatus": "RUNNING"}},
                        self._json_type(req))

    async def healthcheck(self, req: Request, resp: Response) -> None:
        ready = self.service.ready.is_set()
        kafka_ok = False
        if ready:
            try:
                kafka_ok = bool(await self.run(self.service.engine.admin.cluster_id))
            except Exception as e:
                log.warning("healthcheck: Kafka unreachable: %s", e)
        healthy = ready and kafka_ok
        await resp.json(200, {"isHealthy": healthy,
                              "details": {"metastore": {"isHealthy": ready}, "kafka": {"isHealthy": kafka_ok},
                                          "commandRunner": {"isHealthy": ready}},
                              "serverState": "READY" if ready else "STARTING"}, self._json_type(req))

    async def statuses(self, req: Request, resp: Response) -> None:
        await resp.json(200, {"commandStatuses": self.service.statuses()}, self._json_type(req))

    async def status_one(self, req: Request, resp: Response) -> None:
        parts = req.path.split("/")[2:]
        if len(parts) != 3:
            raise ServerError(NOT_FOUND, "Expected /status/<type>/<entity>/<action>")
        status = self.service.status(*parts)
        if status is None:
            raise ServerError(NOT_FOUND, f"Command not found: {'/'.join(parts)}")
        await resp.json(200, status, self._json_type(req))

    async def topology(self, req: Request, resp: Response) -> None:
        """streamsql's own endpoint: the pipeline as it runs, ``?format=text|json|dot|mermaid``
        (default json) and ``?query=ID`` for one query (``runtime/topology.py``)."""
        from streamsql.errors import StreamsqlError
        from streamsql.runtime.topology import FORMATS, render

        fmt = req.params.get("format", "json").lower()
        if fmt not in FORMATS:
            raise bad_request(f"Unknown topology format '{fmt}'. Use one of: {', '.join(FORMATS)}")
        try:
            graph = await self.run(self.service.engine.topology, req.params.get("query") or None)
        except StreamsqlError as e:
            raise bad_request(str(e)) from None
        if fmt == "json":
            await resp.json(200, graph.to_json())
            return
        await resp.start(200, "text/vnd.graphviz; charset=utf-8" if fmt == "dot" else "text/plain; charset=utf-8")
        await resp.end(render(graph, fmt))

    async def metrics(self, req: Request, resp: Response) -> None:
        """Prometheus' text format of the engine's query series (``runtime/metrics.py``)."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        body = await self.run(generate_latest, self.server_metrics.registry)
        await resp.start(200, CONTENT_TYPE_LATEST)
        await resp.end(body + UNEXPECTED_ERRORS.exposition())

    async def metadata(self, req: Request, resp: Response) -> None:
        await resp.json(200, {"version": KSQL_API_VERSION, "clusterId": self._cluster_id()})

    async def metadata_id(self, req: Request, resp: Response) -> None:
        await resp.json(200, {"clusterId": self._cluster_id()})

    def _cluster_id(self) -> dict[str, Any]:
        return {"scope": {"path": [], "clusters": {"kafka-cluster": self.service.cluster_id,
                                                   "ksql-cluster": self.service.service_id}}}

    async def is_valid_property(self, req: Request, resp: Response) -> None:
        name = req.path.split("/", 2)[2]
        normalize_overrides({name: ""}, self.service.property_policy)
        await resp.json(200, True)

    @staticmethod
    def _json_type(req: Request) -> str:
        return req.accepts(KSQL_JSON, JSON) or JSON

    # --- /ksql ---------------------------------------------------------------------------------

    async def ksql(self, req: Request, resp: Response) -> None:
        data = await req.json()
        overrides = normalize_overrides(data.get("streamsProperties"), self.service.property_policy)
        variables = normalize_variables(data.get("sessionVariables"))
        if data.get("commandSequenceNumber") is not None:
            await self.run(self.service.wait_for_seq, data["commandSequenceNumber"], self.settings.command_wait_s)
        text = data.get("ksql")
        gated = False
        statements: list[ast.Statement] | None = None
        restricted = req.principal.role != authz.ADMIN
        persistent_limited = self.limits.settings.persistent_active_limit < DEFAULTS[PERSISTENT_ACTIVE_LIMIT]
        if isinstance(text, str) and text.strip() and (restricted or persistent_limited):
            statements = await self.run(self._parse, text, variables)
            authz.check_statements(req.principal, statements)
            gated = persistent_limited and any(isinstance(s, (ast.CreateAsSelect, ast.InsertInto))
                                               for s in statements)
            if gated:
                result = await self.run(self._execute_within_persistent_limit, statements, text, overrides, variables)
                await resp.json(200, result, self._json_type(req))
                return
        result = await self.run(self.service.execute_statements, text, overrides, variables, statements)
        await resp.json(200, result, self._json_type(req))

    def _parse(self, text: str, variables: dict[str, str]) -> list[ast.Statement]:
        """The request's statements, parsed as the service parses them, for the checks that must
        see every statement before any runs; a parse error is the service's 400 statement error."""
        try:
            return self.service.engine.parse(text, Session(variables=dict(variables)))
        except StreamsqlError as e:
            raise statement_error(e.message, e.statement or text.strip()) from None

    def _execute_within_persistent_limit(self, statements: list[ast.Statement], text: str,
                                         overrides: dict[str, str], variables: dict[str, str]) -> Any:
        with self._persistent_gate:
            self.limits.check_persistent(statements, set(self.service.engine.catalog.queries), text)
            return self.service.execute_statements(text, overrides, variables, statements)

    async def terminate(self, req: Request, resp: Response) -> None:
        data = await req.json()  # read before a refusal: an HTTP/1.1 connection with its body unread closes
        authz.check_action(req.principal, "TERMINATE CLUSTER (/ksql/terminate)", authz.ADMIN)
        topics = data.get("deleteTopicList")
        if topics is not None and not isinstance(topics, list):
            raise bad_request("'deleteTopicList' must be a list of topic names or patterns")
        result = await self.run(self.service.terminate_cluster, topics)
        await resp.json(200, result, self._json_type(req))

    # --- queries -------------------------------------------------------------------------------

    async def _serve_query(self, req: Request, text: Any, overrides: Any, variables: Any, seq: Any,
                           write: Callable[[QueryHandle], Awaitable[None]]) -> None:
        """Start the request's query, write its response, then free what it held: its push query
        slot, and its entry among the queries its user may close."""
        handle, holds_slot = await self._start(text, overrides, variables, seq)
        self._query_owners[handle.query_id] = req.principal.user
        try:
            await write(handle)
        finally:
            self._query_owners.pop(handle.query_id, None)
            if holds_slot:
                self.limits.release_push()

    async def _start(self, text: Any, overrides: Any, variables: Any, seq: Any = None) -> tuple[QueryHandle, bool]:
        """Start the request's query within the server's limits: the query and whether it holds a
        push query slot (``limits.py``), which the caller frees when the response ends."""
        props = normalize_overrides(overrides, self.service.property_policy)
        session = normalize_variables(variables)
        if seq is not None:
            await self.run(self.service.wait_for_seq, seq, self.settings.command_wait_s)
        statements: list[ast.Statement] | None = None
        sent = isinstance(text, str) and bool(text.strip())
        if sent and self.limits.settings.pull_max_qps < DEFAULTS[PULL_MAX_QPS]:
            statements = await self.run(self._parse, text, session)
            if any(_is_pull(stmt) for stmt in statements):
                self.limits.check_pull_rate()
        # a slot is taken before the statement is known to be a push query (no second parse in
        # the common case) and given back at once if it is not one
        holds_slot = self.limits.try_acquire_push()
        if not holds_slot and sent:
            statements = statements if statements is not None else await self.run(self._parse, text, session)
            if any(isinstance(stmt, ast.SelectStatement) and not _is_pull(stmt) for stmt in statements):
                raise self.limits.push_refused(text.strip())
        try:
            handle: QueryHandle = await self.run(self.service.start_query, text, props, session)
        except BaseException:
            if holds_slot:
                self.limits.release_push()
            raise
        if holds_slot and handle.stream.kind != "push":
            self.limits.release_push()
            holds_slot = False
        return handle, holds_slot

    async def query(self, req: Request, resp: Response) -> None:
        """Legacy ``/query``: a chunked JSON array of header, rows and a final message."""
        data = await req.json()
        content_type = req.accepts(KSQL_JSON, JSON) or KSQL_JSON
        await self._serve_query(req, data.get("ksql"), data.get("streamsProperties"), data.get("sessionVariables"),
                                data.get("commandSequenceNumber"),
                                lambda handle: self._stream_ksql_json(req, resp, handle, content_type))

    async def query_stream(self, req: Request, resp: Response) -> None:
        """``/query-stream``: delimited (default) or JSON array; ``application/vnd.ksql.v1+json`` gets
        the ``/query`` format."""
        data = await req.json()
        await self._serve_query(req, data.get("sql"), data.get("properties"), data.get("sessionVariables"), None,
                                lambda handle: self._stream_query(req, resp, handle))

    async def _stream_query(self, req: Request, resp: Response, handle: QueryHandle) -> None:
        if req.accepts(KSQL_JSON):
            await self._stream_ksql_json(req, resp, handle, KSQL_JSON)
            return
        if handle.stream.kind == "print":
            await self._stream_print(req, resp, handle, DELIMITED)
            return
        as_json = req.accepts(JSON, DELIMITED) == JSON
        meta = {"queryId": handle.query_id, "columnNames": [n for n, _ in handle.stream.columns],
                "columnTypes": [entities.plain_type(ty) for _, ty in handle.stream.columns]}
        await resp.start(200, JSON if as_json else DELIMITED)
        head = ("[" if as_json else "") + _dumps(meta) + ("" if as_json else "\n")
        # a query whose rows are all there already (a pull query) is written in one piece: one
        # body frame instead of one per row (most of a pull query's cost was the HTTP layer's)
        whole: list[str] | None = [head] if handle.stream.closed else None
        if whole is None:
            await resp.write(head)

        async def on_row(row: list[Any]) -> None:
            line = _dumps(entities.json_value(row))
            text = "," + line if as_json else line + "\n"
            if whole is not None:
                whole.append(text)
            else:
                await resp.write(text)

        error = await self._pump(req, resp, handle, on_row)
        tail = ""
        if error is not None:
            envelope = _dumps(error.envelope())
            tail = "," + envelope if as_json else envelope + "\n"
        await resp.end("".join(whole or ()) + tail + ("]" if as_json else ""))

    async def _stream_ksql_json(self, req: Request, resp: Response, handle: QueryHandle, content_type: str) -> None:
        """ksqlDB's StreamedRow array: ``[{header},\\n{row},\\n…{finalMessage}]``; pull results are
        written whole (they are complete when the query starts), push rows as they arrive."""
        if handle.stream.kind == "print":
            await self._stream_print(req, resp, handle, content_type)
            return
        stream = handle.stream
        header = {"header": {"queryId": handle.query_id,
                             "schema": entities.header_schema(stream.columns, handle.key_columns)}}
        await resp.start(200, content_type)
        rows: list[str] = [_dumps(header)]
        if handle.is_pull:
            async def collect(row: list[Any]) -> None:
                rows.append(_dumps(_row_entity(row)))

            error = await self._pump(req, resp, handle, collect)
            if error is not None:
                rows.append(_dumps({"errorMessage": error.envelope()}))
            elif not handle.over_table:
                rows.append(_dumps({"finalMessage": "Query Completed"}))
            await resp.end("[" + ",\n".join(rows) + "]")
            return
        await resp.write("[" + rows[0] + ",\n")

        async def on_row(row: list[Any]) -> None:
            await resp.write(_dumps(_row_entity(row)) + ",\n")

        error = await self._pump(req, resp, handle, on_row)
        if error is not None:
            await resp.end(_dumps({"errorMessage": error.envelope()}) + "]")
        else:
            final = "Limit Reached" if stream.limit_reached else "Query Completed"
            await resp.end(_dumps({"finalMessage": final}) + "]")

    async def _stream_print(self, req: Request, resp: Response, handle: QueryHandle, content_type: str) -> None:
        await resp.start(200, "text/plain" if content_type != DELIMITED else DELIMITED)

        async def on_line(row: list[Any]) -> None:
            await resp.write(str(row[0]) + "\n")

        await self._pump(req, resp, handle, on_line)
        await resp.end()

    async def _pump(self, req: Request, resp: Response, handle: QueryHandle,
                    on_row: Callable[[list[Any]], Awaitable[None]]) -> ServerError | None:
        """Feed the stream's rows to ``on_row`` until it ends or the client goes away (which
        closes the query). Returns the query's error, if it failed, as an envelope-ready error."""
        stream = handle.stream
        gone = asyncio.Event()

        async def watch_disconnect() -> None:
            try:
                while True:
                    msg = await req.receive()
                    if msg["type"] == "http.disconnect":
                        gone.set()
                        return
            except Exception:
                gone.set()

        # a stream already complete (a pull query's rows) is read here, without a thread hop per
        # row or a watcher: it never waits
        complete = stream.closed
        watcher = asyncio.create_task(watch_disconnect()) if req.body_done and not complete else None
        try:
            while not gone.is_set() and stream.limit != 0:  # LIMIT 0: header and final message only
                try:
                    item = stream.poll(0) if complete else await self.run(stream.poll, 0.5)
                except Exception as e:
                    UNEXPECTED_ERRORS.record()
                    log.warning("query %s failed: %s", handle.query_id, e)
                    return ServerError(SERVER_ERROR, client_message(getattr(e, "message", None) or str(e)))
                if item is r.RowStream.TIMEOUT:
                    continue
                if item is None:
                    return None
                try:
                    await on_row(item)
                except Exception:  # the client went away mid-write
                    gone.set()
            return None
        finally:
            if watcher is not None:
                watcher.cancel()
            if gone.is_set() or not stream.closed:
                stream.close()
            self.service.finished(handle)

    async def close_query(self, req: Request, resp: Response) -> None:
        data = await req.json()
        query_id = data.get("queryId")
        owner = self._query_owners.get(query_id) if isinstance(query_id, str) else None
        if owner is not None and owner != req.principal.user:
            authz.check_action(req.principal, "/close-query of another user's query", authz.ADMIN)
        await self.run(self.service.close_query, query_id)
        await resp.start(200, JSON)
        await resp.end()

    # --- /inserts-stream -----------------------------------------------------------------------

    async def inserts_stream(self, req: Request, resp: Response) -> None:
        """Newline-delimited JSON: ``{"target": …}`` then one row per line; one ack per row."""
        if not authz.allows(req.principal.role, authz.DEVELOPER):
            if not req.http2:  # the connection stays usable for the client's next request
                await req._discard_body(self.settings.max_request_bytes)
            authz.check_action(req.principal, "INSERT (/inserts-stream)", authz.DEVELOPER)
        if not req.http2:
            raise ServerError(HTTP2_ONLY, "This endpoint is only available when using HTTP2")
        lines = _LineReader(req)
        first = await lines.next()
        if first is None:
            raise bad_request("Insert stream request must start with {\"target\": \"<stream>\"}")
        args = parse_json(first, "inserts stream")
        if not isinstance(args, dict):
            raise bad_request("Invalid JSON in inserts stream: expected a JSON object")
        source = await self.run(self.service.insert_target, args.get("target"))
        as_json = req.accepts(JSON, DELIMITED) == JSON
        await resp.start(200, JSON if as_json else DELIMITED)
        sep = "[" if as_json else ""
        seq = 0
        while True:
            line = await lines.next()
            if line is None:
                break
            try:
                row = parse_json(line, "inserts stream")
                await self.run(self.service.insert_row, source, row)
                ack: dict[str, Any] = {"status": "ok", "seq": seq}
            except ServerError as e:
                ack = {"status": "error", "seq": seq, "error_code": e.error_code, "message": e.message}
            except StreamsqlError as e:
                ack = {"status": "error", "seq": seq, "error_code": BAD_REQUEST, "message": e.message}
            except Exception:
                UNEXPECTED_ERRORS.record()
                log.exception("insert into %s failed", getattr(source, "name", "?"))
                ack = {"status": "error", "seq": seq, "error_code": SERVER_ERROR, "message": SANITIZED_SERVER_ERROR}
            await resp.write(sep + _dumps(ack) + ("" if as_json else "\n"))
            sep = "," if as_json else ""
            seq += 1
            if ack["status"] == "error":
                break
        await resp.end(("[" if sep == "[" else "") + "]" if as_json else b"")


class _LineReader:
    """Lines of a streamed request body (each bounded by the request size limit)."""

    def __init__(self, req: Request) -> None:
        self.req = req
        self.buffer = b""

    async def next(self) -> str | None:
        limit = self.req.settings.max_request_bytes
        while True:
            if b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                if line.strip():
                    return line.decode("utf-8", "replace")
                continue
            if self.req.body_done:
                line, self.buffer = self.buffer, b""
                return line.decode("utf-8", "replace") if line.strip() else None
            msg = await self.req.receive()
            if msg["type"] == "http.disconnect":
                raise ConnectionAbortedError("client went away")
            self.buffer += msg.get("body", b"")
            self.req.body_done = not msg.get("more_body", False)
            if len(self.buffer) > limit:
                raise ServerError(PAYLOAD_TOO_LARGE, f"An inserts-stream line exceeds the limit of {limit} bytes")


def _is_pull(stmt: ast.Statement) -> bool:
    return isinstance(stmt, ast.SelectStatement) and stmt.query.emit is None


def _row_entity(row: list[Any]) -> dict[str, Any]:
    """One ``/query`` row; a table's deleted row carries ksqlDB's ``"tombstone": true``."""
    entity: dict[str, Any] = {"columns": entities.json_value(row)}
    if getattr(row, "tombstone", False):
        entity["tombstone"] = True
    return {"row": entity}
