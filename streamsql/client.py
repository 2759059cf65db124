"""A client for ksqlDB's REST API: statements to ``POST /ksql``, queries to ``POST /query-stream``.

Responses are mapped back to the engine's own result types (:mod:`streamsql.runtime.results`),
so the shell renders a remote server's answers exactly as it renders the embedded engine's. The
mapping follows ksqlDB's documented shapes (entities carry ``@type``; errors are
``{"@type", "error_code", "message", "statementText"?, "entities"?}``; ``/query-stream`` answers a
metadata line ``{"queryId", "columnNames", "columnTypes"}`` then one JSON array per row) and
tolerates the older ``/query`` row shapes (``{"header"}``, ``{"row"}``, ``{"finalMessage"}``),
so it works against ksqlDB itself as well as against ``streamsql server``.

The functions at the top are pure (JSON in, results out) and are what the unit tests check; the
:class:`KsqlClient` below only moves bytes over HTTP/1.1 (stdlib ``http.client``: chunked
responses are read line by line as they arrive).
"""

from __future__ import annotations

import base64
import http.client
import json
import re
import socket
import ssl
import threading
from typing import Any
from urllib.parse import unquote, urlsplit

from streamsql.entities import result_from_entity
from streamsql.errors import StreamsqlError
from streamsql.runtime import results as r

DELIMITED = "application/vnd.ksqlapi.delimited.v1"
KSQL_JSON = "application/vnd.ksql.v1+json"


class RemoteError(StreamsqlError):
    """An error the server answered with. ``entities`` are the results of statements of the same
    request that ran before the failing one; ``error_code`` is ksqlDB's (HTTP status x 100 + n)."""

    def __init__(self, message: str, error_code: int | None = None, statement: str | None = None,
                 entities: list[r.Result] | None = None) -> None:
        super().__init__(message, statement)
        self.error_code = error_code
        self.entities = entities or []


def error_from_body(body: Any, http_status: int) -> RemoteError:
    """ksqlDB's error envelope (``generic_error`` / ``statement_error``) as an exception; a body
    that is not the envelope (a proxy's HTML page, ...) still gives a readable message."""
    if isinstance(body, dict) and "message" in body:
        entities = [result_from_entity(e) for e in body.get("entities") or [] if isinstance(e, dict)]
        return RemoteError(str(body["message"]), body.get("error_code"), body.get("statementText"), entities)
    shown = body if isinstance(body, str) else json.dumps(body)
    return RemoteError(f"Server answered HTTP {http_status}: {shown.strip()[:500]}", http_status * 100)


def results_from_ksql_response(body: Any) -> list[r.Result]:
    """A ``/ksql`` 200 response (a JSON array of entities). A ``currentStatus`` whose command
    failed (status ERROR) becomes an error, as the ksql CLI shows it."""
    if not isinstance(body, list):
        raise error_from_body(body, 200)
    out: list[r.Result] = []
    for entity in body:
        status = (entity.get("commandStatus") or {}) if entity.get("@type") == "currentStatus" else {}
        if status.get("status") == "ERROR":
            raise RemoteError(str(status.get("message", "")).splitlines()[0] if status.get("message") else "Error",
                              None, entity.get("statementText"), out)
        out.append(result_from_entity(entity))
    return out


# Kinds of line in a query response (``/query-stream`` delimited, or ``/query``'s StreamedRow).
HEADER, ROW, END, ERROR, TEXT = "header", "row", "end", "error", "text"


def parse_query_line(line: str) -> tuple[str, Any] | None:
    """Classify one line of a query response: ``(HEADER, {"queryId", "columnNames",
    "columnTypes"})``, ``(ROW, [values])``, ``(END, final message)``, ``(ERROR, RemoteError)``,
    ``(TEXT, line)`` for PRINT output, or None for a blank keep-alive line."""
    stripped = line.strip().rstrip(",")
    if not stripped or stripped in ("[", "]"):
        return None
    value = _json_or_none(stripped)
    if value is None and (stripped[:1] == "[" or stripped[-1:] == "]"):
        # /query's array: "[{header}," first, "{final}]" last
        value = _json_or_none(stripped[1:] if stripped[:1] == "[" else stripped[:-1])
    if value is None:
        return (TEXT, line.rstrip("\r\n"))
    if isinstance(value, list):
        return (ROW, value)
    if not isinstance(value, dict):
        return (TEXT, line.rstrip("\r\n"))
    if "columnNames" in value:
        return (HEADER, value)
    if "header" in value:  # /query StreamedRow: schema "`A` STRING, `B` INTEGER KEY"
        return (HEADER, _header_from_schema(value["header"]))
    if "row" in value:
        row = value["row"] or {}
        return (ROW, row.get("columns", []))
    if "finalMessage" in value:
        return (END, value["finalMessage"])
    if "errorMessage" in value:
        return (ERROR, error_from_body(value["errorMessage"], 500))
    if "message" in value and ("error_code" in value or "@type" in value):
        return (ERROR, error_from_body(value, 500))
    return (TEXT, line.rstrip("\r\n"))


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _header_from_schema(header: dict[str, Any]) -> dict[str, Any]:
    names, types = [], []
    for part in _split_top_level(header.get("schema", "")):
        m = re.match(r"\s*`((?:[^`]|``)*)`\s+(.*?)(\s+KEY)?\s*$", part)
        if m:
            names.append(m.group(1).replace("``", "`"))
            types.append(m.group(2))
    return {"queryId": header.get("queryId", ""), "columnNames": names, "columnTypes": types}


def _split_top_level(schema: str) -> list[str]:
    """Split ``a INT, b STRUCT<x INT, y INT>`` on the commas outside ``<>``/``()``."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(schema):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(schema[start:i])
            start = i + 1
    if schema[start:].strip():
        parts.append(schema[start:])
    return parts


def query_limit(statement: str) -> int | None:
    """The ``LIMIT n`` that ends a query statement, if any (the server ends the response when
    it is reached; the shell wants to say "Limit Reached")."""
    m = re.search(r"\bLIMIT\s+(\d+)\s*;?\s*$", statement, re.IGNORECASE)
    return int(m.group(1)) if m else None


def is_push_query(statement: str) -> bool:
    return re.search(r"\bEMIT\s+(CHANGES|FINAL)\b", statement, re.IGNORECASE) is not None


# --- HTTP ------------------------------------------------------------------------------------------


class KsqlClient:
    """Talks to one ksqlDB-compatible server. HTTP basic auth from ``user``/``password`` (as the
    ksql CLI's ``-u``/``-p``), else from ``user:password@`` in ``url``; ``https://`` uses TLS
    with the system's trust store."""

    def __init__(self, url: str, timeout: float = 60.0, user: str | None = None, password: str | None = None) -> None:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise StreamsqlError(f"not a server URL: {url} (expected http://host:port)")
        self.url = f"{parts.scheme}://{parts.hostname}:{parts.port or 8088}"
        self._https = parts.scheme == "https"
        self._host, self._port = parts.hostname, parts.port or 8088
        self._timeout = timeout
        self._headers = {"Content-Type": "application/json"}
        if user is None and parts.username is not None:
            user, password = unquote(parts.username), unquote(parts.password or "")
        if user is not None:
            token = base64.b64encode(f"{user}:{password or ''}".encode()).decode()
            self._headers["Authorization"] = f"Basic {token}"

    def _connection(self, timeout: float | None) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout,
                                               context=ssl.create_default_context())
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _send(self, method: str, path: str, body: Any, accept: str,
              timeout: float | None) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        conn = self._connection(timeout)
        payload = json.dumps(body).encode() if body is not None else None
        try:
            conn.request(method, path, body=payload, headers={**self._headers, "Accept": accept})
            return conn, conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise RemoteError(f"Could not reach the server at {self.url}: {e}") from None

    def _call(self, method: str, path: str, body: Any = None, accept: str = KSQL_JSON) -> Any:
        conn, resp = self._send(method, path, body, accept, self._timeout)
        try:
            raw = resp.read().decode("utf-8", "replace")
        finally:
            conn.close()
        try:
            data = json.loads(raw) if raw.strip() else None
        except ValueError:
            data = raw
        if resp.status >= 400:
            raise error_from_body(data, resp.status)
        return data

    def info(self) -> dict[str, Any]:
        """``GET /info``'s ``KsqlServerInfo`` (version, kafkaClusterId, ksqlServiceId, serverStatus)."""
        data = self._call("GET", "/info")
        return data.get("KsqlServerInfo", data) if isinstance(data, dict) else {}

    def ksql(self, statements: str, properties: dict[str, str] | None = None,
             variables: dict[str, str] | None = None) -> list[r.Result]:
        """``POST /ksql``: run non-query statements; their results in order."""
        body: dict[str, Any] = {"ksql": statements, "streamsProperties": properties or {}}
        if variables:
            body["sessionVariables"] = variables
        return results_from_ksql_response(self._call("POST", "/ksql", body))

    def vocabulary(self) -> Any:
        """streamsql's ``GET /vocabulary``: the names completion offers (``runtime/vocabulary.py``)."""
        return self._call("GET", "/vocabulary", accept="application/json")

    def close_query(self, query_id: str) -> None:
        self._call("POST", "/close-query", {"queryId": query_id})

    def query_stream(self, statement: str, properties: dict[str, str] | None = None,
                     variables: dict[str, str] | None = None) -> r.RowStream:
        """``POST /query-stream``: a push or pull query (or PRINT) as a row stream fed by a reader
        thread. Closing the stream asks the server to close the query and drops the connection."""
        sql = statement if statement.rstrip().endswith(";") else statement + ";"
        body: dict[str, Any] = {"sql": sql, "properties": properties or {}}
        if variables:
            body["sessionVariables"] = variables
        conn, resp = self._send("POST", "/query-stream", body, DELIMITED, None)
        if resp.status >= 400:
            raw = resp.read().decode("utf-8", "replace")
            conn.close()
            try:
                data: Any = json.loads(raw)
            except ValueError:
                data = raw
            raise error_from_body(data, resp.status)
        is_print = statement.lstrip().upper().startswith("PRINT")
        header: dict[str, Any] = {"queryId": "", "columnNames": ["record"], "columnTypes": ["STRING"]}
        pending: list[tuple[str, Any]] = []
        if not is_print:
            while True:
                line = resp.readline().decode("utf-8", "replace")
                if not line:
                    conn.close()
                    raise RemoteError("The server ended the query response before its header")
                item = parse_query_line(line)
                if item is None:
                    continue
                if item[0] == HEADER:
                    header = item[1]
                    break
                if item[0] == ERROR:
                    conn.close()
                    raise item[1]
                pending.append(item)
        columns = list(zip(header.get("columnNames", []), header.get("columnTypes", [])))
        kind = "print" if is_print else ("push" if is_push_query(statement) else "pull")
        stream = r.RowStream(statement, header.get("queryId", ""), columns, limit=query_limit(statement), kind=kind)
        ended = threading.Event()  # the server ended the response: nothing to close there
        threading.Thread(target=self._pump, args=(conn, resp, stream, pending, ended), daemon=True,
                         name=f"query-stream-{stream.query_id}").start()

        def close() -> None:
            if stream.query_id and kind == "push" and not ended.is_set():
                try:
                    self.close_query(stream.query_id)
                except StreamsqlError:
                    pass  # already ended on the server
            _unblock(conn)  # the reader thread closes the connection once it wakes

        stream.on_close(close)
        return stream

    @staticmethod
    def _pump(conn: http.client.HTTPConnection, resp: http.client.HTTPResponse, stream: r.RowStream,
              pending: list[tuple[str, Any]], ended: threading.Event) -> None:
        error: BaseException | None = None
        try:
            for kind, value in pending:
                if kind == ROW:
                    stream.put(value)
            while not stream.closed:
                line = resp.readline().decode("utf-8", "replace")
                if not line:
                    ended.set()
                    break
                item = parse_query_line(line)
                if item is None:
                    continue
                kind, value = item
                if kind == ROW:
                    if not stream.put(value):
                        break
                elif kind == TEXT:
                    if not stream.put([value]):
                        break
                elif kind in (ERROR, END):
                    error = value if kind == ERROR else None
                    ended.set()
                    break
        except (OSError, http.client.HTTPException, ValueError) as e:
            if not stream.closed:
                error = RemoteError(f"Lost the query response from the server: {e}")
        finally:
            stream.finish(error)
            _drop(conn)


def _unblock(conn: http.client.HTTPConnection) -> None:
    """Wake a reader thread waiting on a connection (its read returns at once) without closing
    the connection under it: http.client's response is not safe to close from another thread
    while being read, so the reader closes it (:func:`_drop`)."""
    sock = conn.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _drop(conn: http.client.HTTPConnection) -> None:
    """Close a connection, unblocking a reader thread waiting on it."""
    _unblock(conn)
    conn.close()
