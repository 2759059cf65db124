"""Text rendering of engine results, the way the ksql CLI shows them (boxed tables)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from streamsql.runtime import results as r


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(row[i]) for row in cells]) for i, h in enumerate(headers)]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    out = [line, "|" + "|".join(f" {h:<{w}} " for h, w in zip(headers, widths)) + "|", line]
    out += ["|" + "|".join(f" {c:<{w}} " for c, w in zip(row, widths)) + "|" for row in cells]
    out.append(line)
    return "\n".join(out)


def _cell(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, (dict, list)):
        return json.dumps(v, default=str, separators=(",", ":"))
    return str(v)


def row_line(columns: Sequence[tuple[str, str]], row: Sequence[Any]) -> str:
    return "|" + "|".join(f"{_cell(v)}" for v in row) + "|"


def render(result: r.Result) -> str:
    """Everything except row streams (which are printed as rows arrive)."""
    if isinstance(result, r.CommandStatus):
        return f" Message: {result.message}"
    if isinstance(result, r.Warning_):
        return f" Warning: {result.message}"
    if isinstance(result, r.Asserted):  # as ksqlDB's CLI prints it
        return f"{result.what} {'exists' if result.exists else 'does not exist'}."
    if isinstance(result, r.SourceList):
        noun = "Stream" if result.kind == "STREAMS" else "Table"
        return table([f"{noun} Name", "Kafka Topic", "Key Format", "Value Format", "Windowed"],
                     [[s.name, s.topic, s.key_format, s.value_format, str(s.windowed).lower()] for s in result.sources])
    if isinstance(result, r.TopicList):
        return table(["Kafka Topic", "Partitions", "Partition Replicas"],
                     [[tp.name, tp.partitions, tp.replicas] for tp in result.topics])
    if isinstance(result, r.QueryList):
        return table(["Query ID", "Query Type", "Status", "Sink Name", "Query String"],
                     [[q.id, q.kind, q.state, q.sink, q.statement] for q in result.queries])
    if isinstance(result, r.Properties):
        return table(["Property", "Value"], sorted(result.properties.items()))
    if isinstance(result, r.FunctionDescription):
        f = result.function
        lines = [f"Name        : {f.name}", f"Overview    : {f.description}", f"Type        : {f.kind}",
                 f"Category    : {f.category}", "Variations  :"]
        for v in result.variants:
            args = list(v.arguments)
            if v.variadic and args:
                args[-1] += "..."
            lines += ["", f"\tVariation   : {f.name}({', '.join(args)})", f"\tReturns     : {v.returns}"]
        return "\n".join(lines)
    if isinstance(result, r.FunctionList):
        return table(["Function Name", "Type", "Category"], [[f.name, f.kind, f.category] for f in result.functions])
    if isinstance(result, r.Explanation):
        return result.text
    if isinstance(result, r.ConnectorCreated):
        return f" Created connector {result.name}"
    if isinstance(result, r.ConnectorDropped):
        return f" Dropped connector \"{result.name}\""
    if isinstance(result, r.ConnectorList):
        return table(["Connector Name", "Type", "Class", "Status"],
                     [[c.name, c.kind, c.class_name, c.state] for c in result.connectors])
    if isinstance(result, r.ConnectorDescription):
        c = result.connector
        lines = [f"Name                 : {c.name}", f"Class                : {c.class_name}",
                 f"Type                 : {c.kind.lower()}", f"State                : {c.state}",
                 f"WorkerId             : {result.worker_id}"]
        if result.writes:
            lines.append(f"Writes               : {result.writes}")
        if result.trace:
            lines.append(f"Trace                : {result.trace}")
        lines += ["", table(["Related Topics"], [[t] for t in result.topics])]
        return "\n".join(lines)
    if isinstance(result, r.SourceDescription):
        s = result.source
        head = [f"Name                 : {s.name}", f"Type                 : {s.kind}",
                f"Timestamp field      : {result.timestamp_column or 'Not set - using <ROWTIME>'}",
                f"Key format           : {s.key_format}", f"Value format         : {s.value_format}",
                f"Kafka topic          : {s.topic} (partitions: {result.partitions})"]
        fields = table(["Field", "Type"], [[f.name, f.type + ("  (key)" if f.key else "")] for f in result.fields])
        tail = []
        if result.extended or result.read_queries or result.write_queries:
            tail = [f"Queries that read from this {s.kind}: {', '.join(result.read_queries) or '-'}",
                    f"Queries that write to this {s.kind}: {', '.join(result.write_queries) or '-'}"]
        if result.offset_summaries:  # ksqlDB's consumer groups summary
            tail += ["", "Consumer Groups summary:"]
            for o in result.offset_summaries:
                tail += ["", f"Consumer Group       : {o.group_id}", "", f"Kafka topic          : {o.topic}",
                         f"Max lag              : {max((p.lag for p in o.partitions), default=0)}", "",
                         table(["Partition", "Start Offset", "End Offset", "Offset", "Lag"],
                               [[str(p.partition), str(p.log_start), str(p.log_end), str(p.committed), str(p.lag)]
                                for p in o.partitions])]
        return "\n".join(head + [fields] + tail)
    return str(result)
