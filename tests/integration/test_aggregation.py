"""Aggregations end to end on the real broker and SparkSession: exact counts across an engine
restart, late records dropped and counted, pull queries (key, key list, key range, window
range) agreeing with the changelog. (Seed 003's pipeline: tests/integration/test_s3_sink.py.)"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from streamsql.runtime import results as r
from streamsql.runtime.config import EngineConfig
from streamsql.runtime.engine import Engine
from tests.integration.test_engine import produce, read

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def _engine(bootstrap: str, spark, data_dir: Path) -> Engine:  # type: ignore[no-untyped-def]
    e = Engine(EngineConfig(bootstrap, data_dir), spark=spark)
    e.start()
    e.execute("SET 'auto.offset.reset'='earliest';")
    return e


def _latest(changelog: list[tuple[object, object, int]]) -> dict[object, object]:
    latest: dict[object, object] = {}
    for key, value, _ in changelog:
        if value is None:
            latest.pop(key, None)
        else:
            latest[key] = value
    return latest


def test_restart_mid_aggregation_keeps_counts_exact(bootstrap, spark, tmp_path, topic_name):  # type: ignore[no-untyped-def]
    src = topic_name("orders")
    sink = topic_name("per_user")
    data_dir = tmp_path / "state"
    first = _engine(bootstrap, spark, data_dir)
    try:
        first.execute(f"""
            SET 'ksql.streams.cache.max.bytes.buffering'='0';
            CREATE STREAM orders (user VARCHAR, amount INT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=2);
            CREATE TABLE per_user WITH (KAFKA_TOPIC='{sink}') AS
                SELECT user, COUNT(*) AS n, SUM(amount) AS total FROM orders GROUP BY user;
        """)
        produce(first.admin, src, [(f"k{i}", f'{{"user":"u{i % 3}","amount":{i}}}', 1000 + i) for i in range(30)])
        first.wait_until_idle()
    finally:
        first.close()
    # produced while no engine runs: the reopened engine must count these once, and nothing twice
    produce(first.admin, src, [(f"k{i}", f'{{"user":"u{i % 3}","amount":{i}}}', 1000 + i) for i in range(30, 50)])
    second = _engine(bootstrap, spark, data_dir)
    try:
        second.wait_until_idle()
        expected = {f"u{u}": {"N": sum(1 for i in range(50) if i % 3 == u),
                              "TOTAL": sum(i for i in range(50) if i % 3 == u)} for u in range(3)}
        assert _latest(read(second.admin, sink)) == expected
        [pull] = second.execute("SELECT user, n, total FROM per_user;")
        assert sorted(pull.rows(timeout=30)) == [[u, v["N"], v["TOTAL"]] for u, v in sorted(expected.items())]
        # one changelog update per input record, as ksqlDB with its record cache off
        assert len(read(second.admin, sink)) == 50
    finally:
        second.close()


def test_a_query_resumed_under_other_shuffle_partitions_keeps_its_state(bootstrap, spark, tmp_path, topic_name):  # type: ignore[no-untyped-def]
    """Spark runs a resumed query with the shuffle-partition count its checkpoint recorded; the
    buckets of streamsql's own operator must follow it, or the state is keyed under other
    bucket values and the counts restart from zero."""
    src = topic_name("clicks")
    sink = topic_name("per_page")
    data_dir = tmp_path / "state"
    first = _engine(bootstrap, spark, data_dir)
    try:
        first.execute(f"""
            SET 'streamsql.aggregation.operator'='python';
            CREATE STREAM clicks (page VARCHAR) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=2);
            CREATE TABLE per_page WITH (KAFKA_TOPIC='{sink}') AS SELECT page, COUNT(*) AS n FROM clicks GROUP BY page;
        """)
        produce(first.admin, src, [(f"k{i}", f'{{"page":"p{i % 2}"}}', 1000 + i) for i in range(10)])
        first.wait_until_idle()
    finally:
        first.close()
    produce(first.admin, src, [(f"k{i}", f'{{"page":"p{i % 2}"}}', 1000 + i) for i in range(10, 16)])
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", str(int(before) + 1))
    try:
        second = _engine(bootstrap, spark, data_dir)
        try:
            second.wait_until_idle()
            assert _latest(read(second.admin, sink)) == {"p0": {"N": 8}, "p1": {"N": 8}}
        finally:
            second.close()
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)


def test_record_cache_emits_the_latest_value_per_key_per_batch(engine, topic_name):  # type: ignore[no-untyped-def]
    """ksqlDB's default record cache: one changelog record per changed key per commit (here a
    micro-batch), holding the key's latest value, instead of one per input record."""
    src = topic_name("cached")
    engine.execute(f"CREATE STREAM cached (user VARCHAR, amount INT) WITH (KAFKA_TOPIC='{src}', "
                   f"VALUE_FORMAT='JSON', PARTITIONS=1);")
    produce(engine.admin, src, [(None, f'{{"user":"u{i % 2}","amount":{i}}}', 1000 + i) for i in range(40)])
    engine.execute("SET 'auto.offset.reset'='earliest';")
    engine.execute("CREATE TABLE cached_sum AS SELECT user, COUNT(*) AS n, SUM(amount) AS total FROM cached GROUP BY user;")
    engine.wait_until_idle()
    changes = read(engine.admin, "CACHED_SUM")
    # every record was there before the query started: one batch, one record per user
    assert sorted((k, v["N"], v["TOTAL"]) for k, v, _ in changes) == [
        ("u0", 20, sum(range(0, 40, 2))), ("u1", 20, sum(range(1, 40, 2)))]
    # the record's timestamp is the key's latest input record's (ksqlDB's aggregate rowtime)
    assert sorted(ts for _, _, ts in changes) == [1038, 1039]


def test_late_records_beyond_grace_are_dropped_and_counted(engine, topic_name):  # type: ignore[no-untyped-def]
    src = topic_name("late")
    engine.execute(f"""
        SET 'ksql.streams.cache.max.bytes.buffering'='0';
        CREATE STREAM late (id BIGINT KEY, v BIGINT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='DELIMITED', PARTITIONS=1);
        CREATE TABLE late_sum AS SELECT id, SUM(v) AS total FROM late
            WINDOW TUMBLING (SIZE 10 SECONDS, GRACE PERIOD 5 SECONDS) GROUP BY id;
    """)
    records = [(1, 1000), (2, 12000), (4, 14000),  # stream time 14 s: window [0,10) still open (10+5 > 14)
               (8, 16000),                          # stream time 16 s: window [0,10) closes
               (16, 3000),                          # late beyond grace: dropped
               (32, 11000)]                         # in the open window [10,20): kept
    for v, ts in records:
        engine.admin.produce(src, struct.pack(">q", 7), str(v).encode(), ts)
    engine.wait_until_idle()
    changes = [(struct.unpack(">qq", rec.key)[1], int(rec.value.decode())) for rec in engine.admin.read_all("LATE_SUM")]
    assert changes == [(0, 1), (10000, 2), (10000, 6), (10000, 14), (10000, 46)]
    [queries] = engine.execute("SHOW QUERIES;")
    assert isinstance(queries, r.QueryList)
    [desc] = [q for q in queries.queries if q.sink == "LATE_SUM"]
    assert desc.stats["numRowsDroppedByWatermark"] == 1


def test_pull_queries_match_the_changelog(engine, topic_name):  # type: ignore[no-untyped-def]
    src = topic_name("pv")
    engine.execute(f"""
        CREATE STREAM pv (user VARCHAR KEY, score INT, region VARCHAR) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);
        CREATE TABLE by_score AS SELECT score, COUNT(*) AS n FROM pv GROUP BY score;
        CREATE TABLE by_region AS SELECT region, COUNT(*) AS n FROM pv WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY region;
    """)
    rows = [(f"u{i}", f'{{"score":{i % 7},"region":"r{i % 2}"}}', 60_000 * (i % 4) + i) for i in range(40)]
    produce(engine.admin, src, rows)
    engine.wait_until_idle()
    changelog = [(struct.unpack(">i", rec.key)[0], json.loads(rec.value) if rec.value is not None else None, 0)
                 for rec in engine.admin.read_all("BY_SCORE")]  # INT keys: 4 bytes (KAFKA format)
    latest = _latest(changelog)

    def pull(sql: str) -> list[list[object]]:
        [result] = engine.execute(sql)
        return sorted(result.rows(timeout=30))

    assert pull("SELECT score, n FROM by_score WHERE score = 3;") == [[3, latest[3]["N"]]]
    assert pull("SELECT score, n FROM by_score WHERE score IN (1, 5, 99);") == [[1, latest[1]["N"]],
                                                                                [5, latest[5]["N"]]]
    assert pull("SELECT score, n FROM by_score WHERE score >= 2 AND score < 4;") == [
        [2, latest[2]["N"]], [3, latest[3]["N"]]]
    store = engine.stores["BY_SCORE"]
    from streamsql.runtime.materialized import Lookup
    assert "INDEX" in store.explain(Lookup(keys=[[3]]))  # a key lookup reads through the index
    windowed: dict[tuple[str, int], int] = {}
    for rec in engine.admin.read_all("BY_REGION"):
        region = rec.key[:-8].decode()
        windowed[(region, struct.unpack(">q", rec.key[-8:])[0])] = json.loads(rec.value)["N"]
    expected = sorted([region, ws, n] for (region, ws), n in windowed.items() if 60_000 <= ws < 180_000)
    assert pull("SELECT region, WINDOWSTART, n FROM by_region WHERE WINDOWSTART >= 60000 AND WINDOWSTART < 180000;") \
        == expected
    assert pull("SELECT region, WINDOWSTART, n FROM by_region WHERE region = 'r0' AND WINDOWSTART = 0;") == [
        ["r0", 0, windowed[("r0", 0)]]]


def test_table_rows_moving_between_groups_retract_with_the_default_buckets(engine, topic_name):  # type: ignore[no-untyped-def]
    """A changed table row leaves its old group (retracted there) and joins its new one, however
    many buckets the session's shuffle partitions would give a stream aggregation."""
    assert int(engine.spark.conf.get("spark.sql.shuffle.partitions")) > 1
    src = topic_name("accounts")
    engine.execute(f"CREATE TABLE accounts (id VARCHAR PRIMARY KEY, region VARCHAR, balance INT) "
                   f"WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=2);")
    moves = [(f"a{i}", f'{{"region":"r{i % 5}","balance":{i}}}', 1000 + i) for i in range(40)]
    # every account moves to region r{(i+1) % 5}; a third of them is then deleted
    moves += [(f"a{i}", f'{{"region":"r{(i + 1) % 5}","balance":{2 * i}}}', 2000 + i) for i in range(40)]
    moves += [(f"a{i}", None, 3000 + i) for i in range(0, 40, 3)]
    produce(engine.admin, src, moves)
    sink = topic_name("moved_by_region")
    engine.execute(f"CREATE TABLE moved_by_region WITH (KAFKA_TOPIC='{sink}') AS SELECT region, COUNT(*) AS n, "
                   f"SUM(balance) AS total FROM accounts GROUP BY region;")
    engine.wait_until_idle()
    alive = [i for i in range(40) if i % 3 != 0]
    expected = {f"r{r}": {"N": sum(1 for i in alive if (i + 1) % 5 == r),
                          "TOTAL": sum(2 * i for i in alive if (i + 1) % 5 == r)} for r in range(5)}
    assert _latest(read(engine.admin, sink)) == expected


def test_explain_prints_the_physical_steps(engine, topic_name):  # type: ignore[no-untyped-def]
    src = topic_name("explained")
    engine.execute(f"CREATE STREAM explained (user VARCHAR, amount INT) WITH (KAFKA_TOPIC='{src}', "
                   f"VALUE_FORMAT='JSON', PARTITIONS=1);")
    sql = ("CREATE TABLE explained_sum AS SELECT user, SUM(amount) AS total FROM explained "
           "WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY user HAVING SUM(amount) > 5;")
    [planned] = engine.execute(f"EXPLAIN {sql}")
    assert isinstance(planned, r.Explanation)
    steps = planned.text.split("Physical steps:\n", 1)[1].splitlines()
    assert steps[0].startswith("[1] Scan stream EXPLAINED")
    assert "Aggregate by" in steps[1] and "window TUMBLING (SIZE 1 MINUTE" in steps[1] and "having" in steps[1]
    assert steps[2].strip().startswith("> [3] Kafka sink EXPLAINED_SUM")
    [created] = engine.execute(sql)
    [running] = engine.execute(f"EXPLAIN {created.query_id};")
    assert "Physical steps:\n" + "\n".join(steps) in running.text


def test_operator_choice_shows_in_explain_and_bad_choices_are_refused(engine, topic_name):  # type: ignore[no-untyped-def]
    """SUM over a stream without HAVING takes Spark's own aggregation unless
    ``streamsql.aggregation.operator`` is ``python``; another value is refused by SET."""
    from streamsql.errors import ConfigError

    src = topic_name("chosen")
    engine.execute(f"CREATE STREAM chosen (user VARCHAR, amount INT) WITH (KAFKA_TOPIC='{src}', "
                   f"VALUE_FORMAT='JSON', PARTITIONS=1);")
    sql = "EXPLAIN CREATE TABLE chosen_sum AS SELECT user, SUM(amount) AS total FROM chosen GROUP BY user;"

    def aggregate_step() -> str:
        [planned] = engine.execute(sql)
        return planned.text.split("Physical steps:\n", 1)[1].splitlines()[1].strip()

    assert aggregate_step().startswith("> [2] Aggregate (Spark) by `USER`: SUM(AMOUNT) emit CHANGES (update)")
    engine.execute("SET 'streamsql.aggregation.operator'='python';")
    assert aggregate_step().startswith("> [2] Aggregate by `USER`: SUM(AMOUNT) emit CHANGES; 1 bucket(s)")
    with pytest.raises(ConfigError, match="Invalid value jvm for configuration streamsql.aggregation.operator: "
                                          "String must be one of: auto, python"):
        engine.execute("SET 'streamsql.aggregation.operator'='jvm';")
    engine.execute("SET 'streamsql.aggregation.operator'='auto';")
    assert aggregate_step().startswith("> [2] Aggregate (Spark)")


def test_bad_cache_and_bucket_settings_are_refused_when_set(engine, topic_name):  # type: ignore[no-untyped-def]
    """A malformed record-cache size or bucket count is refused by SET, naming the property and
    value, before any query could half-start with it; the engine keeps working."""
    from streamsql.errors import ConfigError

    with pytest.raises(ConfigError, match="Invalid value lots for configuration ksql.streams.cache.max.bytes.buffering"):
        engine.execute("SET 'ksql.streams.cache.max.bytes.buffering'='lots';")
    with pytest.raises(ConfigError, match="Invalid value 0 for configuration streamsql.aggregation.buckets"):
        engine.execute("SET 'streamsql.aggregation.buckets'='0';")
    [ok] = engine.execute("SET 'streamsql.aggregation.buckets'='3';")
    assert isinstance(ok, r.CommandStatus)
    [props] = engine.execute("SHOW PROPERTIES;")
    assert isinstance(props, r.Properties)


def test_streams_properties_are_read_with_or_without_their_prefix(engine):  # type: ignore[no-untyped-def]
    """ksqlDB reads ``ksql.streams.X`` and ``X`` as one setting, and the REST server strips the
    prefix from a request's ``streamsProperties``: a client that turned the record cache off
    with ``ksql.streams.cache.max.bytes.buffering=0`` reached the engine as
    ``cache.max.bytes.buffering``, which it never read (the cache stayed on)."""
    from streamsql.errors import ConfigError

    engine.execute("SET 'cache.max.bytes.buffering'='0';")
    assert engine.prop("ksql.streams.cache.max.bytes.buffering") == "0"
    with pytest.raises(ConfigError, match="Invalid value lots for configuration ksql.streams.cache.max.bytes.buffering"):
        engine.execute("SET 'cache.max.bytes.buffering'='lots';")
    engine.execute("SET 'ksql.streams.processing.guarantee'='exactly_once_v2';")
    assert engine.exactly_once()
    with pytest.raises(ConfigError, match="Invalid value soon for configuration auto.offset.reset"):
        engine.execute("SET 'ksql.streams.auto.offset.reset'='soon';")


def test_emit_final_with_the_record_cache_emits_every_closed_window(engine, topic_name):  # type: ignore[no-untyped-def]
    """With the cache on, many records share a micro-batch: every window a later record closes is
    written once, even when the batch's watermark is past the window's store segment (the first
    benchmark of Spark's operator lost 2 of 5 windows per key to a per-record expiry rule)."""
    src = topic_name("finals")
    engine.execute(f"""
        SET 'auto.offset.reset'='earliest';
        CREATE STREAM finals (id VARCHAR KEY, v BIGINT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='DELIMITED', PARTITIONS=1);
    """)
    # five 10 s windows per key, then one record per key just past the last window's end + grace
    for i in range(500):
        engine.admin.produce(src, f"k{i % 2}".encode(), str(i).encode(), 100 * i, flush=False)
    for k in range(2):
        engine.admin.produce(src, f"k{k}".encode(), b"0", 50_000 + 2_000 + 1, flush=False)
    engine.admin.flush()
    engine.execute("CREATE TABLE final_sums AS SELECT id, SUM(v) AS total FROM finals "
                   "WINDOW TUMBLING (SIZE 10 SECONDS, GRACE PERIOD 2 SECONDS) GROUP BY id EMIT FINAL;")
    engine.wait_until_idle()
    rows = [(rec.key[:-8].decode(), struct.unpack(">q", rec.key[-8:])[0], int(rec.value.decode()))
            for rec in engine.admin.read_all("FINAL_SUMS")]
    expected = sorted((f"k{k}", w * 10_000, sum(i for i in range(500) if i % 2 == k and 100 * i // 10_000 == w))
                      for k in range(2) for w in range(5))
    assert sorted(rows) == expected
