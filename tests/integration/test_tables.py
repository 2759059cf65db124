"""Tables end to end: CREATE TABLE AS SELECT aggregations (windowed or not) writing a changelog
topic and a materialized store, HAVING tombstones, source tables, pull queries."""

from __future__ import annotations

import struct
import time

import pytest

from streamsql.errors import AnalysisError
from streamsql.runtime import results as r

from tests.integration.test_engine import produce, read

pytestmark = pytest.mark.integration


def test_ctas_count_group_by_changelog_and_pull_query(engine, topic_name):  # type: ignore[no-untyped-def]
    src = topic_name("clicks")
    engine.execute(f"""
        CREATE STREAM clicks (user VARCHAR KEY, page VARCHAR) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);
        CREATE TABLE per_page AS SELECT page, COUNT(*) AS hits, MAX(ROWTIME) AS last_seen FROM clicks GROUP BY page;
    """)
    produce(engine.admin, src, [("u1", '{"page":"a"}', 10), ("u2", '{"page":"b"}', 20)])
    engine.wait_until_idle()
    produce(engine.admin, src, [("u3", '{"page":"a"}', 30)])
    engine.wait_until_idle()
    changelog = read(engine.admin, "PER_PAGE")
    assert len(changelog) == 3, changelog  # a and b, then a again: nothing more, with or without the record cache
    assert sorted(changelog[:2]) == [("a", {"HITS": 1, "LAST_SEEN": 10}, 10), ("b", {"HITS": 1, "LAST_SEEN": 20}, 20)]
    assert changelog[2] == ("a", {"HITS": 2, "LAST_SEEN": 30}, 30)
    [pull] = engine.execute("SELECT page, hits FROM per_page WHERE page = 'a';")
    assert list(pull.rows(timeout=30)) == [["a", 2]]
    [everything] = engine.execute("SELECT * FROM per_page;")
    assert sorted(everything.rows(timeout=30)) == [["a", 2, 30], ["b", 1, 20]]


def test_having_removes_rows_with_tombstones_only_if_present(engine, topic_name):  # type: ignore[no-untyped-def]
    src = topic_name("h")
    engine.execute(f"""
        CREATE STREAM h (name VARCHAR) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);
        CREATE TABLE h_out AS SELECT name, COUNT(*) AS c FROM h GROUP BY name HAVING COUNT(*) = 2;
    """)
    for ts in (1, 2, 3):
        produce(engine.admin, src, [(None, '{"name":"bob"}', ts)])
        engine.wait_until_idle()
    assert [(k, v) for k, v, _ in read(engine.admin, "H_OUT")] == [("bob", {"C": 2}), ("bob", None)]


def emit_final_tumbling(inputs: list[tuple[int, int, int]], size: int,
                        grace: int) -> list[tuple[tuple[int, int], str, int]]:
    """An independent model of ksqlDB's EMIT FINAL over ``SUM`` in tumbling windows, for
    (key, value, timestamp) records in timestamp order (so none is late): a window starts at
    ``ts - ts % size``; it closes once stream time (the largest timestamp seen) reaches
    ``end + grace``, and only then is its final value emitted, once, with the timestamp of its
    newest record (ksqlDB docs, EMIT FINAL; QTT
    ``suppress.json`` "should emit final result immediately at window end if grace is specified
    as zero": size 2 ms, records at 0, 1, 2 -> one record for [0, 2) with COUNT 2, timestamp 1).
    Returns ((key, window start), value as DELIMITED text, timestamp) in emission order."""
    sums: dict[tuple[int, int], int] = {}
    newest: dict[tuple[int, int], int] = {}
    out: list[tuple[tuple[int, int], str, int]] = []
    assert [ts for _, _, ts in inputs] == sorted(ts for _, _, ts in inputs)
    stream_time = -1
    for key, value, ts in inputs:
        stream_time = max(stream_time, ts)
        window = (key, ts - ts % size)
        sums[window] = sums.get(window, 0) + value
        newest[window] = max(newest.get(window, ts), ts)
        for w in sorted(sums):
            if w[1] + size + grace <= stream_time:
                out.append((w, str(sums.pop(w)), newest.pop(w)))
    return out


def test_tumbling_window_keys_and_emit_final(engine, topic_name):  # type: ignore[no-untyped-def]
    src = topic_name("w")
    engine.execute(f"""
        CREATE STREAM w (id BIGINT KEY, v BIGINT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='DELIMITED', PARTITIONS=1);
        CREATE TABLE w_sum AS SELECT id, SUM(v) AS total FROM w WINDOW TUMBLING (SIZE 30 SECONDS) GROUP BY id;
        CREATE TABLE w_final AS SELECT id, SUM(v) AS total FROM w
            WINDOW TUMBLING (SIZE 30 SECONDS, GRACE PERIOD 0 SECONDS) GROUP BY id EMIT FINAL;
    """)
    inputs = [(0, 1, 1000), (0, 2, 20000), (0, 5, 40000), (0, 7, 70000)]
    for key, value, ts in inputs:
        engine.admin.produce(src, struct.pack(">q", key), str(value).encode(), ts)
        engine.wait_until_idle()
    changes = engine.admin.read_all("W_SUM")
    decoded = [(struct.unpack(">qq", rec.key), rec.value.decode(), rec.timestamp) for rec in changes]
    assert decoded == [((0, 0), "1", 1000), ((0, 0), "3", 20000), ((0, 30000), "5", 40000),
                       ((0, 60000), "7", 70000)]
    final = [(struct.unpack(">qq", rec.key), rec.value.decode(), rec.timestamp)
             for rec in engine.admin.read_all("W_FINAL")]
    assert final == emit_final_tumbling(inputs, size=30000, grace=0)
    # spelled out: [0, 30000) closes at stream time 40000, [30000, 60000) at 70000; [60000, 90000)
    # is still open at stream time 70000 and must not be emitted early
    assert final == [((0, 0), "3", 20000), ((0, 30000), "5", 40000)]
    [pull] = engine.execute("SELECT id, WINDOWSTART, total FROM w_sum WHERE id = 0;")
    assert sorted(pull.rows(timeout=30)) == [[0, 0, 3], [0, 30000, 5], [0, 60000, 7]]


def test_source_table_latest_value_and_tombstones(engine, topic_name):  # type: ignore[no-untyped-def]
    src = topic_name("users")
    engine.execute(f"""
        CREATE TABLE users (id VARCHAR PRIMARY KEY, name VARCHAR) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);
        CREATE TABLE named AS SELECT id, name FROM users WHERE name <> 'skip';
    """)
    produce(engine.admin, src, [("1", '{"name":"ann"}', 1), ("2", '{"name":"skip"}', 2), ("1", '{"name":"anne"}', 3),
                                ("1", None, 4), ("3", '{"name":"cy"}', 5)])
    engine.wait_until_idle()
    assert [(k, v) for k, v, _ in read(engine.admin, "NAMED")] == [
        ("1", {"NAME": "ann"}), ("1", {"NAME": "anne"}), ("1", None), ("3", {"NAME": "cy"})]
    [pull] = engine.execute("SELECT * FROM named;")
    assert list(pull.rows(timeout=30)) == [["3", "cy"]]



def test_source_table_is_queryable_and_stays_read_only(engine, topic_name):  # type: ignore[no-untyped-def]
    """CREATE SOURCE TABLE materializes the topic (ksqlDB's CST query): pull queries work, the
    topic is never written to, DROP stops the query."""
    src = topic_name("cst")
    engine.execute(f"CREATE SOURCE TABLE cst (k INT PRIMARY KEY, text STRING) "
                   f"WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='DELIMITED', PARTITIONS=1);")
    [query_id] = [q for q in engine.catalog.queries if q.startswith("CST_CST_")]
    for key, value, ts in [(1, b"a1", 10), (2, b"a2", 11), (3, b"a3", 12), (2, None, 13)]:
        engine.admin.produce(src, struct.pack(">i", key), value, ts)
    engine.wait_until_idle()
    [pull] = engine.execute("SELECT K, TEXT FROM cst;")
    assert sorted(pull.rows(timeout=30)) == [[1, "a1"], [3, "a3"]]
    [one] = engine.execute("SELECT * FROM cst WHERE k = 3;")
    assert list(one.rows(timeout=30)) == [[3, "a3"]]
    assert len(engine.admin.read_all(src)) == 4  # the materialization wrote nothing back
    changelog = f"_streamsql-{query_id}-{src}-changelog"
    assert changelog in engine.admin.topics()  # its internal changelog, which the store follows
    checkpoint = engine.data_dir / "checkpoints" / query_id
    assert checkpoint.exists()
    engine.execute("DROP TABLE cst;")
    assert query_id not in engine.catalog.queries and query_id not in engine.queries
    # nothing left behind: the internal topic and the query's state go with the table
    assert changelog not in engine.admin.topics() and src in engine.admin.topics() and not checkpoint.exists()
    assert not (engine.data_dir / "tables" / f"{query_id}.sqlite").exists()  # nor its store


def test_terminate_removes_the_querys_state(engine, topic_name):  # type: ignore[no-untyped-def]
    src = topic_name("term")
    engine.execute(f"""
        CREATE STREAM term (k VARCHAR KEY, v INT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);
        CREATE TABLE term_counts AS SELECT k, COUNT(*) AS n FROM term GROUP BY k;
    """)
    produce(engine.admin, src, [("a", '{"v":1}', 1)])
    engine.wait_until_idle()
    [query_id] = [q for q in engine.catalog.queries if q.startswith("CTAS_TERM_COUNTS_")]
    checkpoint = engine.data_dir / "checkpoints" / query_id
    assert (checkpoint / "commits").exists()
    engine.execute(f"TERMINATE {query_id};")
    assert not checkpoint.exists() and query_id not in engine.queries.plans
    assert "TERM_COUNTS" in engine.admin.topics()  # the table's own topic is the user's: DROP ... DELETE TOPIC


def test_pull_query_returns_maps_inside_arrays(engine, topic_name):  # type: ignore[no-untyped-def]
    """The store holds maps as Arrow gives them (lists of pairs); the pull query's DataFrame
    needs dicts (it failed with FIELD_DATA_TYPE_UNACCEPTABLE, a 500 in the server)."""
    src = topic_name("maps")
    engine.execute(f"""
        CREATE TABLE m_in (id STRING PRIMARY KEY, arraying ARRAY<MAP<STRING, INTEGER>>)
            WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);
        CREATE TABLE m_mat AS SELECT id, arraying FROM m_in;
    """)
    produce(engine.admin, src, [("one", '{"arraying": [{"a": 1}, {"b": 2, "c": 3}]}', 1)])
    engine.wait_until_idle()
    [pull] = engine.execute("SELECT id, arraying FROM m_mat;")
    assert list(pull.rows(timeout=30)) == [["one", [{"a": 1}, {"b": 2, "c": 3}]]]

def test_aggregation_push_query(engine, topic_name):  # type: ignore[no-untyped-def]
    src = topic_name("pq")
    engine.execute(f"CREATE STREAM pq (k VARCHAR KEY, n INT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);")
    produce(engine.admin, src, [("a", '{"n":1}', 1), ("a", '{"n":2}', 2), ("b", '{"n":5}', 3)])
    engine.execute("SET 'ksql.streams.cache.max.bytes.buffering'='0';")
    [stream] = engine.execute("SELECT k, SUM(n) AS total FROM pq GROUP BY k EMIT CHANGES LIMIT 2;")
    assert isinstance(stream, r.RowStream)
    # one update per input record (ksqlDB with its record cache off)
    assert list(stream.rows(timeout=60)) == [["a", 1], ["a", 3]]


def test_push_queries_without_group_by_and_over_a_table_with_deletes(engine, topic_name):  # type: ignore[no-untyped-def]
    """An aggregate without GROUP BY folds the whole stream (push-queries.json); a push query over
    a table emits a deleted row as a tombstone row (key set, values null), as ksqlDB's
    ``"tombstone": true``; records without a key are not table rows."""
    src, tbl = topic_name("nogb"), topic_name("tomb")
    engine.execute(f"""
        CREATE STREAM nogb (k VARCHAR KEY, n INT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);
        CREATE TABLE tomb (k VARCHAR PRIMARY KEY, n INT) WITH (KAFKA_TOPIC='{tbl}', VALUE_FORMAT='JSON', PARTITIONS=1);
    """)
    produce(engine.admin, src, [("a", '{"n":1}', 1), ("b", '{"n":2}', 2)])
    engine.execute("SET 'ksql.streams.cache.max.bytes.buffering'='0';")  # every update
    [totals] = engine.execute("SELECT SUM(n) AS s, COUNT(*) AS c FROM nogb EMIT CHANGES LIMIT 2;")
    assert list(totals.rows(timeout=60)) == [[1, 1], [3, 2]]
    produce(engine.admin, tbl, [("x", '{"n":1}', 1), ("x", None, 2), (None, '{"n":9}', 3), ("y", '{"n":4}', 4)])
    [changes] = engine.execute("SELECT k, n FROM tomb EMIT CHANGES LIMIT 3;")
    rows = list(changes.rows(timeout=60))
    assert rows == [["x", 1], ["x", None], ["y", 4]]
    assert [isinstance(row, r.TombstoneRow) for row in rows] == [False, True, False]


def test_insert_values_fills_a_struct_column_by_field_name(engine, topic_name):  # type: ignore[no-untyped-def]
    """insert-values.json: STRUCT(...) with some fields (or none) fills the column's struct by
    name, absent fields null."""
    src = topic_name("st")
    engine.execute(f"CREATE STREAM st (k VARCHAR KEY, s STRUCT<a INT, b VARCHAR>) "
                   f"WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);")
    engine.execute("INSERT INTO st (k, s) VALUES ('1', STRUCT(b := 'x'));")
    engine.execute("INSERT INTO st (k, s) VALUES ('2', STRUCT());")
    assert [(k, v) for k, v, _ in read(engine.admin, src)] == [
        ("1", {"S": {"A": None, "B": "x"}}), ("2", {"S": {"A": None, "B": None}})]


def test_insert_values_matches_struct_fields_by_name_inside_arrays_and_maps(engine, topic_name):  # type: ignore[no-untyped-def]
    """RQTT insert-values ('… with schema id'): ARRAY[STRUCT(`name` := …, `email` := …)] into an
    ARRAY<STRUCT<email, name>> column fills each field by name; Spark's CAST matched them by
    position (the email landed in `name`)."""
    src = topic_name("nested")
    engine.execute(f"CREATE STREAM nested (k VARCHAR KEY, a ARRAY<STRUCT<email VARCHAR, name VARCHAR>>, "
                   f"m MAP<VARCHAR, STRUCT<x INT, y VARCHAR>>) "
                   f"WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);")
    engine.execute("INSERT INTO nested (k, a, m) VALUES ('1', ARRAY[STRUCT(name := 'Ann', email := 'ann@x.org')], "
                   "MAP('p' := STRUCT(y := 'why', x := 7)));")
    assert [(k, v) for k, v, _ in read(engine.admin, src)] == [
        ("1", {"A": [{"EMAIL": "ann@x.org", "NAME": "Ann"}], "M": {"p": {"X": 7, "Y": "why"}}})]
    # a value of another shape is refused naming both types, and nothing is written
    with pytest.raises(AnalysisError, match=r"Cast of ARRAY<STRUCT<.*> to MAP<STRING, STRUCT<.*> is not supported"):
        engine.execute("INSERT INTO nested (k, m) VALUES ('2', ARRAY[STRUCT(x := 1)]);")
    assert len(read(engine.admin, src)) == 1


def test_source_table_materialized_by_an_earlier_version_is_rebuilt(engine, topic_name, bootstrap, spark,  # type: ignore[no-untyped-def]
                                                                    tmp_path):
    """A CST checkpoint without this version's layout (the driver's store wrote it) is started
    afresh: its changelog is internal and its input is the topic, so nothing is lost."""
    from streamsql.runtime.config import EngineConfig
    from streamsql.runtime.engine import Engine

    src = topic_name("oldcst")
    engine.execute(f"CREATE SOURCE TABLE oldcst (k VARCHAR PRIMARY KEY, v INT) "
                   f"WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);")
    produce(engine.admin, src, [("a", '{"v":1}', 1), ("b", '{"v":2}', 2), ("a", '{"v":3}', 3)])
    engine.wait_until_idle()
    [query_id] = [q for q in engine.catalog.queries if q.startswith("CST_OLDCST_")]
    engine.close()
    (tmp_path / "state" / "checkpoints" / query_id / "streamsql.json").unlink()  # as an earlier version left it
    again = Engine(EngineConfig(bootstrap, tmp_path / "state"), spark=spark)
    try:
        again.start()
        again.wait_until_idle()
        [pull] = again.execute("SELECT k, v FROM oldcst;")
        assert sorted(pull.rows(timeout=30)) == [["a", 3], ["b", 2]]
    finally:
        again.close()


def test_a_table_filter_over_thousands_of_keys_reads_and_writes_its_state_in_chunks(engine, topic_name):  # type: ignore[no-untyped-def]
    """Over 3,000 keys in one micro-batch the present bits are read and written many requests
    per exchange with the state server (physical/map_state.py, chunks of 32 KB): every key's
    tombstone is written exactly when the key passed the filter before, whichever chunk it is in."""
    src = topic_name("tf")
    keys = 3000
    engine.execute(f"""
        CREATE TABLE tf (id VARCHAR PRIMARY KEY, v BIGINT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);
        CREATE TABLE tf_out AS SELECT * FROM tf WHERE v % 2 = 0;
    """)
    produce(engine.admin, src, [(f"k{i:05d}", f'{{"v":{i}}}', 1) for i in range(keys)])
    engine.wait_until_idle()
    produce(engine.admin, src, [(f"k{i:05d}", None, 2) for i in range(keys)])
    engine.wait_until_idle()
    out = read(engine.admin, "TF_OUT")
    upserts = sorted(k for k, v, _ in out if v is not None)
    tombstones = sorted(k for k, v, _ in out if v is None)
    assert upserts == [f"k{i:05d}" for i in range(0, keys, 2)]
    assert tombstones == upserts  # only the keys the table held


def test_a_table_filters_changes_reach_the_sink_packed_and_are_counted_as_records(engine, topic_name):  # type: ignore[no-untyped-def]
    """The table-changes step hands its kept rows to the Kafka sink packed (``kafka/sink.unpacked``),
    typed as the filter's columns (a nullable BIGINT stays an integer), and Spark still counts
    each record written as an output row (a null stands for each further row of a packed value)."""
    from streamsql.runtime.progress import count_from_start, listener_of

    count_from_start(engine)
    src = topic_name("tp")
    engine.execute(f"""
        CREATE TABLE tp (id VARCHAR PRIMARY KEY, v BIGINT, w BIGINT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=2);
        CREATE TABLE tp_out AS SELECT id, v, w FROM tp WHERE v > 0;
    """)
    produce(engine.admin, src, [("a", '{"v":1}', 1), ("b", '{"v":2,"w":7}', 2), ("c", '{"v":0}', 3),
                                ("a", None, 4), ("c", None, 5), ("b", '{"v":-1}', 6), ("d", '{"v":3,"w":8}', 7)])
    engine.wait_until_idle()
    out = read(engine.admin, "TP_OUT")
    assert sorted(out, key=lambda r: r[2]) == [("a", {"V": 1, "W": None}, 1), ("b", {"V": 2, "W": 7}, 2),
                                               ("a", None, 4), ("b", None, 6), ("d", {"V": 3, "W": 8}, 7)]
    [qid] = [q for q in engine.queries if "TP_OUT" in q]
    listener = listener_of(engine)
    assert listener is not None
    deadline = time.monotonic() + 30
    while listener.snapshot(qid).output_rows != len(out) and time.monotonic() < deadline:
        time.sleep(0.2)  # Spark reports a batch's progress to the listener after it ends
    assert listener.snapshot(qid).output_rows == len(out) == 5
