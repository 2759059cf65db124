"""The S3 sink connector against a real S3-compatible server process (``moto_server``) and a local
directory: the object writer alone, then seed 003's outputs run by the engine from Kafka."""

from __future__ import annotations

import gzip
import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streamsql.connectors.classes import parse_sink
from streamsql.connectors.s3 import S3SinkConfig, WriteFailed
from streamsql.connectors.sink import BadRecords, RawRecord, write_all
from streamsql.kafka.processing_log import LogTarget
from streamsql.seeds import PIPELINES_DIR
from streamsql.sql import parse
from tests.support.moto import moto_server

pytestmark = pytest.mark.integration

S3 = "io.confluent.connect.s3.S3SinkConnector"
JSON_FORMAT = "io.confluent.connect.s3.format.json.JsonFormat"
BYTES_FORMAT = "io.confluent.connect.s3.format.bytearray.ByteArrayFormat"
AVRO_FORMAT = "io.confluent.connect.s3.format.avro.AvroFormat"


@pytest.fixture(scope="module")
def s3_url() -> Iterator[str]:
    """A moto S3 server process (tests/support/moto.py)."""
    with moto_server() as url:
        yield url


@pytest.fixture(autouse=True)
def _aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")


def bucket(url: str, name: str) -> Any:
    import boto3

    client = boto3.client("s3", endpoint_url=url, region_name="us-east-1",
                          aws_access_key_id="test", aws_secret_access_key="test")
    client.create_bucket(Bucket=name)
    return client


def objects(client: Any, name: str) -> dict[str, bytes]:
    listed = client.list_objects_v2(Bucket=name).get("Contents") or []
    return {o["Key"]: client.get_object(Bucket=name, Key=o["Key"])["Body"].read() for o in listed}


def config(**keys: str) -> S3SinkConfig:
    _cls, cfg = parse_sink("T", "SINK", {"connector.class": S3, "topics": "quotes", "s3.bucket.name": "b",
                                         "s3.region": "us-east-1", **keys})
    assert isinstance(cfg, S3SinkConfig)
    return cfg


def write(cfg: S3SinkConfig, records: list[RawRecord]) -> BadRecords:
    """One task's writes (the processing log only collected, not sent)."""
    bad = BadRecords(cfg.name, LogTarget("unused:9092", None))
    write_all(cfg, records, bad)
    return bad


def rec(partition: int, offset: int, value: bytes | None) -> RawRecord:
    return RawRecord(None, value, "quotes", partition, offset, 0)


def test_json_objects_named_as_connect_names_them_and_rewritten_not_duplicated(s3_url: str) -> None:
    client = bucket(s3_url, "json-bucket")
    cfg = config(**{"s3.bucket.name": "json-bucket", "store.url": s3_url, "format.class": JSON_FORMAT,
                    "flush.size": "2"})
    batch = [rec(0, o, json.dumps({"n": o}).encode()) for o in range(5)] + [rec(1, 7, b'{"n": 7}')]
    write(cfg, batch)
    write(cfg, batch)  # the batch replayed after a crash: the same objects again
    found = objects(client, "json-bucket")
    assert sorted(found) == ["topics/quotes/partition=0/quotes+0+0000000000.json",
                             "topics/quotes/partition=0/quotes+0+0000000002.json",
                             "topics/quotes/partition=0/quotes+0+0000000004.json",
                             "topics/quotes/partition=1/quotes+1+0000000007.json"]
    assert found["topics/quotes/partition=0/quotes+0+0000000002.json"] == b'{"n":2}\n{"n":3}\n'


def test_bytes_gzip_and_bad_records_in_a_local_directory(tmp_path: Path) -> None:
    store = f"file://{tmp_path}"
    raw = config(**{"store.url": store, "format.class": BYTES_FORMAT, "flush.size": "10", "topics.dir": "out"})
    write(raw, [rec(0, 0, b"\x1f\x8b one"), rec(0, 1, b"two")])
    assert (tmp_path / "b/out/quotes/partition=0/quotes+0+0000000000.bin").read_bytes() == b"\x1f\x8b one\ntwo\n"

    packed = config(**{"store.url": store, "format.class": JSON_FORMAT, "flush.size": "10",
                       "s3.compression.type": "gzip", "behavior.on.null.values": "ignore"})
    bad = write(packed, [rec(0, 3, b'{"a": 1}'), rec(0, 4, b"{oops"), rec(0, 5, None), rec(0, 6, b'{"a": 2}')])
    body = gzip.decompress((tmp_path / "b/topics/quotes/partition=0/quotes+0+0000000003.json.gz").read_bytes())
    assert body == b'{"a":1}\n{"a":2}\n'
    assert [e["message"]["deserializationError"]["offset"] for e in bad.entries] == [4]
    with pytest.raises(WriteFailed, match="behavior.on.null.values"):
        write(config(**{"store.url": store, "format.class": JSON_FORMAT, "flush.size": "1"}), [rec(0, 9, None)])


def test_s3_config_errors_name_the_key() -> None:
    from streamsql.connectors.config import ConnectorError

    for keys, message in [({"format.class": JSON_FORMAT}, 'Missing required configuration "flush.size"'),
                          ({"flush.size": "1"}, "for configuration format.class"),
                          ({"flush.size": "1", "format.class": AVRO_FORMAT}, "needs value.converter"),
                          ({"flush.size": "0", "format.class": JSON_FORMAT}, "Value must be at least 1"),
                          ({"flush.size": "1", "format.class": JSON_FORMAT, "store.url": "ftp://x"}, "store.url")]:
        with pytest.raises(ConnectorError, match=message):
            config(**keys)


# --- seed 003 end to end ------------------------------------------------------------------------------


SEED_003 = [PIPELINES_DIR / "cheapest_flight.sql", PIPELINES_DIR / "cheapest_flight_s3.sql"]
#: 2020-08-01T09:00:00Z, the talk's example batch timestamp
SEARCH_TIME_MS = 1_596_272_400_000


def _md5_uuid(text: str) -> str:
    import hashlib
    import uuid

    return str(uuid.UUID(bytes=hashlib.md5(text.encode()).digest()))


def test_seed_003_on_the_sources_own_lines_enriched_cheapest_and_to_s3(engine, topic_name, s3_url):  # type: ignore[no-untyped-def]
    """queries/cheapest_flight.sql then queries/cheapest_flight_s3.sql as they are (topic names
    made unique), on searches in the source's own format (five-field CSV lines, gzipped, one batch
    per message): every line enriched with its own uuid, its batch's uuid and timestamp; every
    batch's cheapest quote and count, with the batch uuid in key and value; the enriched batches
    in S3 decompressing to the enriched lines; the Avro objects naming their batches."""
    import fastavro

    from streamsql.conformance.registry_server import RegistryServer
    from tests.support.processing_log import deserialization_errors

    client = bucket(s3_url, "seed-003")
    names = ("cflight_searches", "cflight_batches", "cflight_enriched", "cflight_cheapest", "cflight_cheapest_avro")
    topics = {name: topic_name(name) for name in names}
    searches = [  # (lines, cheapest quote, quotes counted): duplicates, blanks, a short line, a bad price
        (["LHR,IST,2020-08-01,169.99,Y", "LHR,IST,2020-08-01,149.50,J", "LHR,IST,2020-08-01,169.99,Y", ""],
         149.5, 3),
        (["LHR,JFK,2020-08-02,420.00,F"], 420.0, 1),
        (["IST,LHR,2020-08-03,99.00,Y", "IST,LHR,2020-08-03", "IST,LHR,2020-08-03,cheap,Y",
          "IST,LHR,2020-08-03,89.10,W"], 89.1, 2),
    ]
    source = topics["cflight_searches"]
    engine.admin.create_topic(source, 1)
    for i, (lines, _cheapest, _n) in enumerate(searches):
        engine.admin.produce(source, None, gzip.compress("\n".join(lines).encode()), SEARCH_TIME_MS + i * 1000,
                             flush=False)
    engine.admin.produce(source, None, gzip.compress(b"\n\n"), SEARCH_TIME_MS + 5000, flush=False)  # no lines
    engine.admin.flush()

    # the expected enrichment, from the documented rule (offsets 0, 1, 2 of partition 0)
    batch_ids = [_md5_uuid(f"cflight_searches/0/{offset}") for offset in range(len(searches))]
    enriched = [[f"{line},{_md5_uuid(f'{batch}/{n}')},{batch},2020-08-01T09:00:0{i}"
                 for n, line in enumerate([x for x in lines if x], 1)]
                for i, ((lines, _c, _n), batch) in enumerate(zip(searches, batch_ids))]
    cheapest = {batch: (price, n) for batch, (_lines, price, n) in zip(batch_ids, searches)}

    with RegistryServer() as registry:
        engine.execute(f"SET 'ksql.schema.registry.url'='{registry.url}';")
        engine.session.variables.update(s3_url=s3_url, schema_registry_url=registry.url)  # run --define …
        for path in SEED_003:
            text = path.read_text()
            for name, unique in topics.items():
                text = text.replace(f"'{name}'", f"'{unique}'")
            for stmt in parse(text, variables=engine.session.variables):
                engine.execute_statement(stmt)
        engine.wait_until_idle()

        # the transform: each message's lines enriched, one gzipped message per non-empty batch
        out = [gzip.decompress(rec.value).decode().split("\n")
               for rec in engine.admin.read_all(topics["cflight_enriched"])]
        assert out == enriched
        line_ids = [line.split(",")[-3] for batch in out for line in batch]  # short lines too
        assert len(set(line_ids)) == len(line_ids) == 8

        # the cheapest quote and count of every batch, its uuid in key and value
        latest = {}
        for rec in engine.admin.read_all(topics["cflight_cheapest"]):
            batch_uuid, price, n = rec.value.decode().split(",")
            assert batch_uuid == rec.key.decode()
            latest[batch_uuid] = (float(price), int(n))
        assert latest == cheapest
        [pulled] = engine.execute(f"SELECT batch_uuid, cheapest_quote, quotes FROM cflight_cheapest "
                                  f"WHERE batchuuid = '{batch_ids[2]}';")
        assert list(pulled.rows(timeout=30)) == [[batch_ids[2], 89.1, 2]]
        # the short line and the bad price went to the processing log, with the enriched offset
        errors = deserialization_errors(engine.admin, engine.processing_log_topic, topics["cflight_enriched"])
        assert any("expected 8 columns, got 6" in e["errorMessage"] for e in errors)
        assert any("'GBPPRICE'" in e["errorMessage"] and e["offset"] == 2 for e in errors)

        # S3: the connectors follow their topics through another query each; wait for them, bounded
        deadline = time.monotonic() + 60
        while True:
            found = objects(client, "seed-003")
            avro = {k: v for k, v in found.items() if k.startswith(f"topics/{topics['cflight_cheapest_avro']}/")}
            raw = {k: v for k, v in found.items() if k.startswith(f"batches/{topics['cflight_enriched']}/")}
            rows = [row for name in sorted(avro) for row in fastavro.reader(io.BytesIO(avro[name]))]
            final = {row["BATCH_UUID"]: (row["CHEAPEST_QUOTE"], row["QUOTES"]) for row in rows}
            if (final == cheapest and len(raw) == len(enriched)) or time.monotonic() > deadline:
                break
            time.sleep(1)
    assert [gzip.decompress(raw[k]).decode().split("\n") for k in sorted(raw)] == enriched
    assert sorted(raw)[0].endswith(f"{topics['cflight_enriched']}+0+0000000000.csv.gz")
    assert final == cheapest and all(row["BATCH_UUID"] in cheapest for row in rows)


def test_file_stream_sink_appends_each_value_as_a_line(tmp_path: Path) -> None:
    from streamsql.connectors.config import ConnectorError
    from streamsql.connectors.file import FileSinkConfig

    target = tmp_path / "out" / "lines.txt"
    _cls, cfg = parse_sink("F", "SINK", {"connector.class": "FileStreamSink", "topics": "quotes",
                                         "file": str(target)})
    assert isinstance(cfg, FileSinkConfig)
    bad = BadRecords("F", LogTarget("unused:9092", None))
    for records in ([rec(0, 0, b'{"a": 1}'), rec(0, 1, b'"text"')], [rec(1, 0, b"{bad"), rec(1, 1, b"[1, 2]")]):
        write_all(cfg, records, bad)
    assert target.read_text() == '{"a":1}\ntext\n[1,2]\n'
    assert [e["message"]["deserializationError"]["offset"] for e in bad.entries] == [0]
    with pytest.raises(ConnectorError, match="absolute path"):
        parse_sink("F", "SINK", {"connector.class": "FileStreamSink", "topics": "q", "file": "rel.txt"})
