"""The one place that talks to a Confluent Schema Registry.

Formats that carry a schema id in every record (AVRO, JSON_SR, PROTOBUF) need the registry twice:
on the driver, when a statement declares or creates a source (infer the columns from the subject's
latest schema, register the schema a sink writes), and on Spark's Python workers, to turn the
schema id at the front of each record into the writer's schema.

A real registry (``http(s)://``) is reached through confluent-kafka's ``SchemaRegistryClient``
with the client settings of :mod:`streamsql.formats.schema_registry_settings` (basic auth, bearer
tokens, a private CA, a client certificate); its errors become one message naming the setting to
look at. ``mock://`` registries (in-memory, confluent's mock semantics; what tests and the QTT
runner use) live inside one process, and workers are separate processes. So the driver snapshots
the schemas a source can meet (every version of its subject at declaration time, plus the one it
writes) into the source's :class:`SchemaBinding`, which travels to the workers in the format spec;
a worker asks the registry only for ids not in the snapshot, and only when the registry is a real
one.

The wire format (Confluent's): magic byte 0, 4-byte big-endian schema id, then the payload.
"""

from __future__ import annotations

import functools
import json
import ssl
import struct
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from streamsql.errors import ConfigError
from streamsql.formats import schema_registry_settings as settings

#: ksqlDB's name of the setting; read from the server config or a session ``SET``.
URL_PROPERTY = settings.URL_PROPERTY
MAGIC = 0
HEADER = struct.Struct(">bI")

_lock = threading.Lock()
_clients: dict[tuple[str, str], Any] = {}


class SchemaReference(NamedTuple):
    """A schema another one imports: its import ``name`` (``"event.proto"``), registered as
    ``version`` of ``subject``."""

    name: str
    subject: str
    version: int


@dataclass(frozen=True)
class RegisteredSchema:
    id: int
    text: str  # the schema as the registry holds it (Avro/JSON schema JSON, or .proto text)
    type: str  # AVRO | JSON | PROTOBUF
    references: tuple[SchemaReference, ...] = ()


@dataclass
class SchemaBinding:
    """How one side (key or value) of a source meets the registry: the subject, the id the engine
    writes with, and a snapshot of the schemas it may read (id → text), with what those import
    (id → import name → text; only ids that import anything)."""

    url: str
    subject: str
    writer_id: int | None = None
    known: dict[int, str] = field(default_factory=dict)
    imports: dict[int, dict[str, str]] = field(default_factory=dict)

    def to_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"registry": self.url, "subject": self.subject, "writerId": self.writer_id,
                                   "schemas": {str(k): v for k, v in sorted(self.known.items())}}
        if self.imports:
            options["imports"] = {str(k): v for k, v in sorted(self.imports.items())}
        return options


def subject_for(topic: str, is_key: bool) -> str:
    """TopicNameStrategy, the registry default and what ksqlDB uses."""
    return f"{topic}-{'key' if is_key else 'value'}"


class _MemoryRegistry:
    """``mock://`` registries: confluent's ``MockSchemaRegistryClient`` semantics (ids from 1, one
    id per distinct schema text, versions per subject), in this process only."""

    def __init__(self) -> None:
        self.by_id: dict[int, RegisteredSchema] = {}
        self.subjects: dict[str, list[int]] = {}

    def latest(self, subject: str) -> RegisteredSchema | None:
        ids = self.subjects.get(subject)
        return self.by_id[ids[-1]] if ids else None

    def versions(self, subject: str) -> dict[int, str]:
        return {i: self.by_id[i].text for i in self.subjects.get(subject, [])}

    def get(self, schema_id: int) -> RegisteredSchema:
        found = self.by_id.get(schema_id)
        if found is None:
            raise ConfigError(f"no schema with id {schema_id}")
        return found

    def version(self, subject: str, version: int) -> RegisteredSchema:
        ids = self.subjects.get(subject, [])
        if not 1 <= version <= len(ids):
            raise ConfigError(f"no version {version} of subject '{subject}'")
        return self.by_id[ids[version - 1]]

    def register(self, subject: str, text: str, schema_type: str, schema_id: int | None = None,
                 references: tuple[SchemaReference, ...] = ()) -> int:
        for i, rs in self.by_id.items():
            if (rs.text, rs.type, rs.references) == (text, schema_type, references) and schema_id in (None, i):
                ids = self.subjects.setdefault(subject, [])
                if i not in ids:
                    ids.append(i)
                return i
        new_id = schema_id if schema_id is not None else max(self.by_id, default=0) + 1
        if new_id in self.by_id:
            raise ConfigError(f"schema id {new_id} is already taken")
        self.by_id[new_id] = RegisteredSchema(new_id, text, schema_type, references)
        self.subjects.setdefault(subject, []).append(new_id)
        return new_id


class _HttpRegistry:
    """A Confluent Schema Registry (``http(s)://[user:password@]host:port``) through confluent-kafka's
    ``SchemaRegistryClient``, with the URL's client configuration (credentials, TLS;
    :mod:`streamsql.formats.schema_registry_settings`). Its errors become one ``ConfigError`` naming
    the setting to look at."""

    def __init__(self, url: str, conf: dict[str, Any]) -> None:
        with warnings.catch_warnings():  # authlib, imported by the client, warns about httpx on import
            warnings.simplefilter("ignore", DeprecationWarning)
            import authlib.deprecate  # type: ignore[import-untyped]  # noqa: F401 - turns its warnings on

            warnings.simplefilter("ignore", DeprecationWarning)
            from confluent_kafka.schema_registry import SchemaRegistryClient

        self.url = url
        self.conf = conf
        try:
            # a statement waits for the registry: fail in seconds, not after minutes of retries
            self._client = SchemaRegistryClient({"url": url, "timeout": 30, "max.retries": 2,
                                                 "retries.wait.ms": 200, "retries.max.wait.ms": 1000, **conf})
        except (ValueError, TypeError) as e:
            raise ConfigError(f"Schema Registry client settings: {e}") from None

    def _call(self, what: Callable[[], Any], missing_ok: bool = False) -> Any:
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        try:
            return what()
        except SchemaRegistryError as e:
            if missing_ok and e.http_status_code == 404:
                return None
            raise ConfigError(self._explain_status(e.http_status_code, e.error_message)) from None
        except Exception as e:  # httpx's transport errors, ssl's: reaching the registry failed
            raise ConfigError(self._explain_transport(e)) from None

    def _explain_status(self, status: int, message: str) -> str:
        if status in (401, 403):
            if "bearer.auth.credentials.source" in self.conf:
                fix = f"check '{settings.PREFIX}bearer.auth.token'"
            elif "basic.auth.user.info" in self.conf or "@" in self.url:
                fix = f"check '{settings.PREFIX}basic.auth.user.info'"
            else:
                fix = f"the registry wants credentials: set '{settings.PREFIX}basic.auth.user.info'"
            what = "refused the credentials" if status == 401 else "denied access"
            return f"the registry {what} (HTTP {status}): {fix}"
        return f"HTTP {status}: {message}"

    def _explain_transport(self, error: BaseException) -> str:
        chain: list[BaseException] = []
        e: BaseException | None = error
        while e is not None and len(chain) < 8:
            chain.append(e)
            e = e.__cause__ or e.__context__
        text = "; ".join(dict.fromkeys(str(x) for x in chain if str(x)))  # each message once
        if any(isinstance(x, ssl.SSLCertVerificationError) for x in chain) or "CERTIFICATE_VERIFY_FAILED" in text:
            return (f"the registry's certificate is not trusted ({_first_line(text)}): set "
                    f"'{settings.PREFIX}ssl.truststore.location' to a PEM file with its CA")
        if "CERTIFICATE_REQUIRED" in text:
            return (f"the registry asks for a client certificate ({_first_line(text)}): set "
                    f"'{settings.PREFIX}ssl.keystore.location' to a PEM file with it and its key")
        if any(isinstance(x, ssl.SSLError) for x in chain):
            return f"TLS with the registry failed ({_first_line(text)}): check '{settings.PREFIX}ssl.*'"
        return f"not reachable ({_first_line(text) or type(error).__name__}): check '{URL_PROPERTY}'"

    def latest(self, subject: str) -> RegisteredSchema | None:
        found = self._call(lambda: self._client.get_version(subject, "latest"), missing_ok=True)
        return None if found is None else _registered(int(found.schema_id), found.schema)

    def version(self, subject: str, version: int) -> RegisteredSchema:
        found = self._call(lambda: self._client.get_version(subject, version), missing_ok=True)
        if found is None:
            raise ConfigError(f"no version {version} of subject '{subject}'")
        return _registered(int(found.schema_id), found.schema)

    def versions(self, subject: str) -> dict[int, str]:
        numbers = self._call(lambda: self._client.get_versions(subject), missing_ok=True) or []
        out = {}
        for n in numbers:
            found = self._call(functools.partial(self._client.get_version, subject, n), missing_ok=True)
            if found is not None:
                out[int(found.schema_id)] = found.schema.schema_str
        return out

    def get(self, schema_id: int) -> RegisteredSchema:
        found = self._call(lambda: self._client.get_schema(schema_id), missing_ok=True)
        if found is None:
            raise ConfigError(f"no schema with id {schema_id}")
        return _registered(schema_id, found)

    def register(self, subject: str, text: str, schema_type: str,
                 references: tuple[SchemaReference, ...] = ()) -> int:
        from confluent_kafka.schema_registry import Schema
        from confluent_kafka.schema_registry import SchemaReference as Ref

        schema = Schema(text, schema_type, [Ref(r.name, r.subject, r.version) for r in references])
        return int(self._call(lambda: self._client.register_schema(subject, schema)))


def _registered(schema_id: int, schema: Any) -> RegisteredSchema:
    """Our view of confluent's ``Schema``."""
    refs = tuple(SchemaReference(r.name, r.subject, int(r.version)) for r in (schema.references or []))
    return RegisteredSchema(schema_id, schema.schema_str, schema.schema_type or "AVRO", refs)


def _first_line(text: str) -> str:
    return text.splitlines()[0][:300] if text else ""


def client(url: str) -> Any:
    """One client per URL (and, for a real registry, per client settings) per process: ``mock://``
    state lives in the client object; a real registry's client is made again when its settings
    change (:func:`streamsql.formats.schema_registry_settings.configure`)."""
    conf = settings.of(url) if url.startswith(("http://", "https://")) else {}
    key = (url, json.dumps(conf, sort_keys=True))
    with _lock:
        c = _clients.get(key)
        if c is None:
            if url.startswith("mock://"):
                c = _MemoryRegistry()
            elif url.startswith(("http://", "https://")):
                c = _HttpRegistry(url, conf)
            else:
                raise ConfigError(f"Invalid '{URL_PROPERTY}' value '{url}': expected http://, https:// or mock://")
            _clients[key] = c
        return c


def forget_clients() -> None:
    """Drop this process's clients of real registries, and with them what they cached (schemas by
    id, subjects' latest versions): ``TERMINATE CLUSTER`` starts the server over as if new. A
    registry never gives an id to another schema, but a registry that was itself reset (a test
    harness's, between cases) does. ``mock://`` registries keep their state (it lives in the
    client)."""
    with _lock:
        for key in [k for k, c in _clients.items() if isinstance(c, _HttpRegistry)]:
            del _clients[key]


def shown(url: str) -> str:
    """``url`` as it may be printed: a password in it hidden."""
    from streamsql.redaction import hide_url_password

    return hide_url_password(url)


def latest(url: str, subject: str) -> RegisteredSchema | None:
    """The subject's newest schema, or None if the subject does not exist."""
    try:
        return client(url).latest(subject)
    except ConfigError as e:
        raise ConfigError(f"Schema Registry {shown(url)}: cannot read subject '{subject}': {e}") from None


def versions(url: str, subject: str) -> dict[int, str]:
    """Every schema registered under ``subject`` (id → text); empty if there is none."""
    try:
        return client(url).versions(subject)
    except ConfigError as e:
        raise ConfigError(f"Schema Registry {shown(url)}: cannot read subject '{subject}': {e}") from None


def by_id(url: str, schema_id: int) -> RegisteredSchema:
    try:
        return client(url).get(schema_id)
    except ConfigError as e:
        raise ConfigError(f"Schema Registry {shown(url)}: {e}") from None


def imports(url: str, schema: RegisteredSchema) -> dict[str, str]:
    """What ``schema`` imports, transitively: import name → text (the registry's references)."""
    out: dict[str, str] = {}
    pending = list(schema.references)
    try:
        while pending:
            ref = pending.pop()
            if ref.name not in out:
                found = client(url).version(ref.subject, ref.version)
                out[ref.name] = found.text
                pending.extend(found.references)
    except ConfigError as e:
        raise ConfigError(f"Schema Registry {shown(url)}: cannot read a reference of schema {schema.id}: {e}") from None
    return out


def register(url: str, subject: str, text: str, schema_type: str, schema_id: int | None = None,
             references: tuple[SchemaReference, ...] = ()) -> int:
    """Register (or find) ``text`` under ``subject``; its id. ``schema_id`` asks for a given id,
    which only an in-memory registry honours (a real one assigns ids itself, outside import mode)."""
    try:
        if schema_id is not None and isinstance(client(url), _MemoryRegistry):
            return client(url).register(subject, text, schema_type, schema_id, references)
        return client(url).register(subject, text, schema_type, references=references)
    except ConfigError as e:
        raise ConfigError(f"Schema Registry {shown(url)}: cannot register a schema for subject '{subject}': "
                          f"{e}") from None


# --- the worker side ----------------------------------------------------------------------------


class WriterSchemas:
    """Schema id → parsed writer schema, for a serde on a worker: the driver's snapshot first, then
    the registry itself when it is reachable from here (never for ``mock://``). ``parse(text,
    imports)`` parses one schema with the texts it imports (import name → text)."""

    def __init__(self, options: dict[str, Any], parse: Callable[[str, dict[str, str]], Any]) -> None:
        self.url: str = options.get("registry") or ""
        self._texts = {int(k): v for k, v in (options.get("schemas") or {}).items()}
        self._imports = {int(k): v for k, v in (options.get("imports") or {}).items()}
        self._parse = parse
        self._parsed: dict[int, Any] = {}

    def get(self, schema_id: int) -> Any:
        """The parsed schema; ``KeyError`` with the reason when it cannot be had."""
        parsed = self._parsed.get(schema_id)
        if parsed is not None:
            return parsed
        text = self._texts.get(schema_id)
        if text is None:
            if not self.url.startswith(("http://", "https://")):
                raise KeyError(f"unknown schema id {schema_id} (not registered in {shown(self.url) or 'the registry'} "
                               f"when the source was declared)")
            try:
                found = by_id(self.url, schema_id)
                self._imports[schema_id] = imports(self.url, found)
            except ConfigError as e:
                raise KeyError(str(e)) from None
            text = self._texts[schema_id] = found.text
        parsed = self._parse(text, self._imports.get(schema_id, {}))
        self._parsed[schema_id] = parsed
        return parsed


def split_header(raw: bytes) -> tuple[int, memoryview]:
    """(schema id, payload) of a Confluent-framed record; ``ValueError`` naming the problem."""
    if len(raw) < 5:
        raise ValueError(f"record of {len(raw)} bytes is too short for the Schema Registry header (5 bytes)")
    magic, schema_id = HEADER.unpack_from(raw)
    if magic != MAGIC:
        raise ValueError(f"unknown magic byte {magic} (not written with a Schema Registry serializer)")
    return schema_id, memoryview(raw)[5:]


def frame(schema_id: int, payload: bytes) -> bytes:
    return HEADER.pack(MAGIC, schema_id) + payload


def schema_text(value: Any, schema_type: str) -> str:
    """A schema given as data (QTT ``topics``: JSON for Avro/JSON schemas, text for .proto) as
    registry text."""
    if schema_type == "PROTOBUF" and isinstance(value, str):
        return value
    return json.dumps(value)
