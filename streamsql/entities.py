"""The REST API model: engine results <-> ksqlDB REST entities (the JSON objects ``POST /ksql``
answers with), both directions, for every surface.

* :func:`to_entity`: a result as its entity, with ksqlDB's field names and ``@type`` tags so
  that existing ksqlDB clients parse them unchanged. The server renders with the statement and
  the live catalog (command ids, source descriptions with their queries); the shell's JSON
  output renders a result alone.
* :func:`result_from_entity`: an entity back to a result (the client, so the shell shows a
  remote server's answers as it shows the embedded engine's). It follows ksqlDB's documented
  shapes, so it also reads ksqlDB's own answers.

Row values are converted to JSON the way ksqlDB writes them (TIMESTAMP as
``yyyy-MM-ddTHH:mm:ss.SSS``, DATE ``yyyy-MM-dd``, DECIMAL as a plain number, BYTES as base64).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
import re
from collections.abc import Iterable
from typing import Any

from streamsql import types as t
from streamsql.catalog import Catalog, Source
from streamsql.runtime import results as r
from streamsql.sql import ast

#: statements that answer with no entity in ksqlDB (they only change the request's session)
SILENT = (ast.SetProperty, ast.UnsetProperty, ast.DefineVariable, ast.UndefineVariable, ast.InsertValues)


def command_id(stmt: ast.Statement) -> str | None:
    """ksqlDB's ``<type>/<entity>/<action>`` id of a distributed (command-topic) statement."""
    if isinstance(stmt, (ast.CreateSource, ast.CreateAsSelect)):
        return f"{stmt.kind.lower()}/`{stmt.name}`/create"
    if isinstance(stmt, ast.DropSource):
        return f"{stmt.kind.lower()}/`{stmt.name}`/drop"
    if isinstance(stmt, ast.AlterSource):
        return f"{stmt.kind.lower()}/`{stmt.name}`/alter"
    if isinstance(stmt, ast.InsertInto):
        return f"stream/`{stmt.target}`/create"
    if isinstance(stmt, ast.CreateType):
        return f"type/`{stmt.name}`/create"
    if isinstance(stmt, ast.DropType):
        return f"type/`{stmt.name}`/drop"
    if isinstance(stmt, ast.PauseQuery):
        return f"pause/{(stmt.query_id or 'ALL').upper()}/execute"
    if isinstance(stmt, ast.ResumeQuery):
        return f"resume/{(stmt.query_id or 'ALL').upper()}/execute"
    if isinstance(stmt, ast.Terminate):
        return f"terminate/{(stmt.query_id or 'ALL').upper()}/execute"
    return None


def connector_entity(result: r.Result, base: dict[str, Any]) -> dict[str, Any] | None:
    """ksqlDB's connector entities (Kafka Connect's ``ConnectorInfo`` / ``ConnectorStateInfo``
    inside), or None for other results. Connect writes connector types in lower case."""
    if isinstance(result, r.ConnectorCreated):
        return {"@type": "connector_info", **base, "info": {
            "name": result.name, "config": {**result.config, "name": result.name},
            "tasks": [{"connector": result.name, "task": 0}], "type": result.kind.lower()}, "warnings": []}
    if isinstance(result, r.ConnectorDropped):
        return {"@type": "drop_connector", **base, "connectorName": result.name, "warnings": []}
    if isinstance(result, r.ConnectorList):
        return {"@type": "connector_list", **base, "warnings": [], "connectors": [
            {"name": c.name, "type": c.kind.lower(), "className": c.class_name,
             "state": f"{c.state} ({1 if c.state == 'RUNNING' else 0}/1 tasks RUNNING)"} for c in result.connectors]}
    if isinstance(result, r.ConnectorDescription):
        c = result.connector
        state: dict[str, Any] = {"state": c.state, "worker_id": result.worker_id}
        if result.trace:
            state["trace"] = result.trace
        return {"@type": "connector_description", **base, "connectorClass": c.class_name,
                "status": {"name": c.name, "connector": state, "tasks": [{"id": 0, **state}], "type": c.kind.lower()},
                "sources": [], "topics": list(result.topics), "warnings": []}
    return None


def _statement_text(stmt: ast.Statement | None, result: r.Result) -> str:
    if stmt is None:
        return result.statement
    text = (result.statement or stmt.text).strip()
    return text if text.endswith(";") else text + ";"


def to_entity(result: r.Result, stmt: ast.Statement | None = None, catalog: Catalog | None = None,
              seq: int | None = None) -> dict[str, Any] | None:
    """The entity of one executed statement's result, or None for statements ksqlDB answers
    silently. ``stmt``, ``catalog`` and ``seq`` are the server's: the command id and sequence
    number, and descriptions read from the catalog (a source's queries, column roles, SHOW
    TYPES); without them the entity is rendered from the result alone."""
    if isinstance(stmt, SILENT):
        return None
    base: dict[str, Any] = {"statementText": _statement_text(stmt, result)}
    if isinstance(result, r.Warning_):
        return {"@type": "warning_entity", **base, "message": result.message, "warnings": []}
    connector = connector_entity(result, base)
    if connector is not None:
        return connector
    if isinstance(result, r.Asserted):
        if result.kind == "TOPIC":
            return {"@type": "assert_topic", **base, "topicName": result.topic, "exists": result.exists,
                    "warnings": []}
        return {"@type": "assert_schema", **base, "subject": result.subject, "id": result.schema_id,
                "exists": result.exists, "warnings": []}
    if isinstance(result, r.CommandStatus):
        status: dict[str, Any] = {"status": "SUCCESS", "message": result.message}
        if result.query_id:
            status["queryId"] = result.query_id
        seq = seq if seq is not None else result.command_seq
        return {"@type": "currentStatus", **base, "commandId": (command_id(stmt) if stmt else None) or "",
                "commandStatus": status, "commandSequenceNumber": seq if seq is not None else -1, "warnings": []}
    if isinstance(result, r.SourceList):
        extended = isinstance(stmt, ast.Describe) or (isinstance(stmt, ast.Show) and stmt.extended)
        if extended and catalog is not None:
            descs = [source_description(catalog.get(s.name), catalog, True) for s in result.sources]
            return {"@type": "source_descriptions", **base, "sourceDescriptions": descs, "warnings": []}
        kind = result.kind.lower()
        return {"@type": kind, **base, kind: [_source_summary(s) for s in result.sources], "warnings": []}
    if isinstance(result, r.QueryList):
        if isinstance(stmt, ast.Show) and stmt.extended:
            return {"@type": "query_descriptions", **base,
                    "queryDescriptions": [query_description(q, catalog) for q in result.queries], "warnings": []}
        return {"@type": "queries", **base, "queries": [running_query(q, catalog) for q in result.queries],
                "warnings": []}
    if isinstance(result, r.TopicList):
        return {"@type": "kafka_topics", **base,
                "topics": [{"name": tp.name, "replicaInfo": [tp.replicas] * tp.partitions} for tp in result.topics],
                "warnings": []}
    if isinstance(result, r.SourceDescription):
        source = catalog.find(result.source.name) if catalog is not None else None
        desc = (source_description(source, catalog, result.extended, result.offset_summaries)
                if source is not None and catalog is not None else _result_description(result))
        return {"@type": "sourceDescription", **base, "sourceDescription": desc, "warnings": []}
    if isinstance(result, r.Properties):
        if result.listing == "VARIABLES":
            return {"@type": "variables", **base,
                    "variables": [{"name": k, "value": v} for k, v in sorted(result.properties.items())],
                    "warnings": []}
        if result.listing == "TYPES" and catalog is not None:
            return {"@type": "type_list", **base,
                    "types": {name: schema_info(catalog.types[name]) for name in sorted(catalog.types)},
                    "warnings": []}
        return {"@type": "properties", **base,
                "properties": [{"name": k, "scope": _scope(k), "value": v, "editable": True,
                                "level": "SESSION" if k in result.overridden else "SERVER"}
                               for k, v in sorted(result.properties.items())],
                "overwrittenProperties": sorted(result.overridden), "defaultProperties": [], "warnings": []}
    if isinstance(result, r.FunctionDescription):
        f = result.function
        return {"@type": "describe_function", **base, "name": f.name, "description": f.description,
                "author": "streamsql", "version": "", "path": "internal", "type": f.kind.upper(),
                "functions": [{"arguments": [{"name": "", "type": arg, "description": "",
                                              "isVariadic": v.variadic and i == len(v.arguments) - 1}
                                             for i, arg in enumerate(v.arguments)],
                               "argumentTypes": list(v.arguments), "returnType": v.returns, "description": ""}
                              for v in result.variants],
                "warnings": []}
    if isinstance(result, r.FunctionList):
        # ksqlDB's FunctionType is a Java enum: SCALAR, AGGREGATE, TABLE
        if isinstance(stmt, ast.Describe) and stmt.function and result.functions:
            f = result.functions[0]
            return {"@type": "describe_function", **base, "name": f.name, "description": f.description,
                    "author": "streamsql", "version": "", "path": "internal", "type": f.kind.upper(),
                    "functions": [], "warnings": []}
        return {"@type": "function_names", **base,
                "functions": [{"name": f.name, "type": f.kind.upper(), "category": f.category}
                              for f in result.functions], "warnings": []}
    if isinstance(result, r.Explanation):
        query_id = getattr(stmt, "query_id", None) or ""
        return {"@type": "queryDescription", **base,
                "queryDescription": _query_description_fields(query_id.upper(), base["statementText"],
                                                              execution_plan=result.text),
                "warnings": []}
    return {"@type": "currentStatus", **base, "commandId": "", "warnings": [],
            "commandStatus": {"status": "SUCCESS", "message": str(result)}, "commandSequenceNumber": -1}


def _result_description(result: r.SourceDescription) -> dict[str, Any]:
    """A ``sourceDescription`` from the result alone (no catalog at hand)."""
    s = result.source
    return {"name": s.name, "windowType": None, "readQueries": [{"id": q} for q in result.read_queries],
            "writeQueries": [{"id": q} for q in result.write_queries],
            "fields": [{"name": f.name, "schema": {"type": f.type}, **({"type": "KEY"} if f.key else {})}
                       for f in result.fields],
            "type": s.kind.upper(), "timestamp": result.timestamp_column or "", "statistics": "",
            "errorStats": "", "extended": result.extended, "keyFormat": s.key_format,
            "valueFormat": s.value_format, "topic": s.topic, "partitions": result.partitions, "replication": 1,
            "statement": result.statement_text,
            "queryOffsetSummaries": [offset_summary(o) for o in result.offset_summaries]}


def _scope(name: str) -> str:
    return "KSQL" if name.startswith("ksql.") else "STREAMS"


def _source_summary(s: r.SourceInfo) -> dict[str, Any]:
    return {"type": s.kind.upper(), "name": s.name, "topic": s.topic, "keyFormat": s.key_format,
            "valueFormat": s.value_format, "isWindowed": s.windowed}


def running_query(q: r.QueryDescription, catalog: Catalog | None) -> dict[str, Any]:
    """ksqlDB's ``RunningQuery``; without a catalog (the shell's JSON output) the sink's topic is
    unknown and the query's sources are given instead."""
    if catalog is None:
        return {"queryString": q.statement, "sinks": [q.sink] if q.sink else [], "sinkKafkaTopics": [],
                "id": q.id, "statusCount": {q.state: 1}, "queryType": q.kind, "state": q.state,
                "sources": q.sources}
    sink = catalog.find(q.sink) if q.sink else None
    return {"queryString": q.statement, "sinks": [q.sink] if q.sink else [],
            "sinkKafkaTopics": [sink.topic] if sink else [],
            "id": q.id, "statusCount": {q.state: 1}, "queryType": q.kind, "state": q.state}


def _query_description_fields(query_id: str, statement: str, *, window_type: str | None = None,
                               fields: list[dict[str, Any]] | None = None, sources: list[str] | None = None,
                               sinks: list[str] | None = None, execution_plan: str = "",
                               query_type: str = "PERSISTENT", state: str = "RUNNING",
                               errors: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """ksqlDB's ``QueryDescription`` (EXPLAIN's ``queryDescription`` and each of SHOW QUERIES
    EXTENDED's ``queryDescriptions``): every field ksqlDB writes, so its clients parse it."""
    return {"id": query_id, "statementText": statement, "windowType": window_type, "fields": fields or [],
            "sources": sources or [], "sinks": sinks or [], "topology": "", "executionPlan": execution_plan,
            "overriddenProperties": {}, "ksqlHostQueryStatus": {}, "queryType": query_type,
            "queryErrors": errors or [], "tasksMetadata": [], "state": state}


def query_description(q: r.QueryDescription, catalog: Catalog | None) -> dict[str, Any]:
    """One query of SHOW QUERIES EXTENDED as ksqlDB's ``QueryDescription``: the sink's columns
    and window type from the catalog (when at hand), a failed query's error as a ``QueryError``."""
    sink = catalog.find(q.sink) if catalog is not None and q.sink else None
    error = q.stats.get("error")
    return _query_description_fields(
        q.id, q.statement, window_type=sink.window_type if sink else None,
        fields=[field_info(c) for c in sink.columns] if sink else [], sources=list(q.sources),
        sinks=[q.sink] if q.sink else [], query_type=q.kind, state=q.state,
        # ksqlDB's QueryError; the engine keeps no time of failure, so its timestamp is 0
        errors=[{"timestamp": 0, "errorMessage": str(error), "type": "UNKNOWN"}] if error else [])


def schema_info(ty: t.SqlType) -> dict[str, Any]:
    """ksqlDB's ``SchemaInfo`` of a SQL type."""
    info: dict[str, Any] = {"type": ty.kind.value, "fields": None, "memberSchema": None}
    if isinstance(ty, t.Struct):
        info["fields"] = [{"name": f.name, "schema": schema_info(f.type)} for f in ty.fields]
    elif isinstance(ty, t.Array):
        info["memberSchema"] = schema_info(ty.element)
    elif isinstance(ty, t.Map):
        info["memberSchema"] = schema_info(ty.value)
    elif isinstance(ty, t.Decimal):
        info["parameters"] = {"precision": ty.precision, "scale": ty.scale}
    return info


def field_info(c: t.Column) -> dict[str, Any]:
    out: dict[str, Any] = {"name": c.name, "schema": schema_info(c.type)}
    if c.role == "key":
        out["type"] = "KEY"
    elif c.role in ("header", "headers"):
        out["type"] = "HEADER"
        if c.header_key:
            out["headerKey"] = c.header_key
    return out


def offset_summary(o: r.OffsetSummary) -> dict[str, Any]:
    """ksqlDB's ``QueryOffsetSummary`` (DESCRIBE … EXTENDED's consumer lag)."""
    return {"groupId": o.group_id, "topicSummaries": [{"kafkaTopic": o.topic, "offsets": [
        {"partition": p.partition, "logStartOffset": p.log_start, "logEndOffset": p.log_end,
         "consumerOffset": p.committed} for p in o.partitions]}]}


def source_description(source: Source, catalog: Catalog, extended: bool,
                       offsets: list[r.OffsetSummary] | None = None) -> dict[str, Any]:
    fields = [{"name": t.ROWTIME, "schema": schema_info(t.BIGINT)}] if extended else []
    fields += [field_info(c) for c in source.columns]
    readers = [q for q in catalog.queries.values() if source.name in q.sources]
    writers = [q for q in catalog.queries.values() if q.sink == source.name]

    def rq(info: Any) -> dict[str, Any]:
        return {"queryString": info.statement, "sinks": [info.sink], "sinkKafkaTopics": [source.topic]
                if info.sink == source.name else [], "id": info.id, "statusCount": {"RUNNING": 1},
                "queryType": "PERSISTENT", "state": "RUNNING"}

    return {"name": source.name, "windowType": source.window_type, "readQueries": [rq(q) for q in readers],
            "writeQueries": [rq(q) for q in writers], "fields": fields, "type": source.kind,
            "timestamp": source.timestamp_column or "", "statistics": "", "errorStats": "", "extended": extended,
            "keyFormat": source.key_format, "valueFormat": source.value_format, "topic": source.topic,
            "partitions": source.partitions, "replication": 1, "statement": source.statement,
            "queryOffsetSummaries": [offset_summary(o) for o in offsets or []], "sourceConstraints": [],
            "clusterStatistics": [], "clusterErrorStats": []}


# --- entities -> results ---------------------------------------------------------------------


def schema_to_sql(schema: dict[str, Any] | None) -> str:
    """ksqlDB's ``SchemaInfo`` (``{"type", "fields"?, "memberSchema"?, "parameters"?}``) as SQL
    type text, e.g. ``STRUCT<A INTEGER, B ARRAY<STRING>>``."""
    if not schema:
        return "UNKNOWN"
    kind = str(schema.get("type", "UNKNOWN"))
    if kind == "STRUCT" and schema.get("fields") is not None:
        return "STRUCT<" + ", ".join(f"{f['name']} {schema_to_sql(f.get('schema'))}" for f in schema["fields"]) + ">"
    if kind == "ARRAY" and schema.get("memberSchema"):
        return f"ARRAY<{schema_to_sql(schema['memberSchema'])}>"
    if kind == "MAP" and schema.get("memberSchema"):
        return f"MAP<STRING, {schema_to_sql(schema['memberSchema'])}>"
    if kind == "DECIMAL" and schema.get("parameters"):
        p = schema["parameters"]
        return f"DECIMAL({p.get('precision')}, {p.get('scale')})"
    return kind


def _source_info(d: dict[str, Any], kind: str | None = None) -> r.SourceInfo:
    return r.SourceInfo(name=d.get("name", ""), kind=(d.get("type") or kind or "STREAM").upper(),
                        topic=d.get("topic", ""), key_format=d.get("keyFormat", ""),
                        value_format=d.get("valueFormat", ""),
                        windowed=bool(d.get("isWindowed", d.get("windowType") is not None)))


def _running_query(q: dict[str, Any]) -> r.QueryDescription:
    sinks = q.get("sinks") or []
    return r.QueryDescription(id=q.get("id", ""), statement=q.get("queryString", ""), sink=sinks[0] if sinks else "",
                              sources=list(q.get("sources") or []),
                              state=q.get("state") or _state(q.get("statusCount")),
                              kind=q.get("queryType", "PERSISTENT"))


def _state(status_count: dict[str, int] | None) -> str:
    return next(iter(status_count), "UNKNOWN") if status_count else "UNKNOWN"


def _query_ids(queries: Iterable[Any] | None) -> list[str]:
    return [q.get("id", "") if isinstance(q, dict) else str(q) for q in queries or []]


def _properties(entity: dict[str, Any]) -> r.Properties:
    raw = entity.get("properties") or []
    values = {p["name"]: str(p.get("value")) for p in raw} if isinstance(raw, list) else {
        k: str(v) for k, v in raw.items()}
    over = entity.get("overwrittenProperties") or []
    overridden = {name: values.get(name, "") for name in (over if isinstance(over, list) else over.keys())}
    return r.Properties(entity.get("statementText", ""), values, overridden)


def _offset_summaries(summaries: Any) -> list[r.OffsetSummary]:
    out = []
    for summary in summaries or []:
        for topic in summary.get("topicSummaries") or []:
            out.append(r.OffsetSummary(str(summary.get("groupId", "")), str(topic.get("kafkaTopic", "")), [
                r.PartitionOffsets(int(o.get("partition", 0)), int(o.get("logStartOffset", 0)),
                                   int(o.get("logEndOffset", 0)), int(o.get("consumerOffset", 0)))
                for o in topic.get("offsets") or []]))
    return out


def _describe_query(entity: dict[str, Any]) -> r.Explanation:
    d = entity.get("queryDescription") or {}
    lines = []
    if d.get("id"):
        qid = d["id"]["id"] if isinstance(d["id"], dict) else d["id"]
        lines.append(f"ID                   : {qid}")
    if d.get("queryType"):
        lines.append(f"Query Type           : {d['queryType']}")
    if d.get("statementText"):
        lines.append(f"SQL                  : {d['statementText']}")
    if d.get("state"):
        lines.append(f"Status               : {d['state']}")
    for title, key in (("Execution plan", "executionPlan"), ("Processing topology", "topology")):
        if d.get(key):
            lines += ["", title, "-" * len(title), d[key]]
    return r.Explanation(entity.get("statementText", ""), "\n".join(lines).strip("\n"))


def result_from_entity(entity: dict[str, Any]) -> r.Result:
    """One ksqlDB ``/ksql`` response entity as a result. Unknown entity types come back as an
    :class:`~streamsql.runtime.results.Explanation` holding the entity's JSON, so nothing the
    server said is lost."""
    kind = entity.get("@type")
    text = entity.get("statementText", "")
    if kind == "currentStatus":
        status = entity.get("commandStatus") or {}
        seq = entity.get("commandSequenceNumber")
        return r.CommandStatus(text, status.get("message", ""), seq if seq is not None and seq >= 0 else None,
                               status.get("queryId"))
    if kind == "warning_entity":
        return r.Warning_(text, entity.get("message", ""))
    if kind == "assert_topic":
        return r.Asserted(text, "TOPIC", f"Topic {entity.get('topicName')}", bool(entity.get("exists")),
                          topic=entity.get("topicName"))
    if kind == "assert_schema":
        subject, schema_id = entity.get("subject"), entity.get("id")
        shown = ((f" subject {subject}" if subject is not None else "")
                 + (f" id {schema_id}" if schema_id is not None else ""))
        return r.Asserted(text, "SCHEMA", f"Schema with{shown}", bool(entity.get("exists")), subject=subject,
                          schema_id=schema_id)
    if kind in ("streams", "tables"):
        noun = kind[:-1].upper()
        return r.SourceList(text, kind.upper(), [_source_info(s, noun) for s in entity.get(kind) or []])
    if kind == "source_descriptions":
        described = entity.get("sourceDescriptions") or []
        noun = "TABLES" if any(str(d.get("type")).upper() == "TABLE" for d in described) else "STREAMS"
        return r.SourceList(text, noun, [_source_info(d) for d in described])
    if kind == "sourceDescription":
        d = entity.get("sourceDescription") or {}
        fields = [r.FieldInfo(f.get("name", ""), schema_to_sql(f.get("schema")), f.get("type") == "KEY")
                  for f in d.get("fields") or []]
        return r.SourceDescription(
            text, _source_info(d), fields, int(d.get("partitions") or 0), d.get("timestamp") or None,
            d.get("statement", ""), _query_ids(d.get("readQueries")), _query_ids(d.get("writeQueries")),
            bool(d.get("extended", False)), _offset_summaries(d.get("queryOffsetSummaries")))
    if kind == "queries":
        return r.QueryList(text, [_running_query(q) for q in entity.get("queries") or []])
    if kind == "query_descriptions":
        return r.QueryList(text, [r.QueryDescription(id=str(q.get("id", "")), statement=q.get("statementText", ""),
                                                     sink=(q.get("sinks") or [""])[0], sources=q.get("sources") or [],
                                                     state=q.get("state", "UNKNOWN"),
                                                     kind=q.get("queryType", "PERSISTENT"))
                                  for q in entity.get("queryDescriptions") or []])
    if kind == "queryDescription":
        return _describe_query(entity)
    if kind in ("kafka_topics", "kafka_topics_extended"):
        topics = []
        for t in entity.get("topics") or []:
            replicas = t.get("replicaInfo") or []
            topics.append(r.TopicInfo(t.get("name", ""), len(replicas), max(replicas) if replicas else 1))
        return r.TopicList(text, topics)
    if kind == "properties":
        return _properties(entity)
    if kind == "variables":
        return r.Properties(text, {v["name"]: str(v.get("value")) for v in entity.get("variables") or []}, {})
    if kind == "type_list":
        return r.Properties(text, {name: schema_to_sql(s) for name, s in (entity.get("types") or {}).items()}, {})
    if kind == "function_names":
        return r.FunctionList(text, [r.FunctionInfo(f.get("name", ""), str(f.get("type", "SCALAR")).upper(),
                                                    f.get("category", ""))
                                     for f in entity.get("functions") or []])
    if kind == "describe_function":
        info = r.FunctionInfo(entity.get("name", ""), str(entity.get("type", "SCALAR")).upper(),
                              entity.get("category", ""), entity.get("description", ""))
        variants = [r.FunctionVariant([str(a.get("type", "")) for a in v.get("arguments") or []],
                                      str(v.get("returnType", "")),
                                      any(a.get("isVariadic") for a in v.get("arguments") or []))
                    for v in entity.get("functions") or []]
        return r.FunctionDescription(text, info, variants)
    if kind == "terminate_query":
        return r.CommandStatus(text, "Query terminated." if entity.get("wasTerminated", True)
                               else f"Query {entity.get('queryId')} was not running.")
    if kind in ("connector_info", "drop_connector", "connector_list", "connector_description"):
        return _connector_result(kind, text, entity)
    return r.Explanation(text, json.dumps(entity, indent=2))


def _connector_result(kind: str, text: str, entity: dict[str, Any]) -> r.Result:
    if kind == "connector_info":
        info = entity.get("info") or {}
        return r.ConnectorCreated(text, info.get("name", ""), str(info.get("type", "sink")).upper(),
                                  dict(info.get("config") or {}))
    if kind == "drop_connector":
        return r.ConnectorDropped(text, entity.get("connectorName", ""))
    if kind == "connector_list":
        return r.ConnectorList(text, [r.ConnectorSummary(c.get("name", ""), str(c.get("type", "")).upper(),
                                                         c.get("className", ""), str(c.get("state", "")).split(" ")[0])
                                      for c in entity.get("connectors") or []])
    status = entity.get("status") or {}
    state = status.get("connector") or {}
    summary = r.ConnectorSummary(status.get("name", ""), str(status.get("type", "")).upper(),
                                 entity.get("connectorClass", ""), state.get("state", ""))
    return r.ConnectorDescription(text, summary, list(entity.get("topics") or []), state.get("worker_id", ""),
                                  state.get("trace"))


# --- rows --------------------------------------------------------------------------------------


def non_finite_text(v: float) -> str:
    """NaN and the infinities as ksqlDB writes them in JSON: Jackson's default
    (``QUOTE_NON_NUMERIC_NUMBERS``) quotes them, ``"NaN"``, ``"Infinity"``, ``"-Infinity"``, so the
    output stays valid JSON for strict parsers (a bare ``NaN`` token is not JSON)."""
    return "NaN" if math.isnan(v) else "Infinity" if v > 0 else "-Infinity"


def strict_json(v: Any) -> Any:
    """``v`` with every NaN/±Infinity float replaced by its text (:func:`non_finite_text`),
    everything else unchanged: for JSON writers that keep their own rendering of other values."""
    if isinstance(v, float) and not math.isfinite(v):
        return non_finite_text(v)
    if isinstance(v, dict):
        return {k: strict_json(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [strict_json(x) for x in v]
    return v


def json_value(v: Any) -> Any:
    """A row value as ksqlDB puts it in JSON."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else non_finite_text(v)
    if isinstance(v, decimal.Decimal):
        # the exponent is a letter only for NaN and infinities, which Spark's decimals cannot hold
        integral = v == v.to_integral_value() and isinstance(e := v.as_tuple().exponent, int) and e >= 0
        return int(v) if integral else float(v)
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.UTC).replace(tzinfo=None)
        return v.strftime("%Y-%m-%dT%H:%M:%S.") + f"{v.microsecond // 1000:03d}"
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, dt.time):
        return v.strftime("%H:%M:%S")
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(bytes(v)).decode()
    if isinstance(v, dict):
        return {str(k): json_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [json_value(x) for x in v]
    return str(v)


def header_schema(columns: list[tuple[str, str]], keys: set[str]) -> str:
    """``/query`` header schema: `` `NAME` TYPE[ KEY], ...`` (keys marked for pull queries only)."""
    return ", ".join(f"`{name}` {ty}{' KEY' if name in keys else ''}" for name, ty in columns)


def plain_type(ty: str) -> str:
    """``/query-stream`` columnTypes carry no back-ticks: ``STRUCT<F1 STRING>``."""
    return re.sub(r"`([^`]*)`", r"\1", ty)
