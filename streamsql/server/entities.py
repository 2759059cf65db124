"""Engine results -> ksqlDB REST entities (the JSON objects ``POST /ksql`` answers with).

The engine's typed results (``runtime/results.py``) are rendered here and nowhere else, with
ksqlDB's field names and ``@type`` tags so that existing ksqlDB clients parse them unchanged.
Row values are converted to JSON the way ksqlDB writes them (TIMESTAMP as
``yyyy-MM-ddTHH:mm:ss.SSS``, DATE ``yyyy-MM-dd``, DECIMAL as a plain number, BYTES as base64).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import re
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
    if isinstance(stmt, ast.InsertInto):
        return f"stream/`{stmt.target}`/create"
    if isinstance(stmt, ast.CreateType):
        return f"type/`{stmt.name}`/create"
    if isinstance(stmt, ast.DropType):
        return f"type/`{stmt.name}`/drop"
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


def _statement_text(stmt: ast.Statement, result: r.Result) -> str:
    text = (result.statement or stmt.text).strip()
    return text if text.endswith(";") else text + ";"


def to_entity(stmt: ast.Statement, result: r.Result, catalog: Catalog, seq: int | None) -> dict[str, Any] | None:
    """The entity for one executed statement, or None for statements ksqlDB answers silently."""
    if isinstance(stmt, SILENT):
        return None
    base: dict[str, Any] = {"statementText": _statement_text(stmt, result)}
    if isinstance(result, r.Warning_):
        return {"@type": "warning_entity", **base, "message": result.message, "warnings": []}
    connector = connector_entity(result, base)
    if connector is not None:
        return connector
    if isinstance(result, r.CommandStatus):
        status: dict[str, Any] = {"status": "SUCCESS", "message": result.message}
        if result.query_id:
            status["queryId"] = result.query_id
        return {"@type": "currentStatus", **base, "commandId": command_id(stmt) or "",
                "commandStatus": status, "commandSequenceNumber": seq if seq is not None else -1, "warnings": []}
    if isinstance(result, r.SourceList):
        if isinstance(stmt, ast.Describe) or (isinstance(stmt, ast.Show) and stmt.extended):
            descs = [source_description(catalog.get(s.name), catalog, True) for s in result.sources]
            return {"@type": "source_descriptions", **base, "sourceDescriptions": descs, "warnings": []}
        kind = result.kind.lower()
        return {"@type": kind, **base, kind: [_source_summary(s) for s in result.sources], "warnings": []}
    if isinstance(result, r.QueryList):
        return {"@type": "queries", **base, "queries": [running_query(q, catalog) for q in result.queries],
                "warnings": []}
    if isinstance(result, r.TopicList):
        return {"@type": "kafka_topics", **base,
                "topics": [{"name": tp.name, "replicaInfo": [tp.replicas] * tp.partitions} for tp in result.topics],
                "warnings": []}
    if isinstance(result, r.SourceDescription):
        source = catalog.find(result.source.name)
        desc = (source_description(source, catalog, result.extended, result.offset_summaries)
                if source is not None else {})
        return {"@type": "sourceDescription", **base, "sourceDescription": desc, "warnings": []}
    if isinstance(result, r.Properties):
        if isinstance(stmt, ast.Show) and stmt.what.upper() == "VARIABLES":
            return {"@type": "variables", **base,
                    "variables": [{"name": k, "value": v} for k, v in sorted(result.properties.items())],
                    "warnings": []}
        if isinstance(stmt, ast.Show) and stmt.what.upper() == "TYPES":
            return {"@type": "type_list", **base,
                    "types": {name: schema_info(catalog.types[name]) for name in sorted(catalog.types)},
                    "warnings": []}
        return {"@type": "properties", **base,
                "properties": [{"name": k, "scope": _scope(k), "value": v, "editable": True,
                                "level": "SESSION" if k in result.overridden else "SERVER"}
                               for k, v in sorted(result.properties.items())],
                "overwrittenProperties": sorted(result.overridden), "defaultProperties": [], "warnings": []}
    if isinstance(result, r.FunctionList):
        if isinstance(stmt, ast.Describe) and stmt.function and result.functions:
            f = result.functions[0]
            return {"@type": "describe_function", **base, "name": f.name, "description": f.description,
                    "author": "streamsql", "version": "", "path": "internal", "type": f.kind.lower(),
                    "functions": [], "warnings": []}
        return {"@type": "function_names", **base,
                "functions": [{"name": f.name, "type": f.kind.lower(), "category": f.category}
                              for f in result.functions], "warnings": []}
    if isinstance(result, r.Explanation):
        query_id = getattr(stmt, "query_id", None) or ""
        return {"@type": "queryDescription", **base,
                "queryDescription": {"id": query_id.upper(), "statementText": base["statementText"],
                                     "windowType": None, "fields": [], "sources": [], "sinks": [],
                                     "topology": "", "executionPlan": result.text, "overriddenProperties": {},
                                     "ksqlHostQueryStatus": {}, "queryType": "PERSISTENT", "queryErrors": [],
                                     "tasksMetadata": [], "state": "RUNNING"},
                "warnings": []}
    return {"@type": "currentStatus", **base, "commandId": "", "warnings": [],
            "commandStatus": {"status": "SUCCESS", "message": str(result)}, "commandSequenceNumber": -1}


def _scope(name: str) -> str:
    return "KSQL" if name.startswith("ksql.") else "STREAMS"


def _source_summary(s: r.SourceInfo) -> dict[str, Any]:
    return {"type": s.kind, "name": s.name, "topic": s.topic, "keyFormat": s.key_format,
            "valueFormat": s.value_format, "isWindowed": s.windowed}


def running_query(q: r.QueryDescription, catalog: Catalog) -> dict[str, Any]:
    sink = catalog.find(q.sink)
    return {"queryString": q.statement, "sinks": [q.sink], "sinkKafkaTopics": [sink.topic] if sink else [],
            "id": q.id, "statusCount": {q.state: 1}, "queryType": q.kind, "state": q.state}


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


# --- rows --------------------------------------------------------------------------------------


def json_value(v: Any) -> Any:
    """A row value as ksqlDB puts it in JSON."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v
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
