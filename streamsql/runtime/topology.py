"""The pipeline as a graph: topics, streams and tables, queries with their physical steps,
connectors and the engine's internal topics — drawn as text, JSON, Graphviz DOT or Mermaid.

Built from what the engine runs (the catalog and each query's :class:`PhysicalPlan`), never
from a second description of it, so the picture is what executes. Data flows along the edges:
a topic feeds the stream or table declared over it, a source feeds the first step of each query
that reads it, a query's last step writes its sink, the sink writes its topic, a connector
reads its topics. The engine's own topics are marked ``internal``: the processing log (each
query's undecodable records and failing functions go there) and a source table's changelog.
With ``rates`` (a running query's last progress) the edges into and out of a query carry rows
per second, as kafka-streams-viz or Spark's UI would show them.
"""

from __future__ import annotations

import json
import re
import textwrap
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamsql.catalog import Catalog
    from streamsql.physical.steps import PhysicalPlan

FORMATS = ("text", "json", "dot", "mermaid")


@dataclass
class Node:
    id: str
    #: topic | stream | table | query | step | connector
    kind: str
    label: str
    #: a topic the engine created for itself
    internal: bool = False
    #: a step's query (steps are drawn inside their query)
    query: str | None = None
    detail: str = ""


@dataclass
class Edge:
    source: str
    target: str
    label: str = ""
    #: a side channel (the processing log), drawn dashed
    side: bool = False


@dataclass
class Topology:
    nodes: list[Node] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)

    def node(self, node_id: str) -> Node | None:
        return next((n for n in self.nodes if n.id == node_id), None)

    def _add(self, node: Node) -> str:
        if self.node(node.id) is None:
            self.nodes.append(node)
        return node.id

    def to_json(self) -> dict[str, Any]:
        return {"nodes": [asdict(n) for n in self.nodes], "edges": [asdict(e) for e in self.edges]}


def _topic(name: str) -> str:
    return f"topic:{name}"


def _source(name: str) -> str:
    return f"source:{name}"


def _query(query_id: str) -> str:
    return f"query:{query_id}"


def build(catalog: Catalog, plans: dict[str, PhysicalPlan], processing_log_topic: str | None = None,
          rates: dict[str, dict[str, float]] | None = None,
          internal_topics: dict[str, str] | None = None) -> Topology:
    """The graph of everything in ``catalog``. ``plans``: each query's physical steps (a query
    without one is drawn as a single node); ``rates``: query id → ``{"in": rows/s, "out":
    rows/s}``; ``internal_topics``: the sink topic a query writes instead of its table's own
    (a source table's changelog) → query id."""
    topo = Topology()
    rates = rates or {}
    internal_topics = internal_topics or {}
    written_by = {q: topic for topic, q in internal_topics.items()}
    for src in catalog.sources.values():
        sid = topo._add(Node(_source(src.name), src.kind.lower(), src.name,
                             detail=f"{src.key_format}/{src.value_format}"))
        tid = topo._add(Node(_topic(src.topic), "topic", src.topic, internal=src.topic.startswith("_")))
        if src.writer_query is None or src.writer_query in written_by:
            topo.edges.append(Edge(tid, sid))  # declared over its topic
        else:
            topo.edges.append(Edge(sid, tid))  # written by its query
    for info in catalog.queries.values():
        qid = _query(info.id)
        plan = plans.get(info.id)
        rate = rates.get(info.id, {})
        first = last = topo._add(Node(qid, "query", info.id, detail=info.statement))
        if plan is not None:
            steps = [topo._add(Node(f"{qid}:{i}", "step", step.describe(), query=info.id))
                     for i, step in enumerate(plan.steps)]
            for a, b in zip(steps, steps[1:]):
                topo.edges.append(Edge(a, b))
            first, last = steps[0], steps[-1]
        # a source table's materialization reads the table's own topic
        for name in info.sources or ([info.sink] if info.id in written_by else []):
            topo.edges.append(Edge(_source(name), first, _rate(rate.get("in"))))
        if info.id in written_by:  # a source table's materialization: its changelog topic
            out = topo._add(Node(_topic(written_by[info.id]), "topic", written_by[info.id], internal=True,
                                 detail=f"changelog of {info.sink}"))
            topo.edges.append(Edge(last, out, _rate(rate.get("out"))))
        elif info.sink:
            topo.edges.append(Edge(last, _source(info.sink), _rate(rate.get("out"))))
        if processing_log_topic:
            log_id = topo._add(Node(_topic(processing_log_topic), "topic", processing_log_topic, internal=True,
                                    detail="processing log"))
            topo.edges.append(Edge(last, log_id, "errors", side=True))
    for conn in getattr(catalog, "connectors", {}).values():
        cid = topo._add(Node(f"connector:{conn.name}", "connector", conn.name,
                             detail=f"{conn.kind} {conn.class_name}"))
        for topic in conn.topics:
            topo.edges.append(Edge(topo._add(Node(_topic(topic), "topic", topic, internal=topic.startswith("_"))),
                                   cid))
    return topo


def focus(topo: Topology, query_id: str) -> Topology:
    """Only query ``query_id``: its node and steps, and the nodes its edges touch."""
    own = {n.id for n in topo.nodes if n.id == _query(query_id) or n.query == query_id}
    edges = [e for e in topo.edges if e.source in own or e.target in own]
    keep = own | {e.source for e in edges} | {e.target for e in edges}
    return Topology([n for n in topo.nodes if n.id in keep], edges)


def _rate(value: float | None) -> str:
    return f"{value:,.0f} rows/s" if value is not None else ""


# --- renderers ---------------------------------------------------------------------------------


def render(topo: Topology, fmt: str) -> str:
    """``topo`` as ``fmt`` (one of :data:`FORMATS`)."""
    if fmt == "json":
        return json.dumps(topo.to_json(), indent=2)
    if fmt == "dot":
        return to_dot(topo)
    if fmt == "mermaid":
        return to_mermaid(topo)
    if fmt == "text":
        return to_text(topo)
    raise ValueError(f"Unknown topology format '{fmt}'. Use one of: {', '.join(FORMATS)}")


def to_text(topo: Topology) -> str:
    lines: list[str] = []
    by_kind = {k: [n for n in topo.nodes if n.kind == k] for k in ("stream", "table", "query", "connector", "topic")}
    inputs = {n.id: [e.source for e in topo.edges if e.target == n.id] for n in topo.nodes}
    outputs = {n.id: [e.target for e in topo.edges if e.source == n.id and not e.side] for n in topo.nodes}
    names = {n.id: n.label for n in topo.nodes}
    if by_kind["stream"] or by_kind["table"]:
        lines.append("Sources:")
        for n in by_kind["stream"] + by_kind["table"]:
            topics = [names[i] for i in inputs[n.id] + outputs[n.id] if i.startswith("topic:")]
            lines.append(f"  {n.kind} {n.label} ({n.detail}, topic {', '.join(topics)})")
    for n in by_kind["query"]:
        steps = [s for s in topo.nodes if s.query == n.label]
        head = steps[0].id if steps else n.id
        tail = steps[-1].id if steps else n.id
        ins = ", ".join(names[i] for i in inputs[head] if not i.startswith(n.id))
        outs = ", ".join(names[o] for o in outputs[tail])
        lines.append(f"Query {n.label}: {ins} → {outs}")
        for i, s in enumerate(steps):
            lines.append(f"  [{i + 1}] {s.label}")
    for n in by_kind["connector"]:
        lines.append(f"Connector {n.label} ({n.detail}): reads {', '.join(names[i] for i in inputs[n.id])}")
    internal = [n for n in by_kind["topic"] if n.internal]
    if internal:
        lines.append("Internal topics:")
        lines += [f"  {n.label}" + (f" ({n.detail})" if n.detail else "") for n in internal]
    return "\n".join(lines)


_SHAPES_DOT = {"topic": "cylinder", "stream": "box", "table": "box3d", "query": "box", "step": "box",
               "connector": "hexagon"}


def _dot_id(node_id: str) -> str:
    return json.dumps(node_id)


def _dot_label(text: str) -> str:
    return json.dumps(text)


#: a step's label wraps at this many characters: on one line, a long aggregation or scan made
#: the rendered picture thousands of pixels wide
WRAP = 44


def _wrap(text: str) -> str:
    return "\n".join(textwrap.wrap(text, WRAP, break_long_words=False, break_on_hyphens=False)) or text


def to_dot(topo: Topology) -> str:
    """Graphviz: queries are clusters of their steps; internal topics grey, side channels dashed."""
    out = ["digraph pipeline {", "  rankdir=TB;", '  node [fontname="Helvetica", fontsize=10];',
           '  edge [fontname="Helvetica", fontsize=9];']
    for n in topo.nodes:
        if n.kind in ("step", "query") and any(s.query == (n.label if n.kind == "query" else n.query)
                                               for s in topo.nodes if s.kind == "step"):
            continue  # drawn in its cluster below
        attrs = [f"label={_dot_label(_label(n))}", f"shape={_SHAPES_DOT[n.kind]}"]
        if n.internal:
            attrs += ["style=filled", 'fillcolor="#e8e8e8"']
        elif n.kind in ("stream", "table"):
            attrs += ["style=filled", 'fillcolor="#dbeafe"' if n.kind == "stream" else 'fillcolor="#dcfce7"']
        out.append(f"  {_dot_id(n.id)} [{', '.join(attrs)}];")
    for q in (n for n in topo.nodes if n.kind == "query"):
        steps = [s for s in topo.nodes if s.query == q.label]
        if not steps:
            continue
        out.append(f"  subgraph {_dot_id('cluster_' + q.label)} {{")
        out.append(f"    label={_dot_label(q.label)}; style=rounded; color=\"#64748b\";")
        for s in steps:
            out.append(f"    {_dot_id(s.id)} [label={_dot_label(_wrap(s.label))}, shape=box, style=rounded];")
        out.append("  }")
    for e in topo.edges:
        attrs = []
        if e.label:
            attrs.append(f"label={_dot_label(e.label)}")
        if e.side:
            attrs += ["style=dashed", 'color="#9ca3af"']
        out.append(f"  {_dot_id(e.source)} -> {_dot_id(e.target)}" + (f" [{', '.join(attrs)}]" if attrs else "") + ";")
    out.append("}")
    return "\n".join(out) + "\n"


def _label(n: Node) -> str:
    if n.kind == "topic":
        return n.label + (f"\n({n.detail})" if n.detail else "")
    if n.kind in ("stream", "table", "connector"):
        return f"{n.kind.upper()} {n.label}" + (f"\n{n.detail}" if n.detail else "")
    return n.label


def _mermaid_id(node_id: str) -> str:
    return "n_" + re.sub(r"[^A-Za-z0-9_]", "_", node_id)


def _mermaid_text(text: str) -> str:
    return '"' + text.replace('"', "#quot;").replace("\n", "<br/>") + '"'


def to_mermaid(topo: Topology) -> str:
    """Mermaid flowchart: queries are subgraphs of their steps; topics are cylinders."""
    out = ["flowchart LR"]
    in_cluster = {s.id for s in topo.nodes if s.kind == "step"}
    clustered = {s.query for s in topo.nodes if s.kind == "step"}
    for n in topo.nodes:
        if n.id in in_cluster or (n.kind == "query" and n.label in clustered):
            continue
        text = _mermaid_text(_label(n))
        nid = _mermaid_id(n.id)
        if n.kind == "topic":
            out.append(f"  {nid}[({text})]")
        elif n.kind == "connector":
            out.append(f"  {nid}{{{{{text}}}}}")
        else:
            out.append(f"  {nid}[{text}]")
    for q in (n for n in topo.nodes if n.kind == "query" and n.label in clustered):
        out.append(f"  subgraph {_mermaid_id(q.id)}[{_mermaid_text(q.label)}]")
        out.append("    direction TB")
        for s in (s for s in topo.nodes if s.query == q.label):
            out.append(f"    {_mermaid_id(s.id)}({_mermaid_text(s.label)})")
        out.append("  end")
    for e in topo.edges:
        arrow = "-.->" if e.side else "-->"
        label = f"|{_mermaid_text(e.label)}|" if e.label else ""
        out.append(f"  {_mermaid_id(e.source)} {arrow}{label} {_mermaid_id(e.target)}")
    internal = [_mermaid_id(n.id) for n in topo.nodes if n.internal]
    if internal:
        out.append("  classDef internal fill:#e8e8e8,stroke:#9ca3af")
        out.append(f"  class {','.join(internal)} internal")
    return "\n".join(out) + "\n"
