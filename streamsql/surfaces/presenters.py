"""What each kind of result shows as text, once for every text surface: the CLI renderer
(``surfaces/render.py``: boxed tables, for ``streamsql run`` and scripts) and the interactive
shell (``surfaces/console.py``: the ksql CLI's underlined tables). A presenter says *what* is
shown — a message, lines, tables with their headers and rows — and each surface only lays it
out. (The REST entities, ``entities.py``, are ksqlDB's JSON shapes, which the shell's JSON
output mode prints as they are; they share with these presenters which listing a result is:
``Properties.listing``.)

Results without a presenter here are laid out by the surface itself (a source's DESCRIBE,
whose layouts differ: the shell's is the ksql CLI's) or shown as ``str``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from streamsql.runtime import results as r


@dataclass(frozen=True)
class Table:
    headers: Sequence[str]
    rows: Sequence[Sequence[Any]]
    #: the line the ksql CLI prints under the table (the shell shows it)
    hint: str | None = None


@dataclass(frozen=True)
class Message:
    """A statement's one-line outcome: ``label`` is "Message" or "Warning"."""

    text: str
    label: str = "Message"


#: a result's presentation, top to bottom: text lines, messages and tables
Block = str | Message | Table


@dataclass(frozen=True)
class Presentation:
    blocks: list[Block] = field(default_factory=list)


def cell_text(v: Any) -> str:
    """A value in a table cell or a row: null, booleans lower-case (as ksqlDB prints them),
    structures as compact JSON."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, (dict, list)):
        return json.dumps(v, default=str, separators=(",", ":"))
    return str(v)


def present(result: r.Result) -> Presentation | None:
    """The presentation of ``result``, or None when the surface lays it out itself."""
    presenter = _PRESENTERS.get(type(result))
    return None if presenter is None else Presentation(presenter(result))


def _status(result: r.CommandStatus) -> list[Block]:
    return [Message(result.message)]


def _warning(result: r.Warning_) -> list[Block]:
    return [Message(result.message, "Warning")]


def _asserted(result: r.Asserted) -> list[Block]:  # as ksqlDB's CLI prints it
    return [f"{result.what} {'exists' if result.exists else 'does not exist'}."]


def _sources(result: r.SourceList) -> list[Block]:
    noun = "Stream" if result.kind == "STREAMS" else "Table"
    return [Table([f"{noun} Name", "Kafka Topic", "Key Format", "Value Format", "Windowed"],
                  [[s.name, s.topic, s.key_format, s.value_format, s.windowed] for s in result.sources])]


def _topics(result: r.TopicList) -> list[Block]:
    return [Table(["Kafka Topic", "Partitions", "Partition Replicas"],
                  [[tp.name, tp.partitions, tp.replicas] for tp in result.topics])]


def _queries(result: r.QueryList) -> list[Block]:
    return [Table(["Query ID", "Query Type", "Status", "Sink Name", "Query String"],
                  [[q.id, q.kind, q.state, q.sink, " ".join(q.statement.split())] for q in result.queries],
                  hint="For detailed information on a Query run: EXPLAIN <Query ID>;")]


def _properties(result: r.Properties) -> list[Block]:
    items = sorted(result.properties.items())
    if result.listing == "VARIABLES":
        return [Table(["Variable Name", "Value"], items)]
    if result.listing == "TYPES":
        return [Table(["Type Name", "Schema"], items)]
    return [Table(["Property", "Default override", "Effective Value"],
                  [[k, "SESSION" if k in result.overridden else "", v] for k, v in items])]


def _functions(result: r.FunctionList) -> list[Block]:
    return [Table(["Function Name", "Category"], [[f.name, f.category] for f in result.functions],
                  hint="For detailed information on a function run: DESCRIBE FUNCTION <Function Name>;")]


def _function(result: r.FunctionDescription) -> list[Block]:
    f = result.function
    lines: list[Block] = [f"Name        : {f.name}", f"Overview    : {f.description}", f"Type        : {f.kind}",
                          f"Category    : {f.category}", "Variations  :"]
    for v in result.variants:
        args = list(v.arguments)
        if v.variadic and args:
            args[-1] += "..."
        lines += ["", f"\tVariation   : {f.name}({', '.join(args)})", f"\tReturns     : {v.returns}"]
    return lines


def _explanation(result: r.Explanation) -> list[Block]:
    return [result.text]


def _connector_created(result: r.ConnectorCreated) -> list[Block]:
    return [Message(f"Created connector {result.name}")]


def _connector_dropped(result: r.ConnectorDropped) -> list[Block]:
    return [Message(f"Dropped connector \"{result.name}\"")]


def _connectors(result: r.ConnectorList) -> list[Block]:
    return [Table(["Connector Name", "Type", "Class", "Status"],
                  [[c.name, c.kind, c.class_name, c.state] for c in result.connectors])]


def _connector(result: r.ConnectorDescription) -> list[Block]:
    c = result.connector
    lines: list[Block] = [f"Name                 : {c.name}", f"Class                : {c.class_name}",
                          f"Type                 : {c.kind.lower()}", f"State                : {c.state}",
                          f"WorkerId             : {result.worker_id}"]
    if result.writes:
        lines.append(f"Writes               : {result.writes}")
    if result.trace:
        lines.append(f"Trace                : {result.trace}")
    return [*lines, "", Table(["Related Topics"], [[t] for t in result.topics])]


_PRESENTERS: dict[type[r.Result], Callable[[Any], list[Block]]] = {
    r.CommandStatus: _status,
    r.Warning_: _warning,
    r.Asserted: _asserted,
    r.SourceList: _sources,
    r.TopicList: _topics,
    r.QueryList: _queries,
    r.Properties: _properties,
    r.FunctionList: _functions,
    r.FunctionDescription: _function,
    r.Explanation: _explanation,
    r.ConnectorCreated: _connector_created,
    r.ConnectorDropped: _connector_dropped,
    r.ConnectorList: _connectors,
    r.ConnectorDescription: _connector,
}
