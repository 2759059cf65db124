"""One presenter per result type (``surfaces/presenters.py``): the CLI renderer's boxed tables and
the shell's underlined ones show the same headers and cells, each result the shell used to show
as its Python repr is laid out, and which listing a Properties result is has one answer for the
text surfaces and the REST entities."""

from __future__ import annotations

import pytest

from streamsql.entities import to_entity
from streamsql.runtime import results as r
from streamsql.surfaces import console, presenters
from streamsql.surfaces.render import render, row_line

SOURCES = r.SourceList("SHOW STREAMS;", "STREAMS", [r.SourceInfo("ORDERS", "STREAM", "orders", "KAFKA", "JSON", True)])
QUERIES = r.QueryList("SHOW QUERIES;", [r.QueryDescription("CSAS_O_1", "CREATE STREAM O AS\n  SELECT *\n  FROM S;",
                                                           "O", ["S"], "RUNNING")])
CONNECTORS = r.ConnectorList("SHOW CONNECTORS;", [r.ConnectorSummary("ES", "SINK", "ElasticsearchSinkConnector",
                                                                    "RUNNING")])


def _cells(text: str, separator: str) -> list[list[str]]:
    """The cells of a table's rows, whatever its rules."""
    return [[c.strip() for c in line.strip(separator).split(separator)] for line in text.splitlines()
            if separator in line and not set(line) <= set("+-| ")]


@pytest.mark.parametrize("result", [SOURCES, QUERIES, CONNECTORS,
                                    r.TopicList("SHOW TOPICS;", [r.TopicInfo("orders", 2)]),
                                    r.Properties("SHOW PROPERTIES;", {"auto.offset.reset": "earliest"},
                                                 {"auto.offset.reset": "earliest"})])
def test_the_cli_renderer_and_the_shell_show_the_same_table(result: r.Result) -> None:
    presentation = presenters.present(result)
    assert presentation is not None
    [table] = [b for b in presentation.blocks if isinstance(b, presenters.Table)]
    expected = [list(table.headers)] + [[presenters.cell_text(v) for v in row] for row in table.rows]
    assert _cells(render(result), "|") == expected
    assert _cells(console.render_entity(result), "|") == expected


def test_cells_agree_between_tables_and_rows() -> None:
    """A boolean is lower-case everywhere (ksqlDB's), a query's statement is one line."""
    assert _cells(render(SOURCES), "|")[1][-1] == "true"
    assert row_line([("B", "BOOLEAN"), ("M", "MAP")], [True, {"a": None}]) == '|true|{"a":null}|'
    assert "CREATE STREAM O AS SELECT * FROM S;" in render(QUERIES)


def test_the_shell_lays_out_asserts_connectors_and_function_descriptions() -> None:
    asserted = r.Asserted("ASSERT TOPIC t;", "TOPIC", "Topic t", True, topic="t")
    assert console.render_entity(asserted) == render(asserted) == "Topic t exists."
    assert "ElasticsearchSinkConnector" in console.render_entity(CONNECTORS)
    described = r.FunctionDescription("DESCRIBE FUNCTION len;", r.FunctionInfo("LEN", "SCALAR", "STRING", "Length."),
                                      [r.FunctionVariant(["VARCHAR"], "INT")])
    assert console.render_entity(described) == render(described)
    assert "\tVariation   : LEN(VARCHAR)" in render(described)
    created = r.ConnectorCreated("CREATE SINK CONNECTOR es WITH (...);", "ES", "SINK", {})
    assert console.render_entity(created).splitlines()[2] == " Created connector ES "
    assert render(created) == " Message: Created connector ES"


@pytest.mark.parametrize("statement,listing,header,entity_type", [
    ("SHOW VARIABLES;", "VARIABLES", "Variable Name", "variables"),
    ("list variables;", "VARIABLES", "Variable Name", "variables"),
    ("SHOW PROPERTIES;", "PROPERTIES", "Property", "properties"),
])
def test_a_listing_is_told_once_for_text_and_entities(statement: str, listing: str, header: str,
                                                      entity_type: str) -> None:
    result = r.Properties(statement, {"X": "1"}, {})
    assert result.listing == listing
    assert console.render_entity(result).split("|")[0].strip() == header
    assert render(result).splitlines()[1].split("|")[1].strip() == header
    entity = to_entity(result)
    assert entity is not None and entity["@type"] == entity_type
