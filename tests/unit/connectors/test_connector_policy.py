"""Where connectors may write (connectors/policy.py) and how their secrets are shown
(connectors/config.py): the paths and URLs an attacker would try."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import streamsql
from streamsql.connectors.classes import parse_sink
from streamsql.connectors.config import ConnectorError, shown_config, shown_statement
from streamsql.connectors.file import FileSinkConfig
from streamsql.connectors.policy import ConnectorPolicy
from streamsql.connectors.sink import BadRecords, RawRecord, write_all
from streamsql.kafka.processing_log import LogTarget
from streamsql.seeds import FUNCTIONS_DIR
from streamsql.sql import ast, parse


def file_sink(path: str) -> FileSinkConfig:
    _cls, cfg = parse_sink("F", "SINK", {"connector.class": "FileStreamSink", "topics": "t", "file": path})
    assert isinstance(cfg, FileSinkConfig)
    return cfg


@pytest.fixture
def policy(tmp_path: Path) -> ConnectorPolicy:
    (tmp_path / "data").mkdir()
    (tmp_path / "ext").mkdir()
    return ConnectorPolicy.from_properties({}, tmp_path / "data", str(tmp_path / "ext"))


def test_files_go_under_the_data_directorys_files_by_default(policy: ConnectorPolicy, tmp_path: Path) -> None:
    allowed = policy.apply(file_sink(str(tmp_path / "data" / "files" / "sub" / "out.txt")))
    assert allowed.file == str(tmp_path / "data" / "files" / "sub" / "out.txt")
    assert allowed.root == str(tmp_path / "data" / "files")
    # written through the writer: the line lands where it was allowed
    write_all(allowed, [RawRecord(None, b'"x"', "t", 0, 0, None)], BadRecords("F", LogTarget("unused:1", None)))
    assert Path(allowed.file).read_text() == "x\n"


def escapes(tmp_path: Path) -> list[str]:
    files = tmp_path / "data" / "files"
    return [str(files / ".." / "escaped.txt"), str(files / "a" / ".." / ".." / ".." / "escaped.txt"),
            str(tmp_path / "data" / "checkpoints" / "x"), "/tmp/escaped.txt", "/etc/passwd",
            str(Path(FUNCTIONS_DIR) / "evil.py"), str(Path(streamsql.__file__).parent / "evil.py"),
            str(Path(sys.prefix) / "lib" / "evil.pth"), str(tmp_path / "ext" / "evil.py"),
            str(files) + "-sibling/x.txt"]


def test_paths_outside_the_directory_or_into_code_are_refused(policy: ConnectorPolicy, tmp_path: Path) -> None:
    for path in escapes(tmp_path):
        with pytest.raises(ConnectorError, match="configuration file") as e:
            policy.apply(file_sink(path))
        assert "loads code from" in e.value.message or "under" in e.value.message, path


def test_a_symlink_out_of_the_directory_is_an_escape(policy: ConnectorPolicy, tmp_path: Path) -> None:
    files = tmp_path / "data" / "files"
    files.mkdir(parents=True)
    (files / "link").symlink_to(tmp_path / "ext")
    with pytest.raises(ConnectorError, match="loads code from"):
        policy.apply(file_sink(str(files / "link" / "evil.py")))
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (files / "out").symlink_to(outside)
    with pytest.raises(ConnectorError, match="under"):
        policy.apply(file_sink(str(files / "out" / "x.txt")))


def test_a_symlink_made_after_the_check_is_refused_by_the_writer(policy: ConnectorPolicy, tmp_path: Path) -> None:
    target = tmp_path / "data" / "files" / "late.txt"
    allowed = policy.apply(file_sink(str(target)))
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched\n")
    target.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(victim, target)
    with pytest.raises(ConnectorError, match="outside"):
        write_all(allowed, [RawRecord(None, b'"x"', "t", 0, 0, None)], BadRecords("F", LogTarget("unused:1", None)))
    assert victim.read_text() == "untouched\n"


def test_the_operator_may_move_the_directory_but_never_into_code(tmp_path: Path) -> None:
    moved = ConnectorPolicy.from_properties({"streamsql.connect.file.dir": str(tmp_path / "exports")},
                                            tmp_path / "data", None)
    assert moved.apply(file_sink(str(tmp_path / "exports" / "a.txt"))).root == str(tmp_path / "exports")
    into_code = ConnectorPolicy.from_properties({"streamsql.connect.file.dir": str(FUNCTIONS_DIR)},
                                                tmp_path / "data", None)
    with pytest.raises(ConnectorError, match="loads code from"):
        into_code.apply(file_sink(str(Path(FUNCTIONS_DIR) / "evil.py")))


def test_an_s3_sink_into_a_local_directory_obeys_the_file_directory(policy: ConnectorPolicy, tmp_path: Path) -> None:
    def s3(url: str) -> object:
        return parse_sink("S", "SINK", {"connector.class": "S3SinkConnector", "topics": "t", "s3.bucket.name": "b",
                                        "format.class": "io.confluent.connect.s3.format.json.JsonFormat",
                                        "flush.size": "1", "store.url": url,
                                        "storage.class": "io.confluent.connect.s3.storage.S3Storage"})[1]

    policy.apply(s3(f"file://{tmp_path}/data/files/bucket"))
    with pytest.raises(ConnectorError, match="store.url"):
        policy.apply(s3(f"file://{FUNCTIONS_DIR}"))
    with pytest.raises(ConnectorError, match="store.url"):
        policy.apply(s3("file:///tmp/elsewhere"))


ES = "io.confluent.connect.elasticsearch.ElasticsearchSinkConnector"


def es(url: str, **extra: str) -> object:
    return parse_sink("E", "SINK", {"connector.class": ES, "connection.url": url, "topics": "t", **extra})[1]


@pytest.mark.parametrize("url, allowed", [
    ("http://es.internal:9200", True), ("http://ES.INTERNAL:9200/", True), ("http://u:p@es.internal:9200", True),
    ("https://search.internal/prod/x", True), ("https://search.internal/prod", True),
    ("http://es.internal:9201", False), ("http://es.internal:9200.evil.com", False),
    ("http://evil.com/?es.internal:9200", False), ("http://es.internal.evil.com:9200", False),
    ("https://search.internal/production", False), ("http://search.internal/prod/x", False),
    ("http://169.254.169.254/latest", False), ("http://es.internal@evil.com:9200", False),
    ("http://metrics:80", True), ("http://metrics", True), ("https://metrics", False),
])
def test_urls_are_checked_against_the_allowlist(tmp_path: Path, url: str, allowed: bool) -> None:
    policy = ConnectorPolicy.from_properties(
        {"streamsql.connect.url.allowlist": "es.internal:9200, https://search.internal/prod/,metrics:80"},
        tmp_path, None)
    if allowed:
        policy.apply(es(url))
    else:
        with pytest.raises(ConnectorError, match="connection.url"):
            policy.apply(es(url))
    # without an allow-list every URL is allowed, as before
    ConnectorPolicy.from_properties({}, tmp_path, None).apply(es(url))


def test_a_converters_registry_url_is_checked_too(tmp_path: Path) -> None:
    policy = ConnectorPolicy.from_properties({"streamsql.connect.url.allowlist": "es:9200"}, tmp_path, None)
    cfg = es("http://es:9200", **{"value.converter": "io.confluent.connect.avro.AvroConverter",
                                 "value.converter.schema.registry.url": "http://attacker:8081"})
    with pytest.raises(ConnectorError, match="value.converter.schema.registry.url"):
        policy.apply(cfg)


def test_connector_secrets_are_shown_hidden() -> None:
    config = {"connector.class": ES, "connection.url": "http://elastic:s3cr3t@es:9200", "connection.username": "u",
              "connection.password": "pw'1", "value.converter.basic.auth.user.info": "a:b",
              "aws.secret.access.key": "AKS"}
    shown = shown_config(config)
    assert shown["connection.password"] == shown["value.converter.basic.auth.user.info"] == "[hidden]"
    assert shown["aws.secret.access.key"] == "[hidden]" and shown["connection.username"] == "u"
    assert shown["connection.url"] == "http://elastic:[hidden]@es:9200"
    text = ("CREATE SINK CONNECTOR e WITH ('connector.class'='x', 'connection.password'='pw''1', "
            "\"connection.password\" = 'pw''1', 'connection.url'='http://elastic:s3cr3t@es:9200', 'topics'='t');")
    hidden = shown_statement(text)
    assert "pw" not in hidden and "s3cr3t" not in hidden and hidden.count("[hidden]") == 3
    [stmt] = parse(hidden)  # still a statement
    assert isinstance(stmt, ast.CreateConnector) and stmt.config["topics"] == "t"
