"""Confluent's Elasticsearch sink (``io.confluent.connect.elasticsearch.ElasticsearchSinkConnector``)
as streamsql runs it: Elasticsearch 8/9 and OpenSearch through the bulk API.

Each record becomes one bulk action on the index named after its topic (lower-cased: index names
cannot hold capitals; ``topic.index.map`` renames):

* the document is the record's value as the value converter reads it (``schema.ignore``: the
  server's dynamic mapping types the fields either way — streamsql creates no mappings);
* its id is the record's key (``key.ignore=false``; a key with several fields — a JSON object,
  a struct — joins its values with ``+``, where Connect refuses such keys), else
  ``topic+partition+offset``. Either way a batch written twice (after a crash or a retry)
  writes the same documents again, never new ones;
* ``write.method``: ``insert`` indexes (replaces) the document, ``upsert`` merges it into the
  stored one;
* a tombstone (null value): ``behavior.on.null.values`` ``ignore`` skips it, ``delete`` deletes
  the key's document, ``fail`` (Connect's default) stops the connector naming the record.

Requests go through ``elastic_transport`` (the ``elasticsearch`` package's transport) with plain
``application/x-ndjson`` / ``application/json`` media types: the ``elasticsearch`` 9 client's
``compatible-with=9`` types are refused by OpenSearch (research/facts.md). A request that fails as
a whole (no answer, a timeout, HTTP 429/502/503/504) and bulk items the server rejects for load
(429, ``es_rejected_execution_exception``) are retried ``max.retries`` times, waiting
``retry.backoff.ms`` doubled per attempt (no jitter, at most a minute per wait); after that the
batch fails, the connector's query stops and the server's supervisor restarts it from its last
committed offsets. A document the server rejects (a mapping error) follows
``behavior.on.malformed.documents``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from streamsql.connectors import config as c
from streamsql.connectors.converters import Converter, RecordError, to_json_value
from streamsql.connectors.sink import BadRecords, RawRecord

log = logging.getLogger("streamsql.connectors")

CLASS_NAME = "io.confluent.connect.elasticsearch.ElasticsearchSinkConnector"
KEYS = frozenset({
    "connection.url", "connection.username", "connection.password", "batch.size", "bulk.size.bytes",
    "max.in.flight.requests", "max.buffered.records", "linger.ms", "flush.timeout.ms", "flush.synchronously",
    "max.retries", "retry.backoff.ms", "connection.compression", "max.connection.idle.time.ms",
    "connection.timeout.ms", "read.timeout.ms", "log.sensitive.data", "key.ignore", "schema.ignore",
    "topic.key.ignore", "topic.schema.ignore", "drop.invalid.message", "behavior.on.null.values",
    "behavior.on.malformed.documents", "write.method", "compact.map.entries", "type.name", "topic.index.map",
    "elastic.security.protocol",
})
#: HTTP statuses of a whole request or of one bulk item that mean "try again later"
RETRIABLE_STATUSES = frozenset({429, 502, 503, 504})
MAX_BACKOFF_S = 60.0


@dataclass(frozen=True)
class ElasticsearchSinkConfig:
    name: str
    urls: tuple[str, ...]
    topics: tuple[str, ...]
    key_converter: Converter
    value_converter: Converter
    username: str | None = None
    password: str | None = None
    index_of: tuple[tuple[str, str], ...] = ()
    key_ignore: bool = False
    key_ignore_topics: tuple[str, ...] = ()
    null_values: str = "FAIL"
    malformed: str = "WARN"
    write_method: str = "INSERT"
    batch_size: int = 2000
    max_retries: int = 5
    retry_backoff_ms: int = 100
    connection_timeout_ms: int = 1000
    read_timeout_ms: int = 3000
    tolerate_errors: bool = False

    def index(self, topic: str) -> str:
        return dict(self.index_of).get(topic) or topic.lower()

    def ignores_key(self, topic: str) -> bool:
        return self.key_ignore or topic in self.key_ignore_topics

    def writer(self) -> BulkWriter:
        return BulkWriter(self)

    def describe_writes(self) -> str:
        """One line for DESCRIBE CONNECTOR: what each record becomes."""
        return describe_writes(self)


def parse(settings: c.SinkSettings, config: Mapping[str, str]) -> ElasticsearchSinkConfig:
    from streamsql.extras import require

    require("elastic_transport", "sinks", "the Elasticsearch sink connector")
    urls = c.string_list(config, "connection.url")
    if not urls:
        raise c.ConnectorError("Missing required configuration \"connection.url\" which has no default value.")
    for url in urls:
        parsed = urlparse(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise c.ConnectorError(f"Invalid value {url} for configuration connection.url: "
                                   f"expected http://host:port or https://host:port")
    protocol = (config.get("elastic.security.protocol") or "PLAINTEXT").upper()
    if protocol != "PLAINTEXT":
        raise c.ConnectorError(f"elastic.security.protocol={protocol} is not supported yet: use https:// URLs "
                               f"with connection.username/connection.password")
    index_of = []
    for pair in c.string_list(config, "topic.index.map"):
        topic, sep, index = pair.partition(":")
        if not sep or not topic or not index:
            raise c.ConnectorError(f"Invalid value {config['topic.index.map']} for configuration topic.index.map: "
                                   f"expected topic:index pairs, comma-separated")
        index_of.append((topic, index))
    return ElasticsearchSinkConfig(
        name=settings.name, urls=urls, topics=settings.topics,
        key_converter=settings.key_converter, value_converter=settings.value_converter,
        username=config.get("connection.username"), password=config.get("connection.password"),
        index_of=tuple(index_of),
        key_ignore=c.boolean(config, "key.ignore", False),
        key_ignore_topics=c.string_list(config, "topic.key.ignore"),
        null_values=c.choice(config, "behavior.on.null.values", "FAIL", ("IGNORE", "DELETE", "FAIL")),
        malformed=c.choice(config, "behavior.on.malformed.documents", "WARN", ("IGNORE", "WARN", "FAIL")),
        write_method=c.choice(config, "write.method", "INSERT", ("INSERT", "UPSERT")),
        batch_size=c.integer(config, "batch.size", 2000, minimum=1),
        max_retries=c.integer(config, "max.retries", 5),
        retry_backoff_ms=c.integer(config, "retry.backoff.ms", 100),
        connection_timeout_ms=c.integer(config, "connection.timeout.ms", 1000),
        read_timeout_ms=c.integer(config, "read.timeout.ms", 3000, minimum=1),
        tolerate_errors=(config.get("errors.tolerance") or "none").strip().lower() == "all",
    )


CONNECTOR = c.ConnectorClass(CLASS_NAME, ("ElasticsearchSinkConnector", "ElasticsearchSink"), "SINK", KEYS, parse)


class WriteFailed(Exception):
    """The server did not take a batch within the retries, or a record the configuration says
    must stop the connector (the message names the record)."""


@dataclass
class _Action:
    record: RawRecord
    lines: bytes  # the action line and, but for deletes, the document line, each ending in \n


class BulkWriter:
    """One task's writer: actions buffered up to ``batch.size``, sent as one ``_bulk`` request."""

    def __init__(self, cfg: ElasticsearchSinkConfig) -> None:
        self.cfg = cfg
        self.pending: list[_Action] = []
        self.transport = _transport(cfg)

    def write(self, record: RawRecord, bad: BadRecords) -> None:
        action = self._action(record, bad)
        if action is not None:
            self.pending.append(action)
            if len(self.pending) >= self.cfg.batch_size:
                self._flush(bad)

    def close(self, bad: BadRecords) -> None:
        self._flush(bad)

    # --- one record -----------------------------------------------------------------------

    def _action(self, record: RawRecord, bad: BadRecords) -> _Action | None:
        cfg = self.cfg
        index = cfg.index(record.topic)
        try:
            doc_id = None if cfg.ignores_key(record.topic) else _document_id(cfg.key_converter.decode(record.key))
        except RecordError as e:
            bad.unreadable(record, "key", str(e))
            return None
        if doc_id is None and not cfg.ignores_key(record.topic):
            bad.rejected(record, "Key is used as document id and can not be null (set key.ignore=true to use "
                                 "topic+partition+offset)")
            return None
        if record.value is None:
            return self._tombstone(record, index, doc_id, bad)
        try:
            value = cfg.value_converter.decode(record.value)
        except RecordError as e:
            bad.unreadable(record, "value", str(e))
            return None
        if not isinstance(value, dict):
            bad.rejected(record, f"the value is not a JSON object, cannot index it as a document: {str(value)[:200]}")
            return None
        if doc_id is None:
            doc_id = f"{record.topic}+{record.partition}+{record.offset}"
        meta = {"_index": index, "_id": doc_id}
        document = to_json_value(value)
        if cfg.write_method == "UPSERT":
            lines = [{"update": meta}, {"doc": document, "doc_as_upsert": True}]
        else:
            lines = [{"index": meta}, document]
        return _Action(record, b"".join(_line(v) for v in lines))

    def _tombstone(self, record: RawRecord, index: str, doc_id: str | None, bad: BadRecords) -> _Action | None:
        behaviour = self.cfg.null_values
        if behaviour == "DELETE" and doc_id is not None:
            return _Action(record, _line({"delete": {"_index": index, "_id": doc_id}}))
        if behaviour == "FAIL":
            reason = (f"Sink record with key of {record.key!r} and null value encountered for {record.where()}; "
                      f"set behavior.on.null.values to ignore or delete")
            if not self.cfg.tolerate_errors:
                raise WriteFailed(reason)
            bad.rejected(record, reason)
        return None

    # --- bulk requests ----------------------------------------------------------------------

    def _flush(self, bad: BadRecords) -> None:
        pending, self.pending = self.pending, []
        cfg = self.cfg
        attempt = 0
        while pending:
            error, retry = self._send(pending, bad)
            if not retry:
                return
            if attempt >= cfg.max_retries:
                raise WriteFailed(f"Elasticsearch at {', '.join(cfg.urls)} did not take {len(retry)} document(s) "
                                  f"after {cfg.max_retries} retries (max.retries): {error}")
            wait = min(cfg.retry_backoff_ms / 1000.0 * (2 ** attempt), MAX_BACKOFF_S)
            log.warning("connector %s: bulk request failed (%s); retry %d of %d in %.1f s", cfg.name, error,
                        attempt + 1, cfg.max_retries, wait)
            time.sleep(wait)
            attempt += 1
            pending = retry

    def _send(self, actions: list[_Action], bad: BadRecords) -> tuple[str, list[_Action]]:
        """One ``_bulk`` request: the actions to send again and why (none: done)."""
        from elastic_transport import ApiError, TransportError

        body = b"".join(a.lines for a in actions)
        try:
            response = self.transport.perform_request(
                "POST", "/_bulk", body=body,
                headers={"content-type": "application/x-ndjson", "accept": "application/json"})
        except ApiError as e:  # an HTTP error status for the whole request
            status = getattr(e.meta, "status", 0) if getattr(e, "meta", None) is not None else 0
            if status in RETRIABLE_STATUSES:
                return f"HTTP {status}", actions
            raise WriteFailed(f"Elasticsearch refused the bulk request: HTTP {status}: {e}") from None
        except TransportError as e:  # no answer: connection refused or reset, timeout
            return f"{type(e).__name__}: {e}", actions
        status = response.meta.status
        if status in RETRIABLE_STATUSES:
            return f"HTTP {status}", actions
        if status >= 300:
            raise WriteFailed(f"Elasticsearch refused the bulk request: HTTP {status}: {str(response.body)[:500]}")
        body_json: Any = response.body
        if not isinstance(body_json, dict) or not body_json.get("errors"):
            return "", []
        retry: list[_Action] = []
        reason = ""
        for action, item in zip(actions, body_json.get("items") or [], strict=False):
            op, result = next(iter(item.items()))
            item_status = int(result.get("status") or 0)
            if item_status < 300 or (op == "delete" and item_status == 404) or item_status == 409:
                continue  # written; a delete of a missing document; a version conflict (Connect ignores it)
            error = result.get("error") or {}
            detail = (f"{error.get('type', 'error')}: {error.get('reason', '')}" if isinstance(error, dict)
                      else str(error))
            if item_status in RETRIABLE_STATUSES or "es_rejected_execution_exception" in detail:
                retry.append(action)
                reason = detail
            else:
                self._malformed(action.record, f"status {item_status}, {detail}", bad)
        return reason, retry

    def _malformed(self, record: RawRecord, reason: str, bad: BadRecords) -> None:
        behaviour = self.cfg.malformed
        if behaviour == "FAIL":
            raise WriteFailed(f"Elasticsearch rejected the document of the record at {record.where()}: {reason} "
                              f"(behavior.on.malformed.documents=fail)")
        if behaviour == "WARN":
            bad.rejected(record, f"Elasticsearch rejected the document: {reason}")


def _document_id(key: Any) -> str | None:
    """A record key as a document id: a primitive as text, a key of several fields (an object
    or an array) as its values joined with ``+``."""
    if key is None:
        return None
    if isinstance(key, dict):
        key = list(key.values())
    if isinstance(key, (list, tuple)):
        return "+".join("" if v is None else str(to_json_value(v)) for v in key)
    if isinstance(key, (bytes, bytearray)):
        return str(to_json_value(key))
    if isinstance(key, bool):
        return str(key).lower()
    return str(key)


def _line(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n"


_TRANSPORTS: dict[ElasticsearchSinkConfig, Any] = {}


def _transport(cfg: ElasticsearchSinkConfig) -> Any:
    """One transport per worker process and configuration (a pool of keep-alive connections)."""
    transport = _TRANSPORTS.get(cfg)
    if transport is None:
        import base64

        from elastic_transport import NodeConfig, Transport

        headers = {}
        if cfg.username is not None:
            token = base64.b64encode(f"{cfg.username}:{cfg.password or ''}".encode()).decode("ascii")
            headers["authorization"] = f"Basic {token}"
        nodes = []
        for url in cfg.urls:
            u = urlparse(url)
            port = u.port or (443 if u.scheme == "https" else 9200)
            nodes.append(NodeConfig(u.scheme, u.hostname or "localhost", port, path_prefix=u.path.rstrip("/"),
                                    headers=headers, request_timeout=cfg.read_timeout_ms / 1000.0,
                                    connections_per_node=2))
        # retries are ours (max.retries, retry.backoff.ms): the transport tries once
        transport = _TRANSPORTS[cfg] = Transport(nodes, max_retries=0, retry_on_timeout=False,
                                                 meta_header=False)
    return transport


def describe_writes(cfg: ElasticsearchSinkConfig) -> str:
    """One line for EXPLAIN / DESCRIBE CONNECTOR."""
    ids = "topic+partition+offset" if cfg.key_ignore else "the record key"
    urls = ", ".join(c.url_without_password(u) for u in cfg.urls)
    return (f"Elasticsearch {urls}: {cfg.write_method.lower()} into index per topic, id {ids}, "
            f"null values {cfg.null_values.lower()}, malformed documents {cfg.malformed.lower()}")
