"""A case's topics: the per-case prefix that isolates concurrent cases, the topics to create
(with their partition counts) and the Schema Registry subjects to register before the
statements run.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from streamsql.conformance.cases import QttCase
from streamsql.errors import StreamsqlError
from streamsql.formats import schema_registry
from streamsql.formats.features import features
from streamsql.sql import split_statements

_TOPIC_PROP = re.compile(r"(KAFKA_TOPIC\s*=\s*)'((?:[^']|'')*)'", re.IGNORECASE)


def rewrite_statement(stmt: str, prefix: str) -> str:
    """``KAFKA_TOPIC='x'`` → ``KAFKA_TOPIC='<prefix>x'``."""
    return _TOPIC_PROP.sub(lambda m: f"{m.group(1)}'{prefix}{m.group(2)}'", stmt)


def statement_topics(stmt: str) -> list[str]:
    return [m.group(2).replace("''", "'") for m in _TOPIC_PROP.finditer(stmt)]


_CREATE_SOURCE = re.compile(r"^\s*CREATE\s+(?:OR\s+REPLACE\s+)?(?:SOURCE\s+)?(STREAM|TABLE)\b", re.IGNORECASE)
_AS_SELECT = re.compile(r"\bAS\s+SELECT\b", re.IGNORECASE)
_PARTITIONS = re.compile(r"\bPARTITIONS\s*=\s*'?(\d+)", re.IGNORECASE)


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
            # a schema's text is read as its format's (PROTOBUF_NOSR's as Protobuf), else as Avro
            schema_type = features(fmt).schema_type or ("PROTOBUF" if features(fmt).protobuf else "AVRO")
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
            schema_type = features(fmt).schema_type
            if schema_type is None or not cols:
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
            out.append((schema_registry.subject_for(topic, is_key), schema, schema_type))
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
