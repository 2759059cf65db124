"""ksqlDB REST JSON -> the engine's result types (what the shell shows for a remote server).

The entity and error shapes below are ksqlDB's documented ones (docs' REST API pages and
responses quoted in the research notes); no server is involved.
"""

from __future__ import annotations

import pytest

from streamsql.client import (
    END,
    ERROR,
    HEADER,
    ROW,
    TEXT,
    RemoteError,
    error_from_body,
    is_push_query,
    parse_query_line,
    query_limit,
    results_from_ksql_response,
)
from streamsql.entities import result_from_entity, schema_to_sql
from streamsql.entities import to_entity as result_to_entity
from streamsql.runtime import results as r
from streamsql.sql.parser import parse


def test_current_status_from_create_as_select() -> None:
    entity = {"@type": "currentStatus", "statementText": "CREATE STREAM TEST AS SELECT * FROM A EMIT CHANGES;",
              "commandId": "stream/`TEST`/create",
              "commandStatus": {"status": "SUCCESS", "message": "Created query with ID CSAS_TEST_171",
                                "queryId": "CSAS_TEST_171"},
              "commandSequenceNumber": 172, "warnings": []}
    result = result_from_entity(entity)
    assert result == r.CommandStatus(entity["statementText"], "Created query with ID CSAS_TEST_171", 172,
                                     "CSAS_TEST_171")


def test_streams_tables_and_warning() -> None:
    streams = result_from_entity({"@type": "streams", "statementText": "SHOW STREAMS;", "streams": [
        {"type": "STREAM", "name": "SOURCE_STREAM", "topic": "input-topic", "keyFormat": "KAFKA",
         "valueFormat": "JSON", "isWindowed": False}], "warnings": []})
    assert isinstance(streams, r.SourceList) and streams.kind == "STREAMS"
    assert streams.sources == [r.SourceInfo("SOURCE_STREAM", "STREAM", "input-topic", "KAFKA", "JSON", False)]
    tables = result_from_entity({"@type": "tables", "statementText": "SHOW TABLES;", "tables": [
        {"type": "TABLE", "name": "T", "topic": "t", "keyFormat": "KAFKA", "valueFormat": "JSON",
         "isWindowed": True}]})
    assert isinstance(tables, r.SourceList) and tables.kind == "TABLES" and tables.sources[0].windowed
    warning = result_from_entity({"@type": "warning_entity", "statementText": "CREATE STREAM IF NOT EXISTS x ...",
                                  "message": "Cannot add stream `X`: A stream with the same name already exists."})
    assert warning == r.Warning_("CREATE STREAM IF NOT EXISTS x ...",
                                 "Cannot add stream `X`: A stream with the same name already exists.")


def test_source_description_with_struct_and_key() -> None:
    entity = {"@type": "sourceDescription", "statementText": "DESCRIBE PAGEVIEWS;", "sourceDescription": {
        "name": "PAGEVIEWS", "windowType": None, "readQueries": [{"id": "CSAS_X_1", "queryString": "..."}],
        "writeQueries": [], "type": "STREAM", "timestamp": "", "statistics": "", "errorStats": "",
        "extended": False, "keyFormat": "KAFKA", "valueFormat": "JSON", "topic": "pageviews", "partitions": 2,
        "replication": 1, "statement": "CREATE STREAM PAGEVIEWS ...",
        "fields": [
            {"name": "USERID", "schema": {"type": "STRING"}, "type": "KEY"},
            {"name": "ADDR", "schema": {"type": "STRUCT", "fields": [
                {"name": "CITY", "schema": {"type": "STRING"}},
                {"name": "ZIP", "schema": {"type": "INTEGER"}}]}},
            {"name": "TAGS", "schema": {"type": "ARRAY", "memberSchema": {"type": "STRING"}}},
            {"name": "PRICE", "schema": {"type": "DECIMAL", "parameters": {"precision": 4, "scale": 2}}}]}}
    d = result_from_entity(entity)
    assert isinstance(d, r.SourceDescription)
    assert d.source == r.SourceInfo("PAGEVIEWS", "STREAM", "pageviews", "KAFKA", "JSON", False)
    assert [(f.name, f.type, f.key) for f in d.fields] == [
        ("USERID", "STRING", True), ("ADDR", "STRUCT<CITY STRING, ZIP INTEGER>", False),
        ("TAGS", "ARRAY<STRING>", False), ("PRICE", "DECIMAL(4, 2)", False)]
    assert d.partitions == 2 and d.timestamp_column is None and d.read_queries == ["CSAS_X_1"]


def test_queries_topics_properties_functions() -> None:
    queries = result_from_entity({"@type": "queries", "statementText": "SHOW QUERIES;", "queries": [
        {"queryString": "CREATE STREAM B AS SELECT * FROM A;", "sinks": ["B"], "sinkKafkaTopics": ["B"],
         "id": "CSAS_B_0", "statusCount": {"RUNNING": 1}, "queryType": "PERSISTENT", "state": "RUNNING"}]})
    assert isinstance(queries, r.QueryList)
    q = queries.queries[0]
    assert (q.id, q.sink, q.state, q.kind) == ("CSAS_B_0", "B", "RUNNING", "PERSISTENT")

    topics = result_from_entity({"@type": "kafka_topics", "statementText": "SHOW TOPICS;",
                                 "topics": [{"name": "orders", "replicaInfo": [1, 1, 1]}]})
    assert topics == r.TopicList("SHOW TOPICS;", [r.TopicInfo("orders", 3, 1)])

    props = result_from_entity({"@type": "properties", "statementText": "SHOW PROPERTIES;", "properties": [
        {"name": "ksql.service.id", "scope": "KSQL", "value": "default_", "editable": False, "level": "SERVER"},
        {"name": "auto.offset.reset", "scope": "KSQL", "value": "earliest"}],
        "overwrittenProperties": ["auto.offset.reset"], "defaultProperties": []})
    assert isinstance(props, r.Properties)
    assert props.properties == {"ksql.service.id": "default_", "auto.offset.reset": "earliest"}
    assert props.overridden == {"auto.offset.reset": "earliest"}

    functions = result_from_entity({"@type": "function_names", "statementText": "SHOW FUNCTIONS;", "functions": [
        {"name": "ABS", "type": "SCALAR", "category": "MATHEMATICAL"}]})
    assert functions == r.FunctionList("SHOW FUNCTIONS;", [r.FunctionInfo("ABS", "SCALAR", "MATHEMATICAL")])


def test_unknown_entity_keeps_its_json() -> None:
    result = result_from_entity({"@type": "connector_plugins_list", "statementText": "LIST CONNECTOR PLUGINS;",
                                 "connectorsPlugins": []})
    assert isinstance(result, r.Explanation) and '"connector_plugins_list"' in result.text


def test_connector_entities_map_both_ways() -> None:
    es = "io.confluent.connect.elasticsearch.ElasticsearchSinkConnector"
    summary = r.ConnectorSummary("ES", "SINK", es, "RUNNING")
    for result in (r.ConnectorCreated("CREATE SINK CONNECTOR ES WITH (...);", "ES", "SINK", {"topics": "T"}),
                   r.ConnectorDropped("DROP CONNECTOR ES;", "ES"),
                   r.ConnectorList("SHOW CONNECTORS;", [summary]),
                   r.ConnectorDescription("DESCRIBE CONNECTOR ES;", summary, ["T"], "host:streamsql")):
        entity = result_to_entity(result)
        back = result_from_entity(entity)
        assert type(back) is type(result), entity
    listed = result_to_entity(r.ConnectorList("SHOW CONNECTORS;", [summary]))
    assert listed["connectors"] == [{"name": "ES", "type": "sink", "className": es,
                                     "state": "RUNNING (1/1 tasks RUNNING)"}]
    assert result_from_entity(listed) == r.ConnectorList("SHOW CONNECTORS;", [summary])
    created = result_from_entity(result_to_entity(
        r.ConnectorCreated("CREATE SINK CONNECTOR ES WITH (...);", "ES", "SINK", {"topics": "T"})))
    assert isinstance(created, r.ConnectorCreated) and created.config == {"topics": "T", "name": "ES"}


@pytest.mark.parametrize("result", [
    r.CommandStatus("CREATE STREAM S ...", "Stream created", 3),
    r.CommandStatus("CREATE STREAM B AS ...", "Created query with ID CSAS_B_1", None, "CSAS_B_1"),
    r.Warning_("DROP STREAM IF EXISTS X", "Source X does not exist."),
    r.SourceList("SHOW STREAMS", "STREAMS", [r.SourceInfo("S", "STREAM", "s", "KAFKA", "JSON", False)]),
    r.SourceList("SHOW TABLES", "TABLES", [r.SourceInfo("T", "TABLE", "t", "KAFKA", "JSON", True)]),
    r.TopicList("SHOW TOPICS", [r.TopicInfo("a", 2, 1)]),
    r.Properties("SHOW PROPERTIES", {"auto.offset.reset": "earliest"}, {"auto.offset.reset": "earliest"}),
    r.Properties("SHOW VARIABLES", {"T": "topic"}, {}),
    r.FunctionList("SHOW FUNCTIONS", [r.FunctionInfo("ABS", "SCALAR", "MATHEMATICAL")]),
    r.SourceDescription("DESCRIBE S", r.SourceInfo("S", "STREAM", "s", "KAFKA", "JSON", False),
                        [r.FieldInfo("ID", "STRING", True), r.FieldInfo("N", "INTEGER", False)], 2, "TS",
                        "CREATE STREAM S ...", ["CSAS_B_1"], [], True),
    r.SourceDescription("DESCRIBE S EXTENDED", r.SourceInfo("S", "STREAM", "s", "KAFKA", "JSON", False),
                        [r.FieldInfo("ID", "STRING", True)], 2, None, "CREATE STREAM S ...", ["CSAS_B_1"], [], True,
                        [r.OffsetSummary("_confluent-ksql-default_query_CSAS_B_1", "s",
                                         [r.PartitionOffsets(0, 0, 5, 3), r.PartitionOffsets(1, 2, 4, 4)])]),
])
def test_results_survive_the_round_trip_through_rest_entities(result: r.Result) -> None:
    assert result_from_entity(result_to_entity(result)) == result


def test_query_list_round_trip() -> None:
    ql = r.QueryList("SHOW QUERIES", [r.QueryDescription("CSAS_B_1", "CREATE STREAM B AS SELECT * FROM A", "B", ["A"],
                                                         "RUNNING", "PERSISTENT")])
    assert result_from_entity(result_to_entity(ql)) == ql


def test_show_queries_extended_answers_query_descriptions_and_reads_back() -> None:
    """ksqlDB answers SHOW QUERIES EXTENDED with ``query_descriptions`` (QueryDescriptionList),
    not the plain listing's ``queries``; a failed query's error is a ``QueryError``."""
    failed = r.QueryDescription("CSAS_B_1", "CREATE STREAM B AS SELECT * FROM A;", "B", ["A"], "ERROR",
                                "PERSISTENT", {"error": "boom"})
    ql = r.QueryList("SHOW QUERIES EXTENDED;", [failed])
    entity = result_to_entity(ql, parse("SHOW QUERIES EXTENDED;")[0])
    assert entity is not None and entity["@type"] == "query_descriptions"
    (desc,) = entity["queryDescriptions"]
    assert (desc["id"], desc["sources"], desc["sinks"], desc["state"]) == ("CSAS_B_1", ["A"], ["B"], "ERROR")
    assert desc["queryErrors"] == [{"timestamp": 0, "errorMessage": "boom", "type": "UNKNOWN"}]
    assert result_from_entity(entity) == r.QueryList(ql.statement, [
        r.QueryDescription("CSAS_B_1", failed.statement, "B", ["A"], "ERROR", "PERSISTENT")])
    plain = result_to_entity(ql, parse("SHOW QUERIES;")[0])
    assert plain is not None and plain["@type"] == "queries"


def test_error_envelopes() -> None:
    e = error_from_body({"@type": "statement_error", "error_code": 40001,
                         "message": "line 1:13: Syntax Error\nmissing ';' at ''", "statementText": "SHOW STREAMS",
                         "entities": [{"@type": "currentStatus", "statementText": "CREATE STREAM A ...",
                                       "commandStatus": {"status": "SUCCESS", "message": "Stream created"},
                                       "commandSequenceNumber": 4}]}, 400)
    assert isinstance(e, RemoteError)
    assert str(e).startswith("line 1:13: Syntax Error") and e.error_code == 40001 and e.statement == "SHOW STREAMS"
    assert e.entities == [r.CommandStatus("CREATE STREAM A ...", "Stream created", 4)]
    generic = error_from_body({"@type": "generic_error", "error_code": 40000, "message": "No query with id x"}, 400)
    assert str(generic) == "No query with id x" and generic.entities == []
    proxy = error_from_body("<html>Bad Gateway</html>", 502)
    assert "HTTP 502" in str(proxy) and "Bad Gateway" in str(proxy)


def test_ksql_response_with_failed_command_is_an_error_after_the_earlier_results() -> None:
    body = [{"@type": "currentStatus", "statementText": "CREATE STREAM A ...",
             "commandStatus": {"status": "SUCCESS", "message": "Stream created"}, "commandSequenceNumber": 1},
            {"@type": "currentStatus", "statementText": "CREATE STREAM B AS ...",
             "commandStatus": {"status": "ERROR", "message": "Could not create query.\ndetails"},
             "commandSequenceNumber": -1}]
    with pytest.raises(RemoteError) as info:
        results_from_ksql_response(body)
    assert str(info.value) == "Could not create query."
    assert [type(x) for x in info.value.entities] == [r.CommandStatus]
    with pytest.raises(RemoteError):
        results_from_ksql_response({"@type": "generic_error", "error_code": 50000, "message": "boom"})


def test_query_stream_lines() -> None:
    header = parse_query_line('{"queryId":"transient_FOO_1","columnNames":["COL","COL2"],"columnTypes":["BIGINT","STRING"]}\n')
    assert header == (HEADER, {"queryId": "transient_FOO_1", "columnNames": ["COL", "COL2"],
                               "columnTypes": ["BIGINT", "STRING"]})
    assert parse_query_line('[123,"blah"]\n') == (ROW, [123, "blah"])
    assert parse_query_line("\n") is None
    kind, error = parse_query_line('{"@type":"generic_error","error_code":50000,"message":"query failed"}')
    assert kind == ERROR and str(error) == "query failed"
    # PRINT output is plain text
    assert parse_query_line("rowtime: 2022/03/18 15:53:22.989 Z, key: 18, value: {\"a\":1}, partition: 0\n") == (
        TEXT, 'rowtime: 2022/03/18 15:53:22.989 Z, key: 18, value: {"a":1}, partition: 0')


def test_legacy_query_rows() -> None:
    kind, header = parse_query_line('[{"header":{"queryId":"q1","schema":"`ID` STRING KEY, `S` STRUCT<`A` INTEGER, '
                                    '`B` STRING>, `N` DECIMAL(4, 2)"}},')
    assert kind == HEADER
    assert header["columnNames"] == ["ID", "S", "N"]
    assert header["columnTypes"] == ["STRING", "STRUCT<`A` INTEGER, `B` STRING>", "DECIMAL(4, 2)"]
    assert parse_query_line('{"row":{"columns":[1,"a"]}},') == (ROW, [1, "a"])
    assert parse_query_line('{"finalMessage":"Limit Reached"}]') == (END, "Limit Reached")
    kind, error = parse_query_line('{"errorMessage":{"@type":"generic_error","error_code":50000,"message":"x"}}')
    assert kind == ERROR and str(error) == "x"


def test_query_statement_helpers() -> None:
    assert query_limit("SELECT * FROM s EMIT CHANGES LIMIT 3;") == 3
    assert query_limit("select * from s emit changes limit 10") == 10
    assert query_limit("SELECT * FROM s EMIT CHANGES") is None
    assert is_push_query("select * from s emit changes limit 1") and not is_push_query("SELECT * FROM t WHERE k=1")
    assert schema_to_sql({"type": "MAP", "memberSchema": {"type": "BIGINT"}}) == "MAP<STRING, BIGINT>"
    assert schema_to_sql(None) == "UNKNOWN"


def test_describe_extended_shows_consumer_lag_as_ksqldbs_cli_does() -> None:
    from streamsql.surfaces.render import render

    d = r.SourceDescription("DESCRIBE S EXTENDED", r.SourceInfo("S", "STREAM", "s", "KAFKA", "JSON", False),
                            [r.FieldInfo("ID", "STRING", True)], 2, None, "CREATE STREAM S ...", ["CSAS_B_1"], [],
                            True, [r.OffsetSummary("_confluent-ksql-default_query_CSAS_B_1", "s",
                                                   [r.PartitionOffsets(0, 0, 5, 3), r.PartitionOffsets(1, 2, 4, 4)])])
    text = render(d)
    assert "Consumer Groups summary:" in text and "Consumer Group       : _confluent-ksql-default_query_CSAS_B_1" in text
    assert "Max lag              : 2" in text
    rows = [[cell.strip() for cell in line.strip(" |").split("|")] for line in text.splitlines() if line.count("|") >= 4]
    assert ["0", "0", "5", "3", "2"] in [row[-5:] for row in rows] and ["1", "2", "4", "4", "0"] in [
        row[-5:] for row in rows]


def test_describe_function_carries_its_signatures_both_ways() -> None:
    # it used to fall through to a currentStatus holding the result's repr: no signatures over REST
    described = r.FunctionDescription("DESCRIBE FUNCTION CONCAT;", r.FunctionInfo("CONCAT", "scalar", "STRING", "joins"),
                                      [r.FunctionVariant(["VARCHAR", "VARCHAR"], "VARCHAR", variadic=True)])
    entity = result_to_entity(described)
    assert entity["@type"] == "describe_function" and entity["name"] == "CONCAT"
    assert entity["functions"] == [{"arguments": [{"name": "", "type": "VARCHAR", "description": "", "isVariadic": False},
                                                  {"name": "", "type": "VARCHAR", "description": "", "isVariadic": True}],
                                    "argumentTypes": ["VARCHAR", "VARCHAR"], "returnType": "VARCHAR", "description": ""}]
    back = result_from_entity(entity)
    assert isinstance(back, r.FunctionDescription) and back.variants == described.variants
    assert back.function.name == "CONCAT" and back.function.description == "joins"
