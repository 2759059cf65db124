"""``streamsql test``: run ksqlDB's query-validation tests (QTT) against the real engine.

A QTT file (``{"tests": [...]}``) holds test cases: ``statements`` to execute, ``inputs`` to
produce, ``outputs`` expected on topics (in order), or an ``expectedException`` the statements must
raise. ksqlDB runs them on Kafka Streams' ``TopologyTestDriver`` one record at a time; here each
case runs on a real :class:`~streamsql.runtime.engine.Engine` (its own catalog and data directory)
over one shared broker and one shared SparkSession:

* **Isolation.** Every topic name of a case gets a per-case prefix: ``KAFKA_TOPIC='x'`` literals
  in statements, the topics of inputs/outputs/``topics``, and (through the session property
  ``ksql.output.topic.name.prefix``) the default sink topic of ``CREATE STREAM s AS SELECT``.
* **Inputs** are encoded with the declared formats of the source reading the topic (KAFKA INT key
  → 4 bytes, JSON → JSON text, DELIMITED → the string as given) and written with their exact
  timestamps (see :mod:`streamsql.testing.rawproduce`: librdkafka cannot write timestamp 0).
* **Record-at-a-time.** Inputs are produced, then ``wait_until_idle``. Within one partition a
  stateless query keeps input order, so one batch gives ksqlDB's output order; when several queries
  write into the same topic (``INSERT INTO``) their interleaving depends on feeding one record at a
  time, so such cases produce one record, wait until idle, and repeat; so do cases with a join
  (which side's record comes first decides what it emits).
* **Fed first.** A join processes the records of a micro-batch in the order a Kafka Streams task
  would (:func:`streamsql.physical.joins.arrival_order`: by timestamp across topics, ties to the
  right side). When that order is the inputs' order (:func:`merge_order_is_input_order`, checked
  again against each join's sides once its statement ran), the inputs are produced before
  the first query starts, so its first batch holds them all: one micro-batch instead of one per
  record, same results. A case whose queries turn out not to allow it (a join reading another
  query's output, two queries writing one topic, a foreign-key join, a source with a TIMESTAMP
  column) is run again record at a time.
* **Comparison** per expected topic, in order: key, value (JSON as data; numbers numerically),
  timestamp, window start/end. Topics with several partitions are compared per partition (Kafka
  orders records only within a partition).

Test ids are ``<file stem>/<test name>``, plus `` - <FORMAT>`` / `` - <CONFIG>`` for templated
cases (ksqlDB's naming).
"""

from __future__ import annotations

import base64
import copy
import functools
import json
import math
import re
import shutil
import struct
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamsql.errors import ConfigError, StreamsqlError
from streamsql.formats import schema_registry

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient
    from pyspark.sql import SparkSession

    from streamsql.formats import FormatSpec
    from streamsql.runtime.engine import Engine
    from streamsql.testing.rawproduce import RawProducer

DEFAULT_TIMEOUT_S = 120.0

# --------------------------------------------------------------------------------------------
# reading test files
# --------------------------------------------------------------------------------------------


def strip_json_comments(text: str) -> str:
    """Remove ``//`` and ``/* */`` comments outside strings (Jackson's ALLOW_COMMENTS)."""
    out: list[str] = []
    i, n = 0, len(text)
    in_str = False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_str = False
            i += 1
            continue
        if c == '"':
            in_str = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def load_json(path: Path) -> Any:
    return json.loads(strip_json_comments(path.read_text(encoding="utf-8")))


@dataclass
class QttCase:
    """One runnable test: a QTT test node after ``format``/``config`` expansion."""

    id: str
    file: str  # file name, e.g. "project-filter.json"
    name: str
    statements: list[str]
    inputs: list[dict[str, Any]] = field(default_factory=list)
    outputs: list[dict[str, Any]] = field(default_factory=list)
    expected_exception: dict[str, Any] | None = None
    properties: dict[str, Any] = field(default_factory=dict)
    topics: list[dict[str, Any]] = field(default_factory=list)
    post: dict[str, Any] | None = None
    skip_reason: str | None = None


def _substitute(node: Any, token: str, value: str) -> Any:
    if isinstance(node, str):
        return node.replace(token, value)
    if isinstance(node, list):
        return [_substitute(x, token, value) for x in node]
    if isinstance(node, dict):
        return {k: _substitute(v, token, value) for k, v in node.items()}
    return node


def expand_test(test: dict[str, Any], stem: str, file: str) -> list[QttCase]:
    """The cases of one test node: one per ``format`` × ``config`` value."""
    name = str(test.get("name", "<unnamed>"))
    variants: list[tuple[str, dict[str, Any]]] = [(name, test)]
    formats = test.get("format")
    if formats:
        variants = [(f"{n} - {f}", _substitute(t, "{FORMAT}", str(f))) for n, t in variants for f in formats]
    configs = test.get("config")
    if configs:
        variants = [(f"{n} - {c}", _substitute(t, "{CONFIG}", str(c))) for n, t in variants for c in configs]
    cases = []
    for case_name, node in variants:
        skip = None
        if node.get("enabled") is False:
            skip = "disabled in the corpus (enabled: false)"
        cases.append(QttCase(
            id=f"{stem}/{case_name}", file=file, name=case_name,
            statements=[str(s) for s in node.get("statements", [])],
            inputs=list(node.get("inputs") or []), outputs=list(node.get("outputs") or []),
            expected_exception=node.get("expectedException"),
            properties={str(k): v for k, v in (node.get("properties") or {}).items()},
            topics=list(node.get("topics") or []), post=node.get("post"), skip_reason=skip,
        ))
    return cases


def load_file(path: Path) -> list[QttCase]:
    data = load_json(path)
    tests = data.get("tests", []) if isinstance(data, dict) else []
    out: list[QttCase] = []
    for test in tests:
        out.extend(expand_test(test, path.stem, path.name))
    return out


def collect_files(paths: Sequence[Path]) -> list[Path]:
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files.extend(sorted(p.glob("*.json")))
        elif p.exists():
            files.append(p)
        else:
            raise FileNotFoundError(f"no such file or directory: {p}")
    return files


def load_test_runner_case(sql: Path, input_file: Path | None, output_file: Path) -> QttCase:
    """ksql-test-runner's trio (statements.sql, input.json ``{"inputs": [...]}``, output.json
    ``{"outputs": [...]}``) as one case."""
    text = sql.read_text(encoding="utf-8")
    inputs = load_json(input_file).get("inputs", []) if input_file else []
    outputs = load_json(output_file).get("outputs", [])
    return QttCase(id=f"{sql.stem}/{sql.name}", file=sql.name, name=sql.name, statements=[text],
                   inputs=list(inputs), outputs=list(outputs))


# --------------------------------------------------------------------------------------------
# topic isolation
# --------------------------------------------------------------------------------------------

_TOPIC_PROP = re.compile(r"(KAFKA_TOPIC\s*=\s*)'((?:[^']|'')*)'", re.IGNORECASE)


def rewrite_statement(stmt: str, prefix: str) -> str:
    """``KAFKA_TOPIC='x'`` → ``KAFKA_TOPIC='<prefix>x'``."""
    return _TOPIC_PROP.sub(lambda m: f"{m.group(1)}'{prefix}{m.group(2)}'", stmt)


def statement_topics(stmt: str) -> list[str]:
    return [m.group(2).replace("''", "'") for m in _TOPIC_PROP.finditer(stmt)]


_CREATE_SOURCE = re.compile(r"^\s*CREATE\s+(?:OR\s+REPLACE\s+)?(?:SOURCE\s+)?(STREAM|TABLE)\b", re.IGNORECASE)
_AS_SELECT = re.compile(r"\bAS\s+SELECT\b", re.IGNORECASE)
_PARTITIONS = re.compile(r"\bPARTITIONS\s*=\s*'?(\d+)", re.IGNORECASE)


def split_statements(text: str) -> list[str]:
    """``text`` cut at semicolons outside quotes (enough to look at each statement's WITH clause)."""
    parts: list[str] = []
    cur: list[str] = []
    quote: str | None = None
    for ch in text:
        if quote:
            if ch == quote:
                quote = None
        elif ch in ("'", '"', "`"):
            quote = ch
        elif ch == ";":
            parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur))
    return [p for p in parts if p.strip()]


def register_topic_schemas(case: QttCase, prefix: str, url: str,
                           register: Callable[..., int] | None = None,
                           ) -> dict[str, dict[str, tuple[int, str]]]:
    """Register the ``keySchema``/``valueSchema`` of the case's ``topics`` in its registry (as
    ksqlDB's harness does before the statements), and after them all the schemas they reference
    (``*SchemaReferences``: each under a subject named as its import, version 1); topic → side →
    (id, text), the schema inputs to that topic are written with. ``register(subject, text, type,
    id, references)`` replaces the client call (a test registry that can honour the ids the files
    ask for)."""
    from streamsql.formats import schema_registry

    if register is None:
        def register(subject: str, text: str, schema_type: str, wanted: int | None,
                     references: tuple[schema_registry.SchemaReference, ...] = ()) -> int:
            return schema_registry.register(url, subject, text, schema_type, wanted, references)

    out: dict[str, dict[str, tuple[int, str]]] = {}
    pending_references: list[tuple[dict[str, Any], str]] = []
    for subject, text, schema_type in ddl_schemas(case, prefix):
        register(subject, text, schema_type, None)
    for entry in case.topics:
        for side in ("key", "value"):
            schema = entry.get(f"{side}Schema")
            if schema is None:
                continue
            fmt = str(entry.get(f"{side}Format") or _case_format(case) or "AVRO").upper()
            schema_type = {"JSON_SR": "JSON", "PROTOBUF_NOSR": "PROTOBUF"}.get(fmt, fmt)
            if schema_type not in ("AVRO", "JSON", "PROTOBUF"):
                schema_type = "AVRO"
            text = schema_registry.schema_text(schema, schema_type)
            topic = prefix + str(entry.get("name"))
            wanted = entry.get(f"{side}SchemaId")
            refs = entry.get(f"{side}SchemaReferences") or []
            references = tuple(schema_registry.SchemaReference(str(r["name"]), str(r["name"]), 1) for r in refs)
            schema_id = register(schema_registry.subject_for(topic, side == "key"), text, schema_type,
                                 int(wanted) if wanted is not None else None, references)
            pending_references += [(ref, schema_type) for ref in refs]
            out.setdefault(topic, {})[side] = (schema_id, text)
    for ref, schema_type in pending_references:  # last: the ids the files name are the topics' schemas'
        ref_type = {"JSON_SR": "JSON"}.get(str(ref.get("format", schema_type)).upper(), schema_type)
        register(str(ref["name"]), schema_registry.schema_text(ref["schema"], ref_type), ref_type, None)
    return out


_SCHEMA_ID = re.compile(r"\b(?:KEY|VALUE)_SCHEMA_ID\b", re.IGNORECASE)


def ddl_schemas(case: QttCase, prefix: str) -> list[tuple[str, str, str]]:
    """(subject, schema text, schema type) of the schemas the case's CREATE STREAM/TABLE
    statements with columns register, in statement order (key, then value). ksqlDB's harness
    registers these before the ``topics``' schemas, so the ids a case names in ``*_SCHEMA_ID``
    count them; only a case naming ids needs them ahead (the engine registers the same text
    again when it runs the statement, which the registry keeps as one version)."""
    from streamsql.formats import registry as format_registry
    from streamsql.formats import schema_registry
    from streamsql.sql import ast, parse

    if not any(_SCHEMA_ID.search(stmt) for stmt in case.statements):
        return []
    defaults = {k.lower(): str(v) for k, v in case.properties.items()}
    out = []
    for text in case.statements:
        try:
            [stmt] = parse(rewrite_statement(text, prefix))
        except Exception:  # noqa: BLE001 - the engine reports it when the case runs
            continue
        if not isinstance(stmt, ast.CreateSource) or not stmt.columns:
            continue
        props = stmt.properties
        for side, is_key in (("KEY", True), ("VALUE", False)):
            fmt = str(props.get(f"{side}_FORMAT") or props.get("FORMAT")
                      or defaults.get(f"ksql.persistence.default.format.{side.lower()}")
                      or ("KAFKA" if is_key else "")).upper()
            cols = [c for c in stmt.columns if c.role == ("key" if is_key else "value")]
            if fmt not in format_registry.REGISTRY_SCHEMA_TYPES or not cols:
                continue
            wrap = str(props.get("WRAP_SINGLE_VALUE", "true")).lower() != "false"
            unwrapped = len(cols) == 1 and (is_key or not wrap)
            try:
                schema = format_registry.registry_schema(
                    fmt, cols, unwrapped=unwrapped, full_name=props.get(f"{side}_SCHEMA_FULL_NAME"),
                    nullable=props.get(f"{side}_PROTOBUF_NULLABLE_REPRESENTATION"))
            except StreamsqlError:
                continue
            topic = str(props.get("KAFKA_TOPIC"))
            out.append((schema_registry.subject_for(topic, is_key), schema,
                        format_registry.REGISTRY_SCHEMA_TYPES[fmt]))
    return out


def _case_format(case: QttCase) -> str | None:
    """The ``{FORMAT}`` value a templated case was expanded with (its id's suffix)."""
    for fmt in ("AVRO", "PROTOBUF_NOSR", "PROTOBUF", "JSON_SR"):
        if case.name.endswith(f" - {fmt}") or f" - {fmt} - " in case.name:
            return fmt
    text = " ".join(case.statements).upper()
    for fmt in ("PROTOBUF_NOSR", "PROTOBUF", "JSON_SR", "AVRO"):
        if f"'{fmt}'" in text:
            return fmt
    return None


def topics_to_create(case: QttCase) -> dict[str, int]:
    """Topics the harness creates before the statements run (ksqlDB's test harness creates the
    topics named by ``topics``, by source declarations and by inputs): name → partitions. Topics
    that a statement creates itself (``PARTITIONS=n``, or a CSAS sink) are left to the engine."""
    wanted: dict[str, int] = {}
    for t in case.topics:
        if t.get("name"):
            wanted[str(t["name"])] = int(t.get("partitions") or 1)
    engine_made: set[str] = set()
    for stmt in (part for text in case.statements for part in split_statements(text)):
        names = statement_topics(stmt)
        if not names:
            continue
        is_create = _CREATE_SOURCE.match(stmt) is not None
        if _AS_SELECT.search(stmt) or not is_create:
            engine_made.update(names)  # CSAS / INSERT: the engine creates or requires the sink
        elif _PARTITIONS.search(stmt):
            engine_made.update(names)
        else:
            for n in names:
                wanted.setdefault(n, 1)
    for rec in case.inputs:
        if rec.get("topic"):
            wanted.setdefault(str(rec["topic"]), 1)
    # a ``topics`` entry with a partition count is made as declared; without one, a statement that
    # creates the topic with PARTITIONS=n decides (ksqlDB's harness takes the statement's count)
    declared = {str(t.get("name")) for t in case.topics if t.get("partitions")}
    return {n: p for n, p in wanted.items() if n not in engine_made or n in declared}


# --------------------------------------------------------------------------------------------
# encoding inputs and decoding outputs
# --------------------------------------------------------------------------------------------


def raw_encode(value: Any) -> bytes | None:
    """Bytes for a value when no declared format says otherwise: strings as UTF-8 text,
    everything else as JSON."""
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode("utf-8")
    return json.dumps(value).encode("utf-8")


def encode_with(spec: Any, value: Any, schema: tuple[int, str] | None = None) -> bytes | None:
    """Encode one QTT key/value with a :class:`~streamsql.formats.FormatSpec`. For registry
    formats, ``schema`` (id, text) is the schema to write with (default: the source's own)."""
    if value is None:
        return None
    name = spec.name.upper()
    if name == "AVRO":
        return _encode_avro(spec, value, schema)
    if name == "JSON_SR":
        return schema_registry.frame(_writer(spec, schema)[0], json.dumps(value).encode("utf-8"))
    if name in ("PROTOBUF", "PROTOBUF_NOSR"):
        return _encode_protobuf(spec, value, schema)
    if name == "JSON":
        return json.dumps(value).encode("utf-8")
    if name == "DELIMITED":
        return raw_encode(value if isinstance(value, str) else str(value))
    if name == "KAFKA" and len(spec.columns) == 1:
        import pyarrow as pa

        from streamsql import types as t
        from streamsql.formats import serde_for

        col = spec.columns[0]
        if col.type.kind == t.Kind.BYTES and isinstance(value, str):
            try:
                return base64.b64decode(value)  # QTT files give BYTES as base64 text
            except ValueError:
                return raw_encode(value)
        try:
            arr = pa.array([value], type=t.to_arrow(col.type))
            batch = pa.RecordBatch.from_arrays([arr], names=[col.name])
            return serde_for(spec).encode(batch)[0]
        except Exception:  # noqa: BLE001 - a value of the wrong type: send it as text, as given
            return raw_encode(value)
    return raw_encode(value)


def _encode_avro(spec: Any, value: Any, schema: tuple[int, str] | None) -> bytes:
    import io as _io

    import fastavro

    from streamsql.formats import avro_format, schema_registry

    schema = _writer(spec, schema)
    parsed = json.loads(schema[1])
    buf = _io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(parsed), avro_format.datum_from_json(parsed, value))
    return schema_registry.frame(schema[0], buf.getvalue())


def _encode_protobuf(spec: Any, value: Any, schema: tuple[int, str] | None) -> bytes:
    from streamsql.formats import protobuf_format as pf

    registry = spec.name.upper() == "PROTOBUF"
    if registry:
        schema_id, text = _writer(spec, schema)
    else:
        text = pf.proto_schema(spec.columns, full_name=spec.options.get("fullName"),
                               nullable=spec.options.get("nullable"))
    parsed = _proto_schema(spec, schema_id, text) if registry else pf.ProtoSchema(text)
    path = parsed.message_path(spec.options.get("fullName")) if registry else (0,)
    msg = parsed.message_class(path)()
    pf.fill_message(msg, value if isinstance(value, dict) else {spec.columns[0].name: value})
    body = msg.SerializeToString()
    return schema_registry.frame(schema_id, pf._index_prefix(path) + body) if registry else body


def _decode_protobuf(spec: Any, raw: bytes) -> Any:
    from streamsql.formats import protobuf_format as pf

    try:
        if spec.name.upper() == "PROTOBUF":
            schema_id, payload = schema_registry.split_header(raw)
            path, used = pf._message_indexes(payload)
            text = (spec.options.get("schemas") or {}).get(str(schema_id))
            if text is None:
                text = schema_registry.by_id(spec.options.get("registry", ""), schema_id).text
            body = bytes(payload[used:])
            schema = _proto_schema(spec, schema_id, text)
        else:
            path, body = [0], raw
            schema = pf.ProtoSchema(pf.proto_schema(spec.columns, full_name=spec.options.get("fullName"),
                                                    nullable=spec.options.get("nullable")))
        msg = schema.message_class(path).FromString(body)
    except Exception as e:  # noqa: BLE001
        return _Undecodable(raw, f"not PROTOBUF: {e}")
    return pf.message_to_data(msg, json_like=True)


def _proto_schema(spec: Any, schema_id: int, text: str) -> Any:
    """A registered Protobuf schema with what it imports (the source's snapshot, else the registry)."""
    from streamsql.formats import protobuf_format as pf

    imports = (spec.options.get("imports") or {}).get(str(schema_id))
    url = spec.options.get("registry", "")
    if imports is None and url:
        try:
            imports = schema_registry.imports(url, schema_registry.by_id(url, schema_id))
        except ConfigError:
            imports = {}
    return pf.ProtoSchema(text, imports or {})


def _writer(spec: Any, schema: tuple[int, str] | None) -> tuple[int, str]:
    """The (id, text) a registry-format input is written with: the topic's declared schema, else
    the source's own."""
    if schema is not None:
        return schema
    writer_id = spec.options.get("writerId")
    return int(writer_id), spec.options["schemas"][str(writer_id)]


def _decode_avro(spec: Any, raw: bytes) -> Any:
    import io as _io

    import fastavro

    from streamsql.formats import avro_format, schema_registry

    try:
        schema_id, payload = schema_registry.split_header(raw)
        text = (spec.options.get("schemas") or {}).get(str(schema_id))
        if text is None:
            text = schema_registry.by_id(spec.options.get("registry", ""), schema_id).text
        datum = fastavro.schemaless_reader(_io.BytesIO(payload), fastavro.parse_schema(json.loads(text)), None)
    except Exception as e:  # noqa: BLE001
        return _Undecodable(raw, f"not AVRO: {e}")
    return avro_format.json_from_datum(datum)


def window_suffix(window: dict[str, Any] | None) -> bytes:
    """ksqlDB's windowed key: inner key bytes + 8-byte start (time windows), or + 8-byte end and
    8-byte start (session windows, Kafka Streams' SessionKeySchema order)."""
    if not window:
        return b""
    start = int(window.get("start", 0))
    if str(window.get("type", "time")).lower() == "session":
        return struct.pack(">qq", int(window.get("end", start)), start)
    return struct.pack(">q", start)


def decode_with(spec: Any | None, raw: bytes | None) -> Any:
    """The data a record side holds, for comparison with the QTT file's JSON."""
    if raw is None:
        return None
    name = spec.name.upper() if spec is not None else None
    if name == "AVRO":
        return _decode_avro(spec, raw)
    if name in ("PROTOBUF", "PROTOBUF_NOSR"):
        return _decode_protobuf(spec, raw)
    if name == "JSON_SR":
        try:
            raw = bytes(schema_registry.split_header(raw)[1])
        except ValueError as e:
            return _Undecodable(raw, str(e))
        name = "JSON"
    if name == "KAFKA" and spec is not None and len(spec.columns) == 1:
        from streamsql.formats import serde_for

        res = serde_for(spec).decode([raw])
        if res.errors[0]:
            return _Undecodable(raw, res.errors[0])
        v = res.columns[0][0].as_py()
        return base64.b64encode(v).decode() if isinstance(v, (bytes, bytearray)) else v
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return _Undecodable(raw, "not UTF-8")
    if name == "JSON":
        try:
            return json.loads(text, parse_float=Decimal)  # keeps a DECIMAL's scale for comparison
        except json.JSONDecodeError:
            return _Undecodable(raw, "not JSON")
    return text


@dataclass(frozen=True)
class _Undecodable:
    raw: bytes
    why: str

    def __repr__(self) -> str:
        return f"<undecodable {self.raw!r}: {self.why}>"


# --------------------------------------------------------------------------------------------
# comparison
# --------------------------------------------------------------------------------------------


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float, Decimal)) and not isinstance(x, bool)


def data_equal(expected: Any, actual: Any) -> bool:
    """Structural equality as ksqlDB's ``ExpectedRecordComparator``: numbers numerically (doubles
    within 1e-6), objects of the same size field by field (exact name, then upper-cased name; a
    field absent from the actual object reads as null, as in ksqlDB), lists element-wise."""
    if expected is None or actual is None:
        return expected is None and actual is None
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(expected, bool) and isinstance(actual, bool) and expected == actual
    if _is_number(expected):
        if not _is_number(actual):
            return False
        if isinstance(expected, int) and isinstance(actual, int):
            return expected == actual
        return math.isclose(float(expected), float(actual), rel_tol=1e-9, abs_tol=1e-6)
    if isinstance(expected, str):
        if isinstance(actual, Decimal):
            # QTT files write DECIMAL values as text; ksqlDB compares them as BigDecimal.equals:
            # same number at the same scale ("5.40" is not 5.4)
            try:
                want = Decimal(expected)
            except InvalidOperation:
                return False
            return want == actual and want.as_tuple().exponent == actual.as_tuple().exponent
        return isinstance(actual, str) and expected == actual
    if isinstance(expected, list):
        return (isinstance(actual, list) and len(expected) == len(actual)
                and all(data_equal(e, a) for e, a in zip(expected, actual)))
    if isinstance(expected, dict):
        if not isinstance(actual, dict) or len(expected) != len(actual):
            return False
        for k, v in expected.items():
            # as ksqlDB's Map.get: an absent field reads as null (the sizes are already equal)
            a = actual.get(k)
            if a is None:
                a = actual.get(str(k).upper())
            if not data_equal(v, a):
                return False
        return True
    return bool(expected == actual)


def text_equal(expected: Any, actual: Any, delimiter: str = ",") -> bool:
    """DELIMITED (or untyped) text: equal strings, or equal field by field with numbers compared
    numerically."""
    if expected is None or actual is None:
        return expected is None and actual is None
    if not isinstance(actual, str):
        return data_equal(expected, actual)
    if not isinstance(expected, str):
        # a JSON number/object expected where we only have text: compare as parsed JSON
        try:
            return data_equal(expected, json.loads(actual))
        except json.JSONDecodeError:
            return str(expected) == actual
    if expected == actual:
        return True
    ef, af = expected.split(delimiter), actual.split(delimiter)
    if len(ef) != len(af):
        return False
    for e, a in zip(ef, af):
        if e == a:
            continue
        try:
            if not math.isclose(float(e), float(a), rel_tol=1e-9, abs_tol=1e-6):
                return False
        except ValueError:
            return False
    return True


@dataclass
class ActualRecord:
    partition: int
    offset: int
    key: Any
    value: Any
    timestamp: int
    window: dict[str, int] | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


@dataclass
class SideFormat:
    """How to compare one side (key or value) of a topic's records."""

    kind: str  # "json" | "text" | "typed" | "raw"
    delimiter: str = ","

    def equal(self, expected: Any, actual: Any) -> bool:
        if isinstance(actual, _Undecodable):
            return False
        if self.kind == "text":
            return text_equal(expected, actual, self.delimiter)
        if self.kind == "raw":
            return text_equal(expected, actual)
        return data_equal(expected, actual)


def _show(v: Any) -> str:
    if isinstance(v, _Undecodable):
        return repr(v)
    return json.dumps(v, sort_keys=False, default=str)


def describe_record(key: Any, value: Any, ts: Any, window: Any = None) -> str:
    w = f" window={_show(window)}" if window else ""
    return f"<{_show(key)}, {_show(value)}> with timestamp={ts}{w}"


def record_matches(exp: dict[str, Any], act: ActualRecord, key_fmt: SideFormat, value_fmt: SideFormat,
                   default_ts: int | None) -> bool:
    if not key_fmt.equal(exp.get("key"), act.key):
        return False
    if not value_fmt.equal(exp.get("value"), act.value):
        return False
    ts = exp["timestamp"] if "timestamp" in exp else default_ts
    if ts is not None and int(ts) != act.timestamp:
        return False
    w = exp.get("window")
    if w:
        if act.window is None or int(w.get("start", 0)) != act.window.get("start"):
            return False
        if "end" in act.window and "end" in w and int(w["end"]) != act.window["end"]:
            return False
    return True


def compare_topic(topic: str, expected: list[dict[str, Any]], actual: list[ActualRecord], key_fmt: SideFormat,
                  value_fmt: SideFormat, default_ts: int | None) -> str | None:
    """None when ``actual`` matches ``expected`` (see :func:`_compare_topic`). When the only
    differences are records expected at timestamp 0 written with another timestamp, the reason
    says so (the engine's sink cannot write timestamp 0: docs/conformance.md)."""
    problem = _compare_topic(topic, expected, actual, key_fmt, value_fmt, default_ts)
    if problem is None:
        return None
    zeroless = [{**e, "timestamp": None} if int(e.get("timestamp", default_ts) or 0) == 0 else e for e in expected]
    lenient = _compare_topic(topic, zeroless, actual, key_fmt, value_fmt, default_ts)
    if lenient is None:
        return ("only timestamps differ: records expected at timestamp 0 were written with the wall-clock time; "
                + problem)
    return lenient


def _compare_topic(topic: str, expected: list[dict[str, Any]], actual: list[ActualRecord], key_fmt: SideFormat,
                   value_fmt: SideFormat, default_ts: int | None) -> str | None:
    """None when ``actual`` matches ``expected`` in order (per partition when the records span
    several partitions), else ksqlDB-style text naming the first difference."""
    partitions = sorted({a.partition for a in actual})
    if len(partitions) <= 1:
        for i, (e, a) in enumerate(zip(expected, actual)):
            if not record_matches(e, a, key_fmt, value_fmt, default_ts):
                note = ""
                wanted = describe_record(e.get('key'), e.get('value'), e.get('timestamp', default_ts), e.get('window'))
                return (f"Topic '{topic}', message {i}: Expected {wanted}"
                        f" but was {describe_record(a.key, a.value, a.timestamp, a.window)}{note}")
        if len(expected) != len(actual):
            extra = ""
            if len(actual) > len(expected):
                a = actual[len(expected)]
                extra = f"; first extra record: {describe_record(a.key, a.value, a.timestamp, a.window)}"
            else:
                e = expected[len(actual)]
                missing = describe_record(e.get('key'), e.get('value'), e.get('timestamp', default_ts), e.get('window'))
                extra = f"; first missing record: {missing}"
            return f"Topic '{topic}': expected {len(expected)} records but got {len(actual)}{extra}"
        return None
    # several partitions: each partition's records must appear in expected order
    queues = {p: [a for a in actual if a.partition == p] for p in partitions}
    heads = {p: 0 for p in partitions}
    for i, e in enumerate(expected):
        hit = None
        for p in partitions:
            if heads[p] < len(queues[p]) and record_matches(e, queues[p][heads[p]], key_fmt, value_fmt, default_ts):
                hit = p
                break
        if hit is None:
            nexts = [describe_record(queues[p][heads[p]].key, queues[p][heads[p]].value, queues[p][heads[p]].timestamp)
                     for p in partitions if heads[p] < len(queues[p])]
            return (f"Topic '{topic}' ({len(partitions)} partitions), message {i}: Expected "
                    f"{describe_record(e.get('key'), e.get('value'), e.get('timestamp', default_ts), e.get('window'))}"
                    f" but the next records of the partitions were: {'; '.join(nexts) or 'none'}")
        heads[hit] += 1
    if len(expected) != len(actual):
        return f"Topic '{topic}': expected {len(expected)} records but got {len(actual)}"
    return None


# --------------------------------------------------------------------------------------------
# expected exceptions
# --------------------------------------------------------------------------------------------

#: Where streamsql words the same error differently from ksqlDB: (pattern on ksqlDB's expected
#: text, replacement giving our wording, why). An expected message also matches when its rewritten
#: form is in our message. Documented in docs/conformance.md; add only same-error rewordings.
MESSAGE_REWRITES: list[tuple[str, str, str]] = [
    (r"Line: (\d+), Col: (\d+): ", r"line \1:\2: ", "location prefix: ksqlDB 'Line: 1, Col: 21: ', ours 'line 1:21: '"),
    (r"^(Syntax error at or near '[^']*') at line (\d+):(\d+)$", r"line \2:\3: \1",
     "syntax errors: ksqlDB puts the location last, ours first (ANTLR style)"),
    (r"^Error in (?:WHERE|HAVING) expression: ", "", "ours names the failing comparison without the clause prefix"),
    (r"^Invalid (?:Predicate|Select): ", "", "ours names the failing expression without the clause prefix"),
    (r"\b(?:Stream|Table) (\S+) does not exist", r"Source \1 does not exist", "DROP of a missing source"),
]


#: ksqlDB's exception classes (an ``expectedException``'s ``type``) by the failure they stand for.
#: ParseFailedException and KsqlStatementException are thrown while a statement is executed, so the
#: case expects a rejected statement; Kafka Streams wraps an error while processing records in a
#: StreamsException, so the case expects the statements accepted and a query to fail. KsqlException,
#: the base of ksqlDB's own exceptions, is thrown on both paths (and by the harness's serializers of
#: the inputs), so it stands for either.
STATEMENT_EXCEPTIONS = frozenset({"io.confluent.ksql.util.KsqlStatementException",
                                  "io.confluent.ksql.parser.exception.ParseFailedException"})
RUNTIME_EXCEPTIONS = frozenset({"org.apache.kafka.streams.errors.StreamsException"})


def expected_failure_kind(expected: dict[str, Any]) -> str | None:
    """``"statement"``, ``"runtime"`` or None (either) for an ``expectedException`` node. Checked
    whether or not the node has a message: a case expecting a rejected statement never passes on a
    query that failed at run time, nor the reverse."""
    kind = str(expected.get("type") or "")
    if kind in STATEMENT_EXCEPTIONS:
        return "statement"
    if kind in RUNTIME_EXCEPTIONS:
        return "runtime"
    return None


def message_matches(expected: str | None, actual: str) -> bool:
    if not expected:
        return True
    norm = lambda s: re.sub(r"\s+", " ", s).strip().lower()  # noqa: E731
    candidates = [expected]
    rewritten = expected
    for pattern, repl, _why in MESSAGE_REWRITES:
        rewritten = re.sub(pattern, repl, rewritten)
    if rewritten != expected:
        candidates.append(rewritten)
    return any(c in actual or norm(c) in norm(actual) for c in candidates)


# --------------------------------------------------------------------------------------------
# post conditions
# --------------------------------------------------------------------------------------------


def normalize_schema(text: str) -> str:
    s = text.replace("`", "").upper()
    s = re.sub(r"\bPRIMARY KEY\b", "KEY", s)  # ksqlDB compares LogicalSchemas: a key column is a key column
    s = re.sub(r"\bINTEGER\b", "INT", s)
    s = re.sub(r"\bVARCHAR\b", "STRING", s)
    s = re.sub(r"\s*([,<>()])\s*", r"\1", s)
    return re.sub(r"\s+", " ", s).strip()


def _format_name(node: Any) -> str | None:
    if node is None:
        return None
    if isinstance(node, dict):
        f = node.get("format")
        return str(f).upper() if f else None
    return str(node).upper()


def check_post(post: dict[str, Any] | None, catalog: Any) -> str | None:
    """ksqlDB's ``post.sources`` checks we can make: the source exists, its type, schema and
    key/value formats."""
    if not post:
        return None
    for src in post.get("sources") or []:
        name = str(src.get("name", ""))
        found = catalog.find(name)
        if found is None:
            return f"post: source {name} does not exist"
        kind = src.get("type")
        if kind and str(kind).upper() != found.kind.upper():
            return f"post: source {name} is a {found.kind.lower()}, expected a {str(kind).lower()}"
        schema = src.get("schema")
        if schema is not None:
            ours = ", ".join(c.sql() for c in found.columns)
            if normalize_schema(schema) != normalize_schema(ours):
                return f"post: source {name} schema: expected '{schema}' but was '{ours.replace('`', '')}'"
        kf = _format_name(src.get("keyFormat"))
        if kf and found.key_columns and kf != found.key_format.upper():
            return f"post: source {name} key format: expected {kf} but was {found.key_format}"
        vf = _format_name(src.get("valueFormat"))
        if vf and vf != found.value_format.upper():
            return f"post: source {name} value format: expected {vf} but was {found.value_format}"
    return None


# --------------------------------------------------------------------------------------------
# running
# --------------------------------------------------------------------------------------------


@dataclass
class CaseResult:
    id: str
    file: str
    status: str  # passed | failed | skipped
    reason: str = ""
    duration_s: float = 0.0
    #: runs it took: more than 1 when an infrastructure failure made the runner run it again
    attempts: int = 1
    #: its inputs were produced before its queries started (see the module docstring)
    fed_first: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "file": self.file, "status": self.status, "reason": self.reason,
                "duration_s": round(self.duration_s, 3), "attempts": self.attempts, "fed_first": self.fed_first}


class MemoryCommandLog:
    """A command log that lives as long as its case: nothing to replay, nothing to fsync. Sequence
    numbers start at ``first`` so that query ids (``CSAS_<NAME>_<seq>``, Spark query names) are
    unique among cases running at the same time."""

    def __init__(self, first: int = 0) -> None:
        self._first = first
        self._commands: list[Any] = []

    def read_all(self) -> list[Any]:
        return list(self._commands)

    def next_seq(self) -> int:
        return self._commands[-1].seq + 1 if self._commands else self._first

    def append(self, statement: str, properties: dict[str, str], *args: Any, **kwargs: Any) -> Any:
        from streamsql.catalog.commands import Command

        cmd = Command(self.next_seq(), statement, dict(properties), *args, **kwargs)
        self._commands.append(cmd)
        return cmd

    def reset(self) -> None:
        self._commands = []


#: ksqlDB's QTT runs with its test UDFs on the classpath; ours are Python ports in this directory
#: ``streamsql.aggregation.buckets`` 1: one stream time per aggregation, as ksqlDB over the
#: corpus's (mostly) one-partition topics, whatever the session's shuffle partitions
QTT_ENGINE_PROPERTIES = {"ksql.extension.dir": str(Path(__file__).with_name("qtt_udfs")),
                         "streamsql.aggregation.buckets": "1"}


class _Failure(Exception):
    """A case failed (reason = message)."""


class _FeedRecordAtATime(Exception):
    """Feeding the inputs first did not apply to this case's queries: run it record at a time."""


def merge_order_is_input_order(inputs: Sequence[dict[str, Any]], tie_winner: str | None = None,
                               any_tie_winner: bool = False) -> bool:
    """True when merging the inputs' topics by timestamp (each topic in input order; always the
    topic whose next record is earliest, as a Kafka Streams task picks) gives the input order.

    A tie between topics is broken for ``tie_winner`` (the join's right side, as
    :func:`streamsql.physical.joins.arrival_order` does), or, with ``any_tie_winner``, for
    whichever topic the inputs list first (before the join's sides are known); otherwise a tie
    makes the answer False."""
    queues: dict[str, list[tuple[int, int]]] = {}
    for i, rec in enumerate(inputs):
        queues.setdefault(str(rec.get("topic")), []).append((int(rec.get("timestamp", 0) or 0), i))
    heads = {topic: 0 for topic in queues}
    expected = 0
    while True:
        candidates = [(queue[heads[topic]][0], topic) for topic, queue in queues.items() if heads[topic] < len(queue)]
        if not candidates:
            return True
        earliest = min(ts for ts, _ in candidates)
        tied = [topic for ts, topic in candidates if ts == earliest]
        if len(tied) == 1:
            topic = tied[0]
        elif any_tie_winner:
            topic = next((t for t in tied if queues[t][heads[t]][1] == expected), tied[0])
        elif tie_winner in tied and len(tied) == 2:
            topic = tie_winner
        else:
            return False
        if queues[topic][heads[topic]][1] != expected:
            return False
        heads[topic] += 1
        expected += 1


def _join_tie_winner(steps: Sequence[Any]) -> str | None:
    """The topic that goes first at equal timestamps in the plan's join: its right side, for a
    join of two scans; None for an n-way join (its later operators see joined rows)."""
    from streamsql.physical.steps import Join, Scan

    joins = [step for step in steps if isinstance(step, Join)]
    if len(joins) == 1 and isinstance(joins[0].left, Scan):
        return joins[0].right.source.topic
    return None


def _has_foreign_key_join(steps: Sequence[Any]) -> bool:
    """A foreign-key join runs two operators (subscriptions, then by foreign key): records of one
    batch reach the second in another order than one at a time."""
    from streamsql.physical.steps import Join

    def foreign(step: Any) -> bool:
        return isinstance(step, Join) and (bool(step.spec.foreign_key) or foreign(step.left))

    return any(foreign(step) for step in steps)


def _statement_kinds(statement: str) -> tuple[type, ...]:
    """The statement classes ``statement`` parses to (none for one that does not parse here: the
    engine rejects it)."""
    from streamsql.sql.parser import parse

    try:
        return tuple(type(node) for node in parse(statement))
    except Exception:  # noqa: BLE001
        return ()


class QttRunner:
    """Runs cases one at a time on fresh engines over a shared broker and SparkSession."""

    def __init__(self, bootstrap_servers: str, spark: SparkSession, work_dir: Path | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S, spark_master: str | None = None, parallel: int = 1) -> None:
        self.bootstrap = bootstrap_servers
        self.parallel = max(1, parallel)
        self._seq_lock = threading.Lock()
        self.spark = spark
        self.timeout_s = timeout_s
        self.spark_master = spark_master
        self._own_work_dir = work_dir is None
        self.work_dir = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="streamsql-qtt-"))
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self._seq = 0
        self._producer: RawProducer | None = None
        self._admin_client: AdminClient | None = None
        self.run_tag = f"{int(time.time()) % 100000:05d}"
        self._warm = False  # a case has run a query through Spark (see iter_results)

    # -- public --------------------------------------------------------------------------------

    def run(self, cases: Iterable[QttCase], on_result: Callable[[CaseResult], None] | None = None) -> list[CaseResult]:
        out = []
        for res in self.iter_results(cases):
            out.append(res)
            if on_result is not None:
                on_result(res)
        return out

    def iter_results(self, cases: Iterable[QttCase]) -> Iterable[CaseResult]:
        """Results in the order of ``cases``; with ``parallel`` > 1, that many cases run at once
        (each on its own engine). Every case is queued up front, so a slow case holds back only
        the *reporting* of later ones, never their start: the workers stay busy to the end."""
        if self.parallel == 1:
            for case in cases:
                yield self.run_case(case)
            return
        from concurrent.futures import ThreadPoolExecutor

        pending = list(cases)
        # Warm-up, one case at a time until one has run a query: the first tasks of Spark's Python
        # runners add entries to an environment map shared by every query of the Kafka data
        # source (BasePythonRunner puts SPARK_LOCAL_DIRS, SPARK_REUSE_WORKER, ... into the
        # function's envVars). Three cold queries doing that at once corrupted the HashMap, and
        # from then on every task failed to deserialize (java.io.OptionalDataException), the
        # whole corpus run failing. Once the entries exist, later puts only replace values.
        while pending and not self._warm:
            yield self.run_case(pending.pop(0))
        with ThreadPoolExecutor(self.parallel, thread_name_prefix="qtt-pool") as pool:
            futures = [pool.submit(self.run_case, case) for case in pending]
            try:
                for f in futures:
                    yield f.result()
            finally:
                for f in futures:
                    f.cancel()  # the consumer stopped early: run nothing more

    #: Spark gives a Python worker 10 s to start; on an overloaded machine the Kafka source's worker
    #: misses it and the query dies before reading anything. Not a result: the case is run again.
    INFRA_FAILURE = "Python worker failed to connect back"
    INFRA_ATTEMPTS = 3

    def run_case(self, case: QttCase) -> CaseResult:
        """Runs ``case``; one that failed on :attr:`INFRA_FAILURE` is run again (up to
        :attr:`INFRA_ATTEMPTS` in all), and the result says how many attempts it took, so a
        retried case is counted and reported (``summary_line``, the JSON report), never passed
        silently."""
        feed_first = True
        for attempt in range(1, self.INFRA_ATTEMPTS + 1):
            result = self._run_case_once(case, feed_first)
            if result.status == "rerun":  # not an attempt: the same case in the other feeding mode
                feed_first = False
                result = self._run_case_once(case, feed_first)
            result.attempts = attempt
            if self.INFRA_FAILURE not in result.reason:
                break
        return result

    def _run_case_once(self, case: QttCase, feed_first: bool = True) -> CaseResult:
        if case.skip_reason:
            return CaseResult(case.id, case.file, "skipped", case.skip_reason)
        with self._seq_lock:
            self._seq += 1
            seq = self._seq
        prefix = f"qtt{self.run_tag}_{seq}_"
        started = time.monotonic()
        box: dict[str, Any] = {}
        state: dict[str, Any] = {}

        def body() -> None:
            try:
                _activate(self.spark)
                self._execute(case, prefix, state, feed_first)
                box["result"] = ("passed", "")
            except _FeedRecordAtATime:
                box["result"] = ("rerun", "")
            except _Failure as f:
                box["result"] = ("failed", str(f))
            except BaseException as e:  # noqa: BLE001 - one case's crash never stops the run
                box["result"] = ("failed", f"crash: {type(e).__name__}: {_first_line(str(e))}")
                box["trace"] = traceback.format_exc()

        worker = threading.Thread(target=body, name=f"qtt-{seq}", daemon=True)
        worker.start()
        worker.join(self.timeout_s)
        if worker.is_alive():
            engine = state.get("engine")
            if engine is not None:
                try:
                    engine.close()  # stopping the queries unblocks processAllAvailable
                except Exception:  # noqa: BLE001
                    pass
            worker.join(30)
            status, reason = "failed", f"timeout: the case did not finish within {self.timeout_s:.0f}s"
        else:
            status, reason = box.get("result", ("failed", "crash: no result"))
        self._cleanup(state, prefix)
        reason = reason.replace(prefix, "")
        return CaseResult(case.id, case.file, status, reason, time.monotonic() - started,
                          fed_first="fed_first" in state and status != "rerun")

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close()
        if self._own_work_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    # -- one case ------------------------------------------------------------------------------

    def _execute(self, case: QttCase, prefix: str, state: dict[str, Any], feed_first: bool = True) -> None:
        from streamsql.runtime.config import EngineConfig
        from streamsql.runtime.engine import Engine

        data_dir = self.work_dir / prefix.rstrip("_")
        state["data_dir"] = data_dir
        first_seq = int(prefix.rstrip("_").rsplit("_", 1)[-1]) * 1000 if self.parallel > 1 else 0
        engine = Engine(EngineConfig(self.bootstrap, data_dir, self.spark_master, dict(QTT_ENGINE_PROPERTIES)),
                        command_log=MemoryCommandLog(first_seq), spark=self.spark)
        state["engine"] = engine
        engine.start()
        expected_exc = case.expected_exception
        # ksqlDB's test harness turns the record cache off: every aggregate update is output
        props: dict[str, str] = {"auto.offset.reset": "earliest", "ksql.streams.cache.max.bytes.buffering": "0"}
        for k, v in case.properties.items():
            props[k] = str(v).lower() if isinstance(v, bool) else str(v)
        props["ksql.output.topic.name.prefix"] = prefix + props.get("ksql.output.topic.name.prefix", "")
        # each case its own in-memory Schema Registry (ksqlDB's harness uses a mock one too)
        props.setdefault(schema_registry.URL_PROPERTY, f"mock://{prefix}")
        state["registry"] = props[schema_registry.URL_PROPERTY]
        for k, v in props.items():
            engine.execute(f"SET '{k}'='{v.replace(chr(39), chr(39) * 2)}';")

        for name, partitions in topics_to_create(case).items():
            engine.admin.create_topic(prefix + name, partitions)
        state["schemas"] = register_topic_schemas(case, prefix, state["registry"])

        feed_first = (feed_first and bool(case.inputs) and props.get("auto.offset.reset") == "earliest"
                      and len({str(r.get("topic")) for r in case.inputs}) > 1
                      and merge_order_is_input_order(case.inputs, any_tie_winner=True))
        starts_query: list[bool] = []
        if feed_first:
            from streamsql.sql import ast

            kinds = [_statement_kinds(stmt) for stmt in case.statements]
            # INSERT VALUES writes records before the inputs when they are fed after the statements
            feed_first = not any(ast.InsertValues in k for k in kinds)
            # the inputs go in just before the first CREATE ... AS SELECT / INSERT INTO ... SELECT
            starts_query = [ast.CreateAsSelect in k or ast.InsertInto in k for k in kinds]
        # statements: each at its line of the script ksqlDB's harness makes of them (one after
        # the other), so the positions in messages are the same
        line = 0
        for i, stmt in enumerate(case.statements):
            if feed_first and "fed_first" not in state and starts_query[i]:
                feed_first = self._feed_first(engine, case, prefix, state)
            text = "\n" * line + rewrite_statement(stmt, prefix)
            line += stmt.count("\n") + 1
            try:
                results = engine.execute(text)
            except StreamsqlError as e:
                msg = str(e).replace(prefix, "")
                if expected_exc is not None:
                    want = expected_exc.get("message")
                    if expected_failure_kind(expected_exc) == "runtime":
                        raise _Failure(f"expected a processing failure ({expected_exc.get('type')}) but statement "
                                       f"{i + 1} was rejected: {_first_line(msg, 400)}") from None
                    if message_matches(want, msg):
                        return
                    raise _Failure(f"expected exception message containing {json.dumps(want)} but statement "
                                   f"{i + 1} was rejected with: {_first_line(msg, 400)}") from None
                raise _Failure(f"statement {i + 1} rejected: {_first_line(msg, 400)}") from None
            for res in results:
                close = getattr(res, "close", None)
                if callable(close) and type(res).__name__ == "RowStream":
                    close()

        # inputs
        try:
            self._feed(engine, case, prefix, state)
        except StreamsqlError as e:
            msg = str(e).replace(prefix, "")
            if expected_exc is not None:
                if expected_failure_kind(expected_exc) == "statement":
                    raise _Failure(f"expected a statement to be rejected ({expected_exc.get('type')}) but every "
                                   f"statement was accepted and processing failed with: {_first_line(msg, 400)}"
                                   ) from None
                if message_matches(expected_exc.get("message"), msg):
                    return
                raise _Failure(f"expected exception message containing {json.dumps(expected_exc.get('message'))} "
                               f"but processing failed with: {_first_line(msg, 400)}") from None
            raise _Failure(f"processing failed: {_first_line(msg, 400)}") from None
        if expected_exc is not None:
            raise _Failure(f"expected exception {expected_exc.get('type', '')} "
                           f"{json.dumps(expected_exc.get('message', ''))} but the statements were accepted "
                           f"and the inputs processed")

        # outputs
        failures = self._check_outputs(engine, case, prefix) if case.outputs else self._check_no_outputs(engine, prefix)
        if failures:
            raise _Failure(failures)
        post = check_post(case.post, engine.catalog)
        if post:
            raise _Failure(post)

    def _raw(self) -> Any:
        from streamsql.testing.rawproduce import RawProducer

        with self._seq_lock:
            if self._producer is None:
                self._producer = RawProducer(self.bootstrap)
            return self._producer

    def _feed_first(self, engine: Engine, case: QttCase, prefix: str, state: dict[str, Any]) -> bool:
        """Produce every input now, before the first query starts, if each input topic is declared
        by a source and has one partition (one join task, so one arrival order). Returns whether
        it did; ``state["fed_first"]`` keeps the queries already running."""
        topics = {prefix + str(r.get("topic")) for r in case.inputs}
        for topic in topics:
            source = _source_for_topic(engine.catalog, topic, prefer_declared=True)
            # a TIMESTAMP column orders the join's records by a value, not by the inputs' times
            if source is None or source.timestamp_column:
                return False
            if engine.admin.partitions(topic) != 1:
                return False
        self._produce(engine, case, prefix, state.get("schemas") or {}, after_each=None)
        state["fed_first"] = set(engine.queries)
        return True

    def _check_fed_first(self, engine: Engine, case: QttCase, prefix: str, running_before: set[str]) -> None:
        """Raises :class:`_FeedRecordAtATime` unless the queries give the same results fed first:
        every query reading several topics started after the inputs were in, reads only input
        topics and orders them as listed (ties to its right side); no query writes an input
        topic; no topic has two writers."""
        catalog = engine.catalog
        inputs = {prefix + str(r.get("topic")) for r in case.inputs}

        def topic_of(name: str) -> str | None:
            src = catalog.sources.get(name)
            return src.topic if src is not None else None

        sinks = [topic_of(q.sink) for q in catalog.queries.values()]
        if len(sinks) != len(set(sinks)) or inputs & set(sinks):
            raise _FeedRecordAtATime()
        prefixed = [{**r, "topic": prefix + str(r.get("topic"))} for r in case.inputs]
        for qid, q in catalog.queries.items():
            plan = engine.queries.plans.get(qid)
            if plan is not None and _has_foreign_key_join(plan.steps):
                raise _FeedRecordAtATime()
            if len(q.sources) < 2:
                continue
            topics = {topic_of(s) for s in q.sources}
            if (qid in running_before or not topics <= inputs
                    or any(catalog.sources[s].timestamp_column for s in q.sources if s in catalog.sources)):
                raise _FeedRecordAtATime()
            # the join's own topics, in input order, as its operator will order them
            winner = _join_tie_winner(plan.steps) if plan is not None else None
            if not merge_order_is_input_order([r for r in prefixed if r["topic"] in topics], tie_winner=winner):
                raise _FeedRecordAtATime()

    def _feed(self, engine: Engine, case: QttCase, prefix: str, state: dict[str, Any]) -> None:
        schemas: dict[str, dict[str, tuple[int, str]]] = state.get("schemas") or {}
        if not case.inputs:
            if engine.queries:
                engine.wait_until_idle()
            return
        if "fed_first" in state:
            self._check_fed_first(engine, case, prefix, state["fed_first"])
        else:
            writers: dict[str, int] = {}
            for q in engine.catalog.queries.values():
                writers[q.sink] = writers.get(q.sink, 0) + 1
            # a join reads two topics: what it emits depends on which side's record came first
            one_at_a_time = any(n > 1 for n in writers.values()) or any(
                len(q.sources) > 1 for q in engine.catalog.queries.values())
            self._produce(engine, case, prefix, schemas, after_each=engine.wait_until_idle if one_at_a_time else None)
        engine.wait_until_idle()
        if engine.queries:
            self._warm = True
        failed = engine.failed_queries()
        if failed:
            raise StreamsqlError(f"Query {failed[0][0]} failed: {failed[0][1]}")

    def _produce(self, engine: Engine, case: QttCase, prefix: str, schemas: dict[str, dict[str, tuple[int, str]]],
                 after_each: Callable[[], None] | None) -> None:
        """Encode and write every input record, in order; ``after_each`` runs after each one."""
        from streamsql.runtime import io
        from streamsql.testing.rawproduce import partition_for

        partitions: dict[str, int] = {}
        producer = self._raw()
        for rec in case.inputs:
            topic = prefix + str(rec.get("topic"))
            source = _source_for_topic(engine.catalog, topic, prefer_declared=True)
            if source is not None:
                declared = schemas.get(topic, {})
                key = encode_with(io.key_spec(source), rec.get("key"), declared.get("key"))
                value = encode_with(io.value_spec(source), rec.get("value"), declared.get("value"))
            else:
                key, value = raw_encode(rec.get("key")), raw_encode(rec.get("value"))
            if rec.get("window") and key is not None:
                key += window_suffix(rec.get("window"))
            headers = [(str(h.get("KEY")), base64.b64decode(h["VALUE"]) if h.get("VALUE") is not None else None)
                       for h in (rec.get("headers") or [])]
            if topic not in partitions:
                partitions[topic] = engine.admin.partitions(topic)
            part = partition_for(key, partitions[topic])
            try:
                producer.produce(topic, part, key, value, int(rec.get("timestamp", 0) or 0), headers)
            except Exception as e:  # noqa: BLE001
                raise _Failure(f"cannot produce input to topic '{rec.get('topic')}': {e}") from None
            if after_each is not None:
                after_each()

    def _check_no_outputs(self, engine: Engine, prefix: str) -> str | None:
        """A case with no expected output records expects its queries to write none: every topic a
        query of the case writes must be empty (ksqlDB's harness compares only the topics the
        outputs name, so an empty list there checks nothing; ours is stricter)."""
        sinks = sorted({engine.catalog.sources[q.sink].topic for q in engine.catalog.queries.values()
                        if q.sink in engine.catalog.sources})
        for topic in sinks:
            records = engine.admin.read_all(topic)
            if records:
                shown = "; ".join(describe_record(r.key, r.value, r.timestamp) for r in records[:3])
                return (f"expected no output records but topic '{topic.replace(prefix, '')}' has {len(records)}: "
                        f"{shown}{' ...' if len(records) > 3 else ''}")
        return None

    def _check_outputs(self, engine: Engine, case: QttCase, prefix: str) -> str | None:
        from streamsql.runtime import io

        by_topic: dict[str, list[dict[str, Any]]] = {}
        for rec in case.outputs:
            by_topic.setdefault(str(rec.get("topic")), []).append(rec)
        # an expected record without a timestamp matches any (ksqlDB's Record.timestamp(): "empty if
        # timestamp can be anything")
        default_ts = None
        topics = engine.admin.topics()
        for name, expected in by_topic.items():
            topic = prefix + name
            if topic not in topics:
                return f"output topic '{name}' was not created (expected {len(expected)} records)"
            source = _source_for_topic(engine.catalog, topic, prefer_declared=False)
            kspec = io.key_spec(source) if source is not None else None
            vspec = io.value_spec(source) if source is not None else None
            key_fmt = _side_format(kspec)
            value_fmt = _side_format(vspec)
            windowed = any(e.get("window") for e in expected)
            actual = []
            for r in engine.admin.read_all(topic):
                raw_key, window = r.key, None
                if windowed and raw_key is not None and len(raw_key) >= 8:
                    if source is not None and (source.window_type or "").upper() == "SESSION" and len(raw_key) >= 16:
                        end, start = struct.unpack(">qq", raw_key[-16:])
                        raw_key, window = raw_key[:-16], {"start": start, "end": end}
                    else:
                        (start,) = struct.unpack(">q", raw_key[-8:])
                        raw_key, window = raw_key[:-8], {"start": start}
                        if source is not None and source.window_size_ms:
                            window["end"] = start + int(source.window_size_ms)
                key = decode_with(kspec, raw_key) if kspec is not None and kspec.name.upper() != "NONE" else (
                    None if raw_key is None else decode_with(None, raw_key))
                value = decode_with(vspec, r.value)
                actual.append(ActualRecord(r.partition, r.offset, key, value, r.timestamp, window, r.headers))
            problem = compare_topic(name, expected, actual, key_fmt, value_fmt, default_ts)
            if problem:
                return problem
        return None

    # -- cleanup -------------------------------------------------------------------------------

    def _cleanup(self, state: dict[str, Any], prefix: str) -> None:
        engine = state.get("engine")
        if engine is not None:
            try:
                engine.close()
            except Exception:  # noqa: BLE001
                pass
        data_dir = state.get("data_dir")
        if data_dir is not None:
            shutil.rmtree(data_dir, ignore_errors=True)
        try:
            self._delete_topics(prefix)
        except Exception:  # noqa: BLE001 - best effort; the broker is in-memory anyway
            pass

    def _delete_topics(self, prefix: str) -> None:
        from confluent_kafka.admin import AdminClient

        from streamsql.kafka.admin import client_config

        if self._admin_client is None:
            self._admin_client = AdminClient(client_config(self.bootstrap))
        md = self._admin_client.list_topics(timeout=10)
        names = [n for n in md.topics if n.startswith(prefix)]
        if names:
            self._admin_client.delete_topics(names, operation_timeout=10)  # not awaited


def _activate(spark: Any) -> None:
    """Make ``spark`` the JVM thread's active session: a Python thread maps to a fresh JVM thread
    (pinned-thread mode), where the session holding streamsql's registered data sources is
    otherwise not the active one."""
    try:
        spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
    except Exception:  # noqa: BLE001 - not a classic session: nothing to do
        pass


def _side_format(spec: FormatSpec | None) -> SideFormat:
    if spec is None:
        return SideFormat("raw")
    name = spec.name.upper()
    if name in ("JSON", "AVRO", "JSON_SR", "PROTOBUF", "PROTOBUF_NOSR"):
        return SideFormat("json")
    if name == "DELIMITED":
        return SideFormat("text", spec.delimiter or ",")
    if name == "KAFKA":
        return SideFormat("typed")
    return SideFormat("raw")


def _source_for_topic(catalog: Any, topic: str, prefer_declared: bool) -> Any:
    matches = [s for s in catalog.sources.values() if s.topic == topic]
    if not matches:
        return None
    if prefer_declared:
        matches.sort(key=lambda s: s.writer_query is not None)
    else:
        matches.sort(key=lambda s: s.writer_query is None)
    return matches[0]


def _first_line(text: str, limit: int = 300) -> str:
    line = text.strip().split("\n")[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


# --------------------------------------------------------------------------------------------
# reporting
# --------------------------------------------------------------------------------------------


def summarize(results: Sequence[CaseResult]) -> tuple[int, int, int]:
    passed = sum(r.status == "passed" for r in results)
    failed = sum(r.status == "failed" for r in results)
    skipped = sum(r.status == "skipped" for r in results)
    return passed, failed, skipped


def retried(results: Sequence[CaseResult]) -> list[CaseResult]:
    """Cases run more than once after an infrastructure failure (whatever their final status)."""
    return [r for r in results if r.attempts > 1]


def summary_line(results: Sequence[CaseResult]) -> str:
    p, f, s = summarize(results)
    again = len(retried(results))
    return (f"{p} passed, {f} failed" + (f", {s} skipped" if s else "")
            + (f" ({again} run again after an infrastructure failure)" if again else ""))


def file_line(file: str, results: Sequence[CaseResult]) -> str:
    p, f, s = summarize(results)
    secs = sum(r.duration_s for r in results)
    return f"{file}: {p} passed, {f} failed, {s} skipped ({secs:.1f}s)"


def write_report(path: Path, results: Sequence[CaseResult], elapsed_s: float) -> None:
    p, f, s = summarize(results)
    files: dict[str, list[CaseResult]] = {}
    for r in results:
        files.setdefault(r.file, []).append(r)
    path.write_text(json.dumps({
        "passed": p, "failed": f, "skipped": s, "elapsed_s": round(elapsed_s, 1),
        "retried": [{"id": r.id, "attempts": r.attempts, "status": r.status} for r in retried(results)],
        "files": {name: dict(zip(("passed", "failed", "skipped"), summarize(rs))) for name, rs in files.items()},
        "top_failures": [{"category": c, "tests": n} for c, n in top_failures(results)],
        "tests": [r.to_json() for r in results]}, indent=1), encoding="utf-8")


@functools.lru_cache(maxsize=8192)  # the report is rewritten after every case: categorise each reason once
def reason_category(reason: str) -> str:
    """A short key grouping failure reasons (for the top-N table): statement-specific names and
    numbers removed."""
    r = reason
    if r.startswith("only timestamps differ: records expected at timestamp 0"):
        return "output timestamp: expected 0, got the wall-clock time (sink writes timestamp 0 as 'now')"
    m = re.search(r"Not supported yet: ([A-Za-z_ '\-]+?)(?: \(|\(|:|$|\.)", r)
    if m:
        return f"Not supported yet: {m.group(1).strip()}"
    if r.startswith("expected exception message containing"):
        return "expected-exception test: rejected, but with a different message"
    if r.startswith("expected exception") and "statements were accepted" in r:
        return "expected-exception test: statements accepted (no error raised)"
    if r.startswith("Topic '") or r.startswith("output topic"):
        return "wrong output records (content differs)"
    if r.startswith("crash: "):
        return "crash: " + r.split(":")[1].strip() + " escaped the engine"
    if r.startswith("timeout"):
        return "timeout"
    r = re.sub(r"^statement \d+ rejected: ", "rejected: ", r)
    if "Can't find any functions with the name" in r:
        return "rejected: unknown function (Can't find any functions with the name ...)"
    if r.startswith("rejected: Unsupported expression"):
        return "rejected: Unsupported expression (e.g. ARRAY[...] constructor, IS [NOT] DISTINCT FROM)"
    r = re.sub(r"'[^']*'", "'…'", r)
    r = re.sub(r"`[^`]*`", "`…`", r)
    r = re.sub(r"\b\d+\b", "N", r)
    return r[:120]


def top_failures(results: Sequence[CaseResult], n: int = 10) -> list[tuple[str, int]]:
    """The ``n`` most common failure categories (:func:`reason_category`) with their counts."""
    from collections import Counter

    counts = Counter(reason_category(r.reason) for r in results if r.status == "failed")
    return counts.most_common(n)


def copy_case(case: QttCase, **changes: Any) -> QttCase:
    c = copy.deepcopy(case)
    for k, v in changes.items():
        setattr(c, k, v)
    return c
