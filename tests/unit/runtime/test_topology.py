"""The pipeline graph and its renderings, from a catalog and physical plans made by the planner
(no Spark, no Kafka): every source, query step, sink and internal topic is named, data flows
along the edges, a query can be drawn alone."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from streamsql import types as t
from streamsql.catalog import Catalog, QueryInfo, Source
from streamsql.functions.catalog import builtin_registry
from streamsql.physical.steps import KafkaSink, physical_plan
from streamsql.planner.planner import Planner
from streamsql.runtime import topology
from streamsql.sql import parse


@pytest.fixture
def graph() -> topology.Topology:
    catalog = Catalog()
    orders = Source("ORDERS", "STREAM", [t.Column("ID", t.BIGINT, "key"), t.Column("AMOUNT", t.INTEGER)],
                    topic="orders", key_format="KAFKA", value_format="JSON")
    users = Source("USERS", "TABLE", [t.Column("ID", t.BIGINT, "key"), t.Column("NAME", t.STRING)],
                   topic="users", key_format="KAFKA", value_format="JSON", is_source=True, writer_query="CST_USERS_2")
    catalog.add(orders)
    catalog.add(users)
    [stmt] = parse("CREATE TABLE totals AS SELECT id, SUM(amount) AS total FROM orders GROUP BY id;")
    plan = Planner(catalog, builtin_registry()).plan_query(stmt.query, persistent=True, sink_name="TOTALS")
    totals = Source("TOTALS", "TABLE", [t.Column("ID", t.BIGINT, "key"), t.Column("TOTAL", t.BIGINT)],
                    topic="TOTALS", key_format="KAFKA", value_format="JSON", writer_query="CTAS_TOTALS_3")
    catalog.add(totals)
    catalog.queries["CTAS_TOTALS_3"] = QueryInfo("CTAS_TOTALS_3", stmt.text, "TOTALS", ["ORDERS"])
    [cst] = parse("SELECT * FROM users EMIT CHANGES;")
    cst_plan = Planner(catalog, builtin_registry()).plan_query(cst.query, persistent=True, sink_name="USERS")
    changelog = "_streamsql-CST_USERS_2-users-changelog"
    catalog.queries["CST_USERS_2"] = QueryInfo("CST_USERS_2", "CREATE SOURCE TABLE users ...", "USERS", [])
    plans = {"CTAS_TOTALS_3": physical_plan(plan, KafkaSink(totals), "earliest", buckets=2, operator="python"),
             "CST_USERS_2": physical_plan(cst_plan, KafkaSink(replace(users, topic=changelog)), "earliest",
                                          changelog=True)}
    return topology.build(catalog, plans, "default_ksql_processing_log", {"CTAS_TOTALS_3": {"in": 1234.0}},
                          {changelog: "CST_USERS_2"})


def _edge(graph: topology.Topology, source: str, target: str) -> topology.Edge | None:
    return next((e for e in graph.edges if e.source == source and e.target == target), None)


def test_data_flows_from_topics_through_query_steps_to_sinks(graph: topology.Topology) -> None:
    assert _edge(graph, "topic:orders", "source:ORDERS") is not None  # declared over its topic
    scan = _edge(graph, "source:ORDERS", "query:CTAS_TOTALS_3:0")
    assert scan is not None and scan.label == "1,234 rows/s"  # the running query's input rate
    assert [n.label.split(" ")[0] for n in graph.nodes if n.query == "CTAS_TOTALS_3"] == ["Scan", "Aggregate", "Kafka"]
    assert _edge(graph, "query:CTAS_TOTALS_3:1", "query:CTAS_TOTALS_3:2") is not None
    assert _edge(graph, "query:CTAS_TOTALS_3:2", "source:TOTALS") is not None
    assert _edge(graph, "source:TOTALS", "topic:TOTALS") is not None  # a query's sink writes its topic
    # a source table's materialization reads the table and writes its internal changelog topic
    assert _edge(graph, "source:USERS", "query:CST_USERS_2:0") is not None
    changelog = graph.node("topic:_streamsql-CST_USERS_2-users-changelog")
    assert changelog is not None and changelog.internal and changelog.detail == "changelog of USERS"
    assert _edge(graph, "query:CST_USERS_2:3", changelog.id) is not None
    log_edge = _edge(graph, "query:CTAS_TOTALS_3:2", "topic:default_ksql_processing_log")
    assert log_edge is not None and log_edge.side


def test_text_json_dot_and_mermaid_name_every_part(graph: topology.Topology) -> None:
    text = topology.render(graph, "text")
    assert "stream ORDERS (KAFKA/JSON, topic orders)" in text
    assert "Query CTAS_TOTALS_3: ORDERS → TOTALS" in text
    assert "  [3] Kafka sink TOTALS (topic TOTALS, key KAFKA, value JSON)" in text
    assert "  _streamsql-CST_USERS_2-users-changelog (changelog of USERS)" in text
    assert "  default_ksql_processing_log (processing log)" in text
    data = json.loads(topology.render(graph, "json"))
    assert {n["id"] for n in data["nodes"]} >= {"source:ORDERS", "source:USERS", "source:TOTALS", "topic:orders"}
    dot = topology.render(graph, "dot")
    assert dot.startswith("digraph pipeline {") and dot.rstrip().endswith("}")
    assert 'subgraph "cluster_CTAS_TOTALS_3"' in dot and "shape=cylinder" in dot
    assert '"query:CTAS_TOTALS_3:2" -> "topic:default_ksql_processing_log" [label="errors", style=dashed' in dot
    mermaid = topology.render(graph, "mermaid")
    assert mermaid.startswith("flowchart LR")
    assert "subgraph n_query_CTAS_TOTALS_3" in mermaid and 'n_topic_orders[("orders")]' in mermaid
    assert "-.->" in mermaid and "class " in mermaid
    for name in ("ORDERS", "USERS", "TOTALS", "CTAS_TOTALS_3", "CST_USERS_2", "_streamsql-CST_USERS_2-users-changelog",
                 "default_ksql_processing_log"):
        assert name in dot and name in mermaid


def test_one_query_alone_and_unknown_formats(graph: topology.Topology) -> None:
    alone = topology.focus(graph, "CTAS_TOTALS_3")
    ids = {n.id for n in alone.nodes}
    assert "source:ORDERS" in ids and "source:TOTALS" in ids and "query:CST_USERS_2:0" not in ids
    assert "source:USERS" not in ids
    with pytest.raises(ValueError, match="Unknown topology format 'svgz'. Use one of: text, json, dot, mermaid"):
        topology.render(graph, "svgz")
