"""Connector statements: parsing, and the configuration checks whose errors name the key."""

from __future__ import annotations

import pytest

from streamsql.connectors.classes import parse_sink
from streamsql.connectors.config import ConnectorError
from streamsql.connectors.converters import Converter, RecordError
from streamsql.connectors.elasticsearch import ElasticsearchSinkConfig, _document_id
from streamsql.errors import ParseError
from streamsql.sql import ast, parse

ES = "io.confluent.connect.elasticsearch.ElasticsearchSinkConnector"


def es_config(**extra: str) -> dict[str, str]:
    return {"connector.class": ES, "connection.url": "http://localhost:9200", "topics": "WORDS", **extra}


def test_connector_statements_parse_with_keys_as_written() -> None:
    [create] = parse(f"CREATE SINK CONNECTOR IF NOT EXISTS es WITH ('connector.class'='{ES}', "
                     f"'key.ignore'=true, 'batch.size'=10, \"Topics\"='a');")
    assert isinstance(create, ast.CreateConnector)
    assert (create.kind, create.name, create.if_not_exists) == ("SINK", "ES", True)
    assert create.config == {"connector.class": ES, "key.ignore": "true", "batch.size": "10", "Topics": "a"}
    [show] = parse("SHOW SINK CONNECTORS;")
    assert isinstance(show, ast.Show) and (show.what, show.connector_kind) == ("CONNECTORS", "SINK")
    [show_all] = parse("LIST CONNECTORS;")
    assert isinstance(show_all, ast.Show) and show_all.connector_kind is None
    [describe] = parse('DESCRIBE CONNECTOR "my-sink";')
    assert isinstance(describe, ast.Describe) and describe.connector and describe.name == "my-sink"
    [drop] = parse("DROP CONNECTOR IF EXISTS es;")
    assert isinstance(drop, ast.DropConnector) and drop.if_exists and drop.name == "ES"
    # a source named CONNECTOR is still a source
    [plain] = parse("DESCRIBE connector;")
    assert isinstance(plain, ast.Describe) and not plain.connector and plain.name == "CONNECTOR"


def test_a_connector_without_with_is_a_syntax_error_with_its_position() -> None:
    with pytest.raises(ParseError) as e:
        parse("CREATE SINK CONNECTOR es;")
    assert "line 1:" in str(e.value)


def test_elasticsearch_config_defaults_and_values() -> None:
    cls, cfg = parse_sink("ES", "SINK", es_config(**{"key.ignore": "true", "write.method": "upsert",
                                                     "behavior.on.null.values": "delete",
                                                     "topic.index.map": "WORDS:words-v2", "max.retries": "7"}))
    assert cls.name == ES
    assert isinstance(cfg, ElasticsearchSinkConfig)
    assert (cfg.key_ignore, cfg.write_method, cfg.null_values, cfg.max_retries) == (True, "UPSERT", "DELETE", 7)
    assert cfg.index("WORDS") == "words-v2" and cfg.index("Other") == "other"
    assert cfg.malformed == "WARN"  # streamsql's default: a rejected document never stops the connector
    assert cfg.value_converter.kind == "json" and cfg.key_converter.kind == "string"
    # Connect's short alias names the same class
    assert parse_sink("ES", "SINK", es_config(**{"connector.class": "ElasticsearchSinkConnector"}))[0].name == ES


@pytest.mark.parametrize(("config", "message"), [
    ({"connector.class": "com.example.Nope", "topics": "a"},
     "Failed to find any class that implements Connector and which name matches com.example.Nope"),
    ({"topics": "a"}, "missing the required key 'connector.class'"),
    (es_config(**{"behaviour.on.null.values": "delete"}),
     f"Unknown configuration 'behaviour.on.null.values' for connector {ES}. "
     f"Did you mean 'behavior.on.null.values'?"),
    (es_config(**{"connection.url": "localhost:9200"}),
     "Invalid value localhost:9200 for configuration connection.url"),
    (es_config(**{"connection.url": ""}), 'Missing required configuration "connection.url"'),
    (es_config(**{"key.ignore": "yes"}), "Invalid value yes for configuration key.ignore"),
    (es_config(**{"batch.size": "many"}), "Invalid value many for configuration batch.size"),
    (es_config(**{"write.method": "replace"}), "String must be one of: insert, upsert"),
    (es_config(topics=""), "'topics' is missing or empty"),
    (es_config(**{"transforms": "x"}), "Connector config key 'transforms' is not supported"),
    (es_config(**{"value.converter": "com.example.Conv"}), "Invalid value com.example.Conv for configuration "
                                                           "value.converter"),
    (es_config(**{"value.converter": "io.confluent.connect.avro.AvroConverter"}),
     "needs 'value.converter.schema.registry.url'"),
    (es_config(**{"value.converter.nope": "1"}), "Unknown converter setting 'value.converter.nope'"),
    (es_config(**{"topic.index.map": "a=b"}), "configuration topic.index.map"),
])
def test_bad_connector_configs_name_the_key(config: dict[str, str], message: str) -> None:
    with pytest.raises(ConnectorError) as e:
        parse_sink("ES", "SINK", config)
    assert message in str(e.value)


def test_a_sink_class_refuses_create_source_connector() -> None:
    with pytest.raises(ConnectorError, match="is a sink connector: use CREATE SINK CONNECTOR"):
        parse_sink("ES", "SOURCE", es_config())


def test_converters_read_connect_layouts() -> None:
    json_conv = Converter("org.apache.kafka.connect.json.JsonConverter", "json")
    assert json_conv.decode(b'{"a": 1}') == {"a": 1}
    assert json_conv.decode(b'{"schema": {"type": "struct"}, "payload": {"a": 2}}') == {"a": 2}
    assert json_conv.decode(None) is None
    with pytest.raises(RecordError, match="JsonConverter cannot read the bytes"):
        json_conv.decode(b"{not json")
    assert Converter("x", "int32").decode(b"\x00\x00\x00\x2a") == 42
    assert Converter("x", "int64").decode(b"\x00" * 7 + b"\x05") == 5
    with pytest.raises(RecordError):
        Converter("x", "int32").decode(b"\x00")
    assert Converter("x", "string").decode("héllo".encode()) == "héllo"
    with pytest.raises(RecordError, match="magic byte"):
        Converter("x", "json_sr").decode(b'{"a": 1}')
    assert Converter("x", "json_sr").decode(b"\x00\x00\x00\x00\x01" + b'{"a": 1}') == {"a": 1}


def test_document_ids_from_keys() -> None:
    assert _document_id("alice") == "alice"
    assert _document_id(7) == "7"
    assert _document_id({"REGION": "eu", "ID": 3}) == "eu+3"  # composite keys joined (Connect refuses them)
    assert _document_id(None) is None


def test_s3_object_names_use_the_directory_and_file_delimiters() -> None:
    """Connect's S3 sink names an object <topics.dir>/<topic>/partition=<p>/<topic>+<p>+<offset>,
    its parts joined by ``directory.delim`` and the file name's by ``file.delim``."""
    from streamsql.connectors.s3 import S3SinkConfig

    def object_path(**keys: str) -> str:
        _cls, cfg = parse_sink("T", "SINK", {"connector.class": "S3SinkConnector", "topics": "quotes",
                                             "s3.bucket.name": "b", "flush.size": "1",
                                             "format.class": "io.confluent.connect.s3.format.json.JsonFormat",
                                             **keys})
        assert isinstance(cfg, S3SinkConfig)
        return cfg.object_path("quotes", 3, 42)

    assert object_path() == "b/topics/quotes/partition=3/quotes+3+0000000042.json"
    assert object_path(**{"file.delim": "_", "directory.delim": "|"}) == \
        "b/topics|quotes|partition=3|quotes_3_0000000042.json"
    with pytest.raises(ConnectorError, match="Invalid value '' for configuration file.delim"):
        object_path(**{"file.delim": ""})
