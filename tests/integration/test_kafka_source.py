"""The streaming source against the real broker and a real SparkSession.

Queries run with ``trigger(availableNow=True)`` (or ``processAllAvailable``) into a collecting
``foreachBatch``, so every assertion is about exact batches and rows, never about timing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from pyspark.errors import AnalysisException

from streamsql.errors import KafkaError
from streamsql.formats.base import FormatSpec
from streamsql.kafka.admin import KafkaAdmin
from streamsql.kafka.datasource import SHORT_NAME, read_stream
from streamsql.types import BIGINT, STRING, Column

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def admin(bootstrap: str) -> KafkaAdmin:
    return KafkaAdmin(bootstrap)


def produce(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes | None]], partition: int = 0,
            one_batch: bool = False, **kw: Any) -> None:
    """``one_batch``: linger so all records share one record batch (tansu's end-offset bug)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 200 if one_batch else 0, "log_level": 4})
    for k, v in records:
        p.produce(topic, key=k, value=v, partition=partition, **kw)
    p.flush(10)


class Collector:
    """foreachBatch target: keeps each micro-batch's rows (as dicts) in order."""

    def __init__(self) -> None:
        self.batches: list[list[dict[str, Any]]] = []

    def __call__(self, df, batch_id: int) -> None:  # type: ignore[no-untyped-def]
        self.batches.append([r.asDict(recursive=True) for r in df.collect()])

    @property
    def rows(self) -> list[dict[str, Any]]:
        return [r for b in self.batches for r in b]


def options(bootstrap: str, topic: str, **extra: str) -> dict[str, str]:
    return {"kafka.bootstrap.servers": bootstrap, "topic": topic, "startingOffsets": "earliest", **extra}


def run_available_now(spark, opts: dict[str, str], checkpoint: Path) -> Collector:  # type: ignore[no-untyped-def]
    out = Collector()
    df = spark.readStream.format(SHORT_NAME).options(**opts).load()
    q = (df.writeStream.trigger(availableNow=True).option("checkpointLocation", str(checkpoint))
         .foreachBatch(out).start())
    q.awaitTermination(120)
    assert q.exception() is None
    return out


def test_raw_read_all_fields(spark, admin, bootstrap, topic_name, tmp_path) -> None:  # type: ignore[no-untyped-def]
    t = topic_name("raw")
    admin.create_topic(t, partitions=2)
    admin.produce(t, b"k1", b"v1", timestamp_ms=1_700_000_000_000, headers=[("h", b"x")], partition=0)
    admin.produce(t, None, None, timestamp_ms=1_700_000_000_001, partition=1)
    rows = sorted(run_available_now(spark, options(bootstrap, t), tmp_path).rows, key=lambda r: r["partition"])
    assert rows == [
        {"key": b"k1", "value": b"v1", "topic": t, "partition": 0, "offset": 0, "timestamp": 1_700_000_000_000,
         "headers": [{"key": "h", "value": b"x"}]},
        {"key": None, "value": None, "topic": t, "partition": 1, "offset": 0, "timestamp": 1_700_000_000_001,
         "headers": []},
    ]


def test_under_reported_end_offset_still_delivers_whole_batch(spark, admin, bootstrap, topic_name, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """tansu lists end offset 1 for 5 records produced in one batch; all 5 must arrive with no
    further traffic on the topic."""
    t = topic_name("tansu")
    admin.create_topic(t)
    produce(bootstrap, t, [(None, b"%d" % i) for i in range(5)], one_batch=True)
    out = run_available_now(spark, options(bootstrap, t), tmp_path)
    assert [r["value"] for r in out.rows] == [b"0", b"1", b"2", b"3", b"4"]


def test_earliest_vs_latest(spark, admin, bootstrap, topic_name, tmp_path) -> None:  # type: ignore[no-untyped-def]
    t = topic_name("start")
    admin.create_topic(t)
    produce(bootstrap, t, [(None, b"old1"), (None, b"old2")], one_batch=True)
    assert [r["value"] for r in run_available_now(spark, options(bootstrap, t), tmp_path / "e").rows] == [b"old1", b"old2"]

    out = Collector()
    df = spark.readStream.format(SHORT_NAME).options(**options(bootstrap, t, startingOffsets="latest")).load()
    q = df.writeStream.option("checkpointLocation", str(tmp_path / "l")).foreachBatch(out).start()
    try:
        q.processAllAvailable()  # the first trigger fixes the starting offsets at the end
        produce(bootstrap, t, [(None, b"new1"), (None, b"new2")], one_batch=True)
        q.processAllAvailable()
    finally:
        q.stop()
    assert [r["value"] for r in out.rows] == [b"new1", b"new2"]


def test_max_records_per_batch_splits_available_now(spark, admin, bootstrap, topic_name, tmp_path) -> None:  # type: ignore[no-untyped-def]
    t = topic_name("limit")
    admin.create_topic(t, partitions=2)
    produce(bootstrap, t, [(None, b"a%d" % i) for i in range(6)], partition=0, one_batch=True)
    produce(bootstrap, t, [(None, b"b%d" % i) for i in range(4)], partition=1, one_batch=True)
    out = run_available_now(spark, options(bootstrap, t, maxRecordsPerBatch="4"), tmp_path)
    assert [len(b) for b in out.batches if b] == [4, 4, 2]
    assert sorted(r["value"] for r in out.rows) == sorted([b"a%d" % i for i in range(6)] + [b"b%d" % i for i in range(4)])
    assert len({(r["partition"], r["offset"]) for r in out.rows}) == 10


class GrowingTopic:
    """Shows the source only some partitions of a real topic, then all of them: tansu 0.6 has
    no CreatePartitions, so this is how a topic growing under a running query is simulated."""

    def __init__(self, real, visible: set[int]) -> None:  # type: ignore[no-untyped-def]
        self.real, self.visible = real, visible

    def partitions(self) -> list[int]:
        return [p for p in self.real.partitions() if p in self.visible]

    def ends(self, parts=None):  # type: ignore[no-untyped-def]
        return self.real.ends(self.partitions() if parts is None else parts)

    def earliest(self, parts):  # type: ignore[no-untyped-def]
        return self.real.earliest(parts)


def test_new_partition_is_picked_up_from_earliest(admin, bootstrap, topic_name) -> None:  # type: ignore[no-untyped-def]
    from streamsql.kafka.decoding import source_schema
    from streamsql.kafka.options import SourceOptions
    from streamsql.kafka.source import KafkaStreamReader
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    t = topic_name("grow")
    admin.create_topic(t, partitions=2)
    produce(bootstrap, t, [(None, b"p0")])
    opts = SourceOptions.parse(options(bootstrap, t, startingOffsets="latest"))
    reader = KafkaStreamReader(opts, source_schema(opts))
    reader._ends = GrowingTopic(reader._tracker(), {0})
    start = reader.initialOffset()
    assert start == {"0": 1}
    produce(bootstrap, t, [(None, b"p1-a"), (None, b"p1-b")], partition=1, one_batch=True)
    produce(bootstrap, t, [(None, b"p0-new")], partition=0)
    reader._ends.visible.add(1)
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end == {"0": 2, "1": 2}
    parts = reader.partitions(start, end)
    assert [(p.partition, p.start, p.end) for p in parts] == [(0, 1, 2), (1, 0, 2)]
    values = [v.as_py() for p in parts for b in reader.read(p) for v in b.column("value")]
    assert values == [b"p0-new", b"p1-a", b"p1-b"]


def test_missing_topic_fails_at_definition(spark, bootstrap, topic_name) -> None:  # type: ignore[no-untyped-def]
    t = topic_name("nope")
    with pytest.raises(KafkaError, match=f"Topic '{t}' does not exist"):
        read_stream(spark, options(bootstrap, t))
    # plain Spark API: at load(), Spark wraps the data source's KafkaError in an AnalysisException
    with pytest.raises(AnalysisException, match=f"KafkaError: Topic '{t}' does not exist") as info:
        spark.readStream.format(SHORT_NAME).options(**options(bootstrap, t)).load()
    assert info.value.getCondition() == "PYTHON_DATA_SOURCE_ERROR"


def test_restart_from_checkpoint_no_loss_no_duplicates(spark, admin, bootstrap, topic_name, tmp_path) -> None:  # type: ignore[no-untyped-def]
    t = topic_name("restart")
    admin.create_topic(t, partitions=2)
    produce(bootstrap, t, [(None, b"a%d" % i) for i in range(3)], partition=0, one_batch=True)
    produce(bootstrap, t, [(None, b"b%d" % i) for i in range(2)], partition=1, one_batch=True)
    first = run_available_now(spark, options(bootstrap, t, maxRecordsPerBatch="2"), tmp_path)
    produce(bootstrap, t, [(None, b"a%d" % i) for i in range(3, 6)], partition=0, one_batch=True)
    produce(bootstrap, t, [(None, b"b%d" % i) for i in range(2, 4)], partition=1, one_batch=True)
    second = run_available_now(spark, options(bootstrap, t, maxRecordsPerBatch="2"), tmp_path)
    seen = [(r["partition"], r["offset"]) for r in first.rows + second.rows]
    assert len(seen) == len(set(seen)) == 10
    assert len(first.rows) == 5 and len(second.rows) == 5
    last = max((p for p in (tmp_path / "offsets").iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    offsets = json.loads(last.read_text().splitlines()[-1])
    assert offsets == {"0": 6, "1": 4}  # string keys, ascending partitions


def _spec(name: str, *cols: Column) -> str:
    return FormatSpec(name, tuple(cols)).to_json()


def test_decoded_read_with_headers_tombstones_and_processing_log(spark, admin, bootstrap, topic_name, tmp_path) -> None:  # type: ignore[no-untyped-def]
    t, plog = topic_name("dec"), topic_name("plog")
    admin.create_topic(t)
    admin.create_topic(plog)
    hdr = [("src", b"a"), ("src", b"b")]
    admin.produce(t, b"k1", b'{"ID": 1, "NAME": "x"}', timestamp_ms=1000, headers=hdr)
    admin.produce(t, b"k2", b"not json", timestamp_ms=2000)
    admin.produce(t, b"k3", b'{"ID": "zz"}', timestamp_ms=3000)
    admin.produce(t, b"k4", None, timestamp_ms=4000)
    admin.produce(t, b"k5", b'{"id": 5}', timestamp_ms=5000)
    opts = options(
        bootstrap, t,
        keySpec=_spec("KAFKA", Column("K", STRING, "key")),
        valueSpec=_spec("JSON", Column("ID", BIGINT), Column("NAME", STRING)),
        headerColumns=json.dumps([["HS", "ARRAY<STRUCT<KEY STRING, VALUE BYTES>>", "headers", None],
                                  ["SRC", "BYTES", "header", "src"]]),
        processingLogTopic=plog, processingLogRows="true", queryId="CSAS_TEST_1")
    out = run_available_now(spark, opts, tmp_path)
    rows = out.rows
    assert [(r["K"], r["ID"], r["NAME"], r["ROWTIME"], r["ROWOFFSET"], r["__TOMBSTONE"]) for r in rows] == [
        ("k1", 1, "x", 1000, 0, False), ("k4", None, None, 4000, 3, True), ("k5", 5, None, 5000, 4, False)]
    assert rows[0]["HS"] == [{"KEY": "src", "VALUE": b"a"}, {"KEY": "src", "VALUE": b"b"}]
    assert rows[0]["__HEADERS"] == rows[0]["HS"]
    assert rows[0]["SRC"] == b"b" and rows[1]["SRC"] is None
    assert rows[0]["ROWPARTITION"] == 0

    logged = [json.loads(r.value) for r in admin.read_all(plog)]
    assert [e["message"]["deserializationError"]["offset"] for e in logged] == [1, 2]
    first = logged[0]
    assert first["level"] == "ERROR" and first["logger"] == "CSAS_TEST_1" and first["message"]["type"] == 0
    err = first["message"]["deserializationError"]
    assert err["topic"] == t and err["partition"] == 0
    assert err["recordB64"] == "bm90IGpzb24="  # base64("not json")
    assert "Failed to deserialize value" in err["errorMessage"] and err["cause"]


def test_read_range_ends_on_transaction_marker_and_replays_identically(admin, bootstrap, topic_name) -> None:  # type: ignore[no-untyped-def]
    """A range whose last offset is a transaction commit marker (never delivered as a record)
    must still end, by position; reading the same range again yields the same rows."""
    from streamsql.kafka.admin import EndOffsets
    from streamsql.kafka.decoding import source_schema
    from streamsql.kafka.options import SourceOptions
    from streamsql.kafka.reading import read_range

    t = topic_name("txn")
    admin.create_topic(t)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{t}", "log_level": 4})
    p.init_transactions(10)
    p.begin_transaction()
    for i in range(3):
        p.produce(t, value=b"%d" % i, partition=0)
    p.commit_transaction(10)
    ends = EndOffsets(bootstrap, t)
    try:
        end = ends.ends()[0]
    finally:
        ends.close()
    assert end == 4  # 3 records + the commit marker
    opts = SourceOptions.parse(options(bootstrap, t))
    schema = source_schema(opts)
    first = [b.to_pylist() for b in read_range(opts, schema, 0, 0, end)]
    again = [b.to_pylist() for b in read_range(opts, schema, 0, 0, end)]
    assert [r["value"] for b in first for r in b] == [b"0", b"1", b"2"]
    assert first == again
    assert [r["value"] for b in read_range(opts, schema, 0, 1, 2) for r in b.to_pylist()] == [b"1"]


def test_read_range_past_the_log_end_yields_only_its_records_once_they_arrive(admin, bootstrap, topic_name) -> None:  # type: ignore[no-untyped-def]
    """A range the broker does not hold yet (its end listed before its records are served, as a
    lagging broker does): nothing before the range is yielded, the wait ends with the timeout's
    message naming the offset, and once the records exist the range is read exactly.
    (tests/unit/kafka/test_range_reader.py covers a consumer sent back to the log start.)"""
    import threading
    import time

    from streamsql.errors import KafkaError
    from streamsql.kafka.decoding import source_schema
    from streamsql.kafka.options import SourceOptions
    from streamsql.kafka.reading import read_range

    t = topic_name("ahead")
    admin.create_topic(t)
    for i in range(10):
        admin.produce(t, None, b"%d" % i)
    opts = SourceOptions.parse(options(bootstrap, t, pollTimeoutMs="3000"))
    schema = source_schema(opts)
    with pytest.raises(KafkaError, match="stuck at offset 12"):
        for batch in read_range(opts, schema, 0, 12, 15):
            assert batch.num_rows == 0, batch.to_pylist()

    def later() -> None:
        time.sleep(1.0)
        for i in range(10, 16):
            admin.produce(t, None, b"%d" % i)

    writer = threading.Thread(target=later)
    writer.start()
    patient = SourceOptions.parse(options(bootstrap, t, pollTimeoutMs="60000"))
    got = [r["value"] for b in read_range(patient, schema, 0, 12, 15) for r in b.to_pylist()]
    writer.join()
    assert got == [b"12", b"13", b"14"]


def test_rate_limit_is_exact_proportional_and_never_stalls() -> None:
    from streamsql.kafka.offsets import rate_limit

    assert rate_limit({0: 0, 1: 0}, {0: 6, 1: 4}, 4) == {0: 2, 1: 2}  # 2.4 + 1.6 -> remainder to p1
    assert rate_limit({0: 0, 1: 0}, {0: 6, 1: 4}, 100) == {0: 6, 1: 4}
    assert rate_limit({0: 5, 1: 0, 2: 0}, {0: 6, 1: 1, 2: 1}, 1) == {0: 6, 1: 0, 2: 0}  # 1 row, not 3
    spread = rate_limit({p: 0 for p in range(7)}, {p: 1000 for p in range(7)}, 10)
    assert sum(spread.values()) == 10 and max(spread.values()) - min(spread.values()) <= 1


def test_a_reused_consumer_learns_a_new_topic_at_its_first_read(admin, bootstrap, topic_name) -> None:  # type: ignore[no-untyped-def]
    """Python workers keep one consumer across tasks; a topic created after it started is looked
    up when first read (librdkafka would otherwise learn it at its next periodic metadata scan,
    about a second later, stalling the micro-batch)."""
    from streamsql.kafka import reading
    from streamsql.kafka.decoding import source_schema
    from streamsql.kafka.options import SourceOptions
    from streamsql.kafka.reading import read_range

    first, second = topic_name("reuse1"), topic_name("reuse2")
    admin.create_topic(first)
    admin.produce(first, None, b"x")
    opts = SourceOptions.parse(options(bootstrap, first))
    assert [r["value"] for b in read_range(opts, source_schema(opts), 0, 0, 1) for r in b.to_pylist()] == [b"x"]
    admin.create_topic(second)
    admin.produce(second, None, b"y")
    admin.produce(second, None, b"z")
    opts2 = SourceOptions.parse(options(bootstrap, second))
    (idle,) = reading._IDLE[reading._reader_key(opts)]
    consumer = reading._checkout(opts2)
    assert consumer is idle  # the same cached consumer, taken out while it reads
    assert second in reading._KNOWN_TOPICS[id(consumer)] and not reading._IDLE[reading._reader_key(opts)]
    reading._checkin(opts2, consumer)
    rows = [r["value"] for b in read_range(opts2, source_schema(opts2), 0, 0, 2) for r in b.to_pylist()]
    assert rows == [b"y", b"z"]


def test_arrow_batches_of_compressed_line_batches_hold_arrow_batch_rows_rows(
        admin, bootstrap, topic_name) -> None:  # type: ignore[no-untyped-def]
    """A VALUE_COMPRESSION record is a batch of lines, each a row: the reader bounds an Arrow
    batch's rows, not its records (seed 003's first micro-batch put ~190,000 rows in one)."""
    import gzip

    from streamsql.kafka.decoding import source_schema
    from streamsql.kafka.options import SourceOptions
    from streamsql.kafka.reading import read_range

    t = topic_name("gzlines")
    admin.create_topic(t)
    lines = [[f"r{r}l{i},{r * 100 + i}" for i in range(30)] for r in range(60)]  # 60 records × 30 lines
    produce(bootstrap, t, [(None, gzip.compress("\n".join(batch).encode())) for batch in lines])
    value = FormatSpec("DELIMITED", (Column("NAME", STRING), Column("N", BIGINT)), options={"compression": "GZIP"})
    opts = SourceOptions.parse(options(bootstrap, t, valueSpec=value.to_json(), arrowBatchRows="100"))
    schema = source_schema(opts)
    batches = list(read_range(opts, schema, 0, 0, 60))
    assert [(r["NAME"], r["N"]) for b in batches for r in b.to_pylist()] == [
        (f"r{r}l{i}", r * 100 + i) for r in range(60) for i in range(30)]
    # the first batch is a probe of one record; then at most 100 // 30 = 3 records (90 rows) at a
    # time (fewer when the consumer has fewer fetched); before, one batch of all 1,800 rows
    assert batches[0].num_rows == 30
    assert max(b.num_rows for b in batches) == 90
