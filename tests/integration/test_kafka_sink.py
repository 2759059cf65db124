"""The Kafka sink: streaming writer, ``write_arrow`` and ``produce_dataframe`` write exactly the
key, value, timestamp and headers they are given, tombstones as null values, and partition keys
the way the Java client does."""

from __future__ import annotations

import json
import pyarrow as pa
import pytest
from pyspark.errors import StreamingQueryException

from streamsql.formats.base import FormatSpec
from streamsql.kafka.admin import KafkaAdmin
from streamsql.kafka.datasource import SHORT_NAME
from streamsql.kafka.sink import produce_dataframe, write_arrow
from streamsql.types import BIGINT, STRING, Column

pytestmark = pytest.mark.integration

KEY_SPEC = FormatSpec("KAFKA", (Column("K", STRING, "key"),)).to_json()
VALUE_SPEC = FormatSpec("JSON", (Column("ID", BIGINT), Column("NAME", STRING))).to_json()


@pytest.fixture(scope="module")
def admin(bootstrap: str) -> KafkaAdmin:
    return KafkaAdmin(bootstrap)


def java_partition(key: bytes, partitions: int) -> int:
    """org.apache.kafka.common.utils.Utils.murmur2, as the Java producer's default partitioner uses it."""
    m, r, length = 0x5BD1E995, 24, len(key)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(key[i:i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    tail = key[length - length % 4:]
    if len(tail) >= 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if len(tail) >= 1:
        h ^= tail[0]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return (h & 0x7FFFFFFF) % partitions


def sink_options(bootstrap: str, topic: str) -> dict[str, str]:
    return {"kafka.bootstrap.servers": bootstrap, "topic": topic, "keySpec": KEY_SPEC, "valueSpec": VALUE_SPEC}


def test_streaming_passthrough_keeps_key_value_timestamp_headers(spark, admin, bootstrap, topic_name, tmp_path) -> None:  # type: ignore[no-untyped-def]
    src, dst = topic_name("sin"), topic_name("sout")
    admin.create_topic(src)
    admin.create_topic(dst, partitions=3)
    admin.produce(src, b"k1", b'{"ID":1,"NAME":"a"}', timestamp_ms=1_600_000_000_000, headers=[("h", b"1"), ("h", None)])
    admin.produce(src, b"k2", None, timestamp_ms=1_600_000_000_001)  # tombstone
    admin.produce(src, b"k3", b'{"ID":3,"NAME":null}', timestamp_ms=1_600_000_000_002)
    df = (spark.readStream.format(SHORT_NAME)
          .options(**sink_options(bootstrap, src), startingOffsets="earliest").load())
    q = (df.writeStream.format(SHORT_NAME).options(**sink_options(bootstrap, dst))
         .option("checkpointLocation", str(tmp_path)).trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None
    out = {r.key: r for r in admin.read_all(dst)}
    assert set(out) == {b"k1", b"k2", b"k3"}
    assert out[b"k1"].value == b'{"ID":1,"NAME":"a"}'
    assert out[b"k1"].headers == [("h", b"1"), ("h", None)]
    assert out[b"k2"].value is None
    assert out[b"k3"].value == b'{"ID":3,"NAME":null}' and out[b"k3"].headers == []
    assert [out[k].timestamp for k in (b"k1", b"k2", b"k3")] == [1_600_000_000_000 + i for i in range(3)]
    for k, r in out.items():
        assert r.partition == java_partition(k, 3), k


def test_write_arrow_encodes_and_produces(admin, bootstrap, topic_name) -> None:  # type: ignore[no-untyped-def]
    t = topic_name("warrow")
    admin.create_topic(t)
    headers_type = pa.list_(pa.struct([("KEY", pa.string()), ("VALUE", pa.binary())]))
    batch = pa.RecordBatch.from_pydict({
        "K": ["a", "b", None],
        "ID": [1, 2, 3],
        "NAME": ["x", None, "z"],
        "ROWTIME": [10, 20, 30],
        "__HEADERS": pa.array([[{"KEY": "q", "VALUE": b"v"}], [], None], headers_type),
        "__TOMBSTONE": [False, True, False],
    })
    assert write_arrow([batch], sink_options(bootstrap, t)) == 3
    recs = admin.read_all(t)
    got = [(r.key, r.value, r.timestamp, r.headers) for r in recs]
    assert got == [(b"a", b'{"ID":1,"NAME":"x"}', 10, [("q", b"v")]), (b"b", None, 20, []),
                   (None, b'{"ID":3,"NAME":"z"}', 30, [])]


def test_null_key_and_null_value_at_timestamp_zero_is_written(admin, bootstrap, topic_name) -> None:  # type: ignore[no-untyped-def]
    """ksqlDB writes a keyless record with a null value as it is (QTT: a null input value through
    a CSAS); timestamp 0 takes the exact-timestamp producer, which used to refuse it."""
    t = topic_name("nullnull")
    admin.create_topic(t)
    batch = pa.RecordBatch.from_pydict({
        "K": pa.array([None, None], pa.string()), "ID": [1, None], "NAME": ["x", None],
        "ROWTIME": [0, 0], "__TOMBSTONE": [False, True],
    })
    assert write_arrow([batch], sink_options(bootstrap, t)) == 2
    got = [(r.key, r.value, r.timestamp) for r in admin.read_all(t)]
    assert got == [(None, b'{"ID":1,"NAME":"x"}', 0), (None, None, 0)]


def test_produce_dataframe_for_foreach_batch(spark, admin, bootstrap, topic_name) -> None:  # type: ignore[no-untyped-def]
    t = topic_name("fb")
    admin.create_topic(t, partitions=2)
    df = spark.createDataFrame([("k%d" % i, i, "n%d" % i, 1000 + i) for i in range(20)], "K STRING, ID BIGINT, NAME STRING, ROWTIME BIGINT")
    assert produce_dataframe(df.repartition(3), sink_options(bootstrap, t)) == 20
    recs = admin.read_all(t)
    assert sorted((r.key, json.loads(r.value)["ID"], r.timestamp) for r in recs) == sorted(
        (b"k%d" % i, i, 1000 + i) for i in range(20))


def test_sink_to_missing_topic_fails_the_query_with_a_clear_error(spark, admin, bootstrap, topic_name, tmp_path) -> None:  # type: ignore[no-untyped-def]
    src, missing = topic_name("src"), topic_name("nosink")
    admin.create_topic(src)
    df = spark.readStream.format(SHORT_NAME).options(**sink_options(bootstrap, src)).load()
    # Spark asks the data source for its writer when the first batch runs, so the KafkaError
    # fails the query (STREAM_FAILED, seen at awaitTermination) rather than start()
    q = (df.writeStream.format(SHORT_NAME).options(**sink_options(bootstrap, missing))
         .option("checkpointLocation", str(tmp_path)).trigger(availableNow=True).start())
    with pytest.raises(StreamingQueryException, match=f"KafkaError: Topic '{missing}' does not exist") as info:
        q.awaitTermination(60)
    assert info.value.getCondition() == "STREAM_FAILED"
    assert not admin.topic_exists(missing)


def test_raw_copy_without_specs(spark, admin, bootstrap, topic_name) -> None:  # type: ignore[no-untyped-def]
    """No specs on either side: the raw source's rows copy a topic byte for byte (batch read)."""
    src, dst = topic_name("rawsrc"), topic_name("rawdst")
    admin.create_topic(src)
    admin.create_topic(dst)
    admin.produce(src, b"k", b"v", timestamp_ms=42, headers=[("a", b"1")])
    admin.produce(src, None, None, timestamp_ms=43)
    df = spark.read.format(SHORT_NAME).options(**{"kafka.bootstrap.servers": bootstrap, "topic": src}).load()
    opts = {"kafka.bootstrap.servers": bootstrap, "topic": dst}
    assert produce_dataframe(df, opts) == 2
    assert [(r.key, r.value, r.timestamp, r.headers) for r in admin.read_all(dst)] == [
        (b"k", b"v", 42, [("a", b"1")]), (None, None, 43, [])]


def test_exact_timestamp_writes_never_create_a_missing_topic(admin, bootstrap, topic_name) -> None:  # type: ignore[no-untyped-def]
    """The timestamp-0 producer asked for metadata with auto-creation on: a sink topic deleted under
    it came back (with the broker's default partition count) at its next metadata refresh."""
    from streamsql.errors import KafkaError

    t = topic_name("never_created")
    batch = pa.RecordBatch.from_pydict({"K": pa.array(["k"], pa.string()), "ID": [1], "NAME": ["x"],
                                        "ROWTIME": [0], "__TOMBSTONE": [False]})
    with pytest.raises(KafkaError, match=t):
        write_arrow([batch], sink_options(bootstrap, t))
    assert t not in admin.topics()


def test_a_record_kafka_never_acknowledges_fails_the_write() -> None:
    """The sink's producer reports failed deliveries only (``delivery.report.only.error``): a
    record that times out undelivered still fails the write instead of being counted written."""
    from streamsql.errors import KafkaError
    from streamsql.kafka.broker import free_port

    batch = pa.RecordBatch.from_pydict({"K": ["a"], "ID": [1], "NAME": ["x"], "ROWTIME": [10],
                                        "__TOMBSTONE": [False]})
    options = {**sink_options(f"127.0.0.1:{free_port()}", "nowhere"), "kafka.message.timeout.ms": "1500"}
    with pytest.raises(KafkaError, match="cannot write to topic 'nowhere': .*[Tt]imed out"):
        write_arrow([batch], options)
