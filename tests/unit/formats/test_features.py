"""What a format supports is declared once (``formats/features.py``): every format there has a
serde, and the statement checks, the join and aggregation planners and the compression option
follow a declaration they did not name (a format added to the table for the test)."""

from __future__ import annotations

import pytest

from streamsql import types as t
from streamsql.catalog import Catalog, Source
from streamsql.errors import AnalysisError, ConfigError
from streamsql.formats import FormatSpec, compression, serde_for
from streamsql.formats.features import FORMATS, REGISTRY_SCHEMA_TYPES, SUPPORTED, FormatFeatures, features
from streamsql.functions.catalog import builtin_registry
from streamsql.planner.ddl import SourceDefinitions, check_delimiters, format_options
from streamsql.planner.planner import Planner
from streamsql.sql import parse


def test_every_declared_format_has_a_serde_and_no_other() -> None:
    columns = (t.Column("V", t.STRING),)
    for name in FORMATS:
        spec = FormatSpec(name, () if name == "NONE" else columns)
        assert serde_for(spec) is not None, name
    with pytest.raises(ConfigError, match="Unknown format: NOPE. Supported: " + ", ".join(SUPPORTED)):
        serde_for(FormatSpec("NOPE", columns))


def test_registry_formats_and_their_schema_types() -> None:
    assert REGISTRY_SCHEMA_TYPES == {"AVRO": "AVRO", "JSON_SR": "JSON", "PROTOBUF": "PROTOBUF"}
    assert features("protobuf_nosr").protobuf and not features("PROTOBUF_NOSR").uses_registry
    assert [name for name, f in FORMATS.items() if not f.wraps_single_value] == ["DELIMITED", "KAFKA", "NONE"]


@pytest.fixture
def lines_format(monkeypatch: pytest.MonkeyPatch) -> FormatFeatures:
    """A format only the features table knows: line-oriented, bare values, not joinable."""
    declared = FormatFeatures("LINES", line_oriented=True, delimited=True, joins_and_groups=False)
    monkeypatch.setitem(FORMATS, "LINES", declared)
    return declared


def test_statement_checks_ask_the_declaration(lines_format: FormatFeatures) -> None:
    definitions = SourceDefinitions(lambda name: "")
    assert definitions.formats({"VALUE_FORMAT": "lines"}, "KAFKA", None) == ("KAFKA", "LINES")
    one = [t.Column("K", t.STRING, "key"), t.Column("V", t.STRING)]
    with pytest.raises(ConfigError, match="Format 'LINES' does not support 'WRAP_SINGLE_VALUE' set to 'true'"):
        definitions.wrap_single_value({"WRAP_SINGLE_VALUE": True}, one, "LINES")
    check_delimiters({"VALUE_DELIMITER": ";"}, "KAFKA", "LINES")  # accepted: the format is delimited
    assert compression.check_compression("gzip", "LINES", "VALUE") == "GZIP"
    with pytest.raises(AnalysisError, match="only valid for the PROTOBUF formats"):
        format_options({"VALUE_PROTOBUF_NULLABLE_REPRESENTATION": "OPTIONAL"}, "VALUE", "LINES")
    with pytest.raises(AnalysisError, match="Unknown format: NOPE"):
        definitions.formats({"VALUE_FORMAT": "nope"}, "KAFKA", None)


def test_join_and_group_by_ask_the_declaration(lines_format: FormatFeatures) -> None:
    catalog = Catalog()
    for name, fmt in (("L", "LINES"), ("J", "JSON")):
        catalog.add(Source(name, "STREAM", [t.Column("K", t.STRING, "key"), t.Column("V", t.STRING)],
                           topic=name.lower(), key_format="KAFKA", value_format=fmt))
    planner = Planner(catalog, builtin_registry())
    [join] = parse("SELECT * FROM J JOIN L WITHIN 1 MINUTE ON J.K = L.K EMIT CHANGES;")
    with pytest.raises(AnalysisError, match="Source\\(s\\) L are using the 'LINES' value format. This format "
                                            "does not yet support JOIN."):
        planner.plan_query(join.query, persistent=False)
    [grouped] = parse("SELECT K, COUNT(*) FROM L GROUP BY K EMIT CHANGES;")
    with pytest.raises(AnalysisError, match="using the 'LINES' value format. This format does not yet support "
                                            "GROUP BY"):
        planner.plan_query(grouped.query, persistent=False)
