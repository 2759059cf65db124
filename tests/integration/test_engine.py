"""The engine end to end: statements in, records in real Kafka topics out, on a real SparkSession."""

from __future__ import annotations

import json

import pytest

from streamsql.errors import AnalysisError, CatalogError, ConfigError, KafkaError, ParseError
from streamsql.kafka.admin import KafkaAdmin
from streamsql.runtime import results as r

from tests.support.cycles import kafka_clients_left_to_the_cycle_collector
from tests.support.processing_log import deserialization_errors

pytestmark = pytest.mark.integration


def produce(admin: KafkaAdmin, topic: str, records: list[tuple[str | None, str | None, int]]) -> None:
    for key, value, ts in records:
        admin.produce(topic, key.encode() if key is not None else None,
                      value.encode() if value is not None else None, ts, flush=False)
    admin.flush()


def read(admin: KafkaAdmin, topic: str) -> list[tuple[str | None, object, int]]:
    out = []
    for rec in admin.read_all(topic):
        value = rec.value.decode() if rec.value is not None else None
        try:
            value = json.loads(value) if value is not None else None
        except json.JSONDecodeError:
            pass
        out.append((rec.key.decode() if rec.key is not None else None, value, rec.timestamp))
    return out


def test_csas_filter_and_projection_writes_exact_records(engine, topic_name):  # type: ignore[no-untyped-def]
    src = topic_name("pay")
    engine.execute(f"""
        CREATE STREAM pay (id VARCHAR KEY, amount DOUBLE, who VARCHAR, score DOUBLE)
          WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);
    """)
    produce(engine.admin, src, [
        ("a", '{"amount": 10.5, "who": "ann", "score": 0.9}', 1000),
        ("b", '{"AMOUNT": 3, "WHO": "bob", "SCORE": 0.1}', 2000),
        ("c", '{"amount": 7, "who": "cy", "score": 0.95}', 3000),
    ])
    [status] = engine.execute("CREATE STREAM big AS SELECT id, who, amount * 2 AS doubled FROM pay WHERE score > 0.8;")
    assert isinstance(status, r.CommandStatus) and status.query_id
    engine.wait_until_idle()
    assert read(engine.admin, "BIG") == [
        ("a", {"WHO": "ann", "DOUBLED": 21.0}, 1000),
        ("c", {"WHO": "cy", "DOUBLED": 14.0}, 3000),
    ]
    [desc] = engine.execute("DESCRIBE big;")
    assert isinstance(desc, r.SourceDescription)
    assert [(f.name, f.type, f.key) for f in desc.fields] == [
        ("ID", "STRING", True), ("WHO", "STRING", False), ("DOUBLED", "DOUBLE", False)]


def test_insert_into_merges_two_streams(engine, topic_name):  # type: ignore[no-untyped-def]
    a, b = topic_name("a"), topic_name("b")
    engine.execute(f"""
        CREATE STREAM sa (k VARCHAR KEY, v INT) WITH (KAFKA_TOPIC='{a}', VALUE_FORMAT='JSON', PARTITIONS=1);
        CREATE STREAM sb (k VARCHAR KEY, v INT) WITH (KAFKA_TOPIC='{b}', VALUE_FORMAT='JSON', PARTITIONS=1);
        CREATE STREAM merged AS SELECT * FROM sa;
        INSERT INTO merged SELECT * FROM sb;
    """)
    produce(engine.admin, a, [("x", '{"v": 1}', 10), ("y", '{"v": 2}', 20)])
    produce(engine.admin, b, [("z", '{"v": 3}', 30)])
    engine.wait_until_idle()
    got = sorted(read(engine.admin, "MERGED"))
    assert got == [("x", {"V": 1}, 10), ("y", {"V": 2}, 20), ("z", {"V": 3}, 30)]
    [queries] = engine.execute("SHOW QUERIES;")
    assert isinstance(queries, r.QueryList)
    assert {q.sink for q in queries.queries} == {"MERGED"} and len(queries.queries) == 2


def test_push_query_with_limit_returns_n_rows_and_stops(engine, topic_name):  # type: ignore[no-untyped-def]
    src = topic_name("p")
    engine.execute(f"CREATE STREAM p (k VARCHAR KEY, n INT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);")
    produce(engine.admin, src, [(f"k{i}", json.dumps({"n": i}), 1000 + i) for i in range(5)])
    [stream] = engine.execute("SELECT k, n FROM p WHERE n >= 1 EMIT CHANGES LIMIT 3;")
    assert isinstance(stream, r.RowStream)
    rows = list(stream.rows(timeout=60))
    assert rows == [["k1", 1], ["k2", 2], ["k3", 3]]
    assert stream.limit_reached and stream.closed


def test_insert_values_then_pull_style_scan(engine, topic_name):  # type: ignore[no-untyped-def]
    src = topic_name("iv")
    engine.execute(f"""
        CREATE STREAM iv (k VARCHAR KEY, n INT, s VARCHAR) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='DELIMITED', PARTITIONS=1);
        INSERT INTO iv (k, n, s, ROWTIME) VALUES ('one', 1, 'a,b', 5000);
        INSERT INTO iv (k, n) VALUES ('two', 1 + 1);
    """)
    recs = read(engine.admin, src)
    assert [(k, v) for k, v, _ in recs] == [("one", '1,"a,b"'), ("two", "2,")]
    assert recs[0][2] == 5000


def test_insert_values_without_columns_fills_keys_first_and_rejects_pseudo_columns(engine, topic_name):  # type: ignore[no-untyped-def]
    src = topic_name("ivk")
    engine.execute(f"CREATE STREAM ivk (id INT, k VARCHAR KEY) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', "
                   f"PARTITIONS=1);")
    engine.execute("INSERT INTO ivk VALUES ('key', 10);")  # key first, whatever the declared order
    assert [(k, v) for k, v, _ in read(engine.admin, src)] == [("key", {"ID": 10})]
    with pytest.raises(AnalysisError, match="Inserting into column `ROWOFFSET` is not allowed."):
        engine.execute("INSERT INTO ivk (k, id, ROWOFFSET) VALUES ('a', 1, 5);")
    with pytest.raises(AnalysisError, match="Expected number columns and values to match: 2, 1"):
        engine.execute("INSERT INTO ivk (k, id) VALUES ('10');")


def test_malformed_records_go_to_processing_log_and_good_ones_flow(engine, topic_name):  # type: ignore[no-untyped-def]
    j, d = topic_name("j"), topic_name("d")
    engine.execute(f"""
        CREATE STREAM js (k VARCHAR KEY, n INT) WITH (KAFKA_TOPIC='{j}', VALUE_FORMAT='JSON', PARTITIONS=1);
        CREATE STREAM ds (k VARCHAR KEY, n INT, s VARCHAR) WITH (KAFKA_TOPIC='{d}', VALUE_FORMAT='DELIMITED', PARTITIONS=1);
        CREATE STREAM js_out AS SELECT * FROM js;
        CREATE STREAM ds_out AS SELECT * FROM ds;
    """)
    produce(engine.admin, j, [("1", '{"n": 1}', 1), ("2", "not json", 2), ("3", '{"n": "abc"}', 3), ("4", '{"n": 4}', 4)])
    produce(engine.admin, d, [("1", "1,a", 1), ("2", "x,b", 2), ("3", "1,2,3", 3), ("4", "4,d", 4)])
    engine.wait_until_idle()
    assert [(k, v) for k, v, _ in read(engine.admin, "JS_OUT")] == [("1", {"N": 1}), ("4", {"N": 4})]
    assert [(k, v) for k, v, _ in read(engine.admin, "DS_OUT")] == [("1", "1,a"), ("4", "4,d")]
    errors = deserialization_errors(engine.admin, engine.processing_log_topic, j, d)
    # exactly the four bad records of this test's topics, in ksqlDB's shape ("Failed to deserialize
    # value from topic: <topic>. <reason>", the reason also alone in "cause"), each reason the one
    # tests/unit/formats/test_formats.py specifies for that record
    mine = {(e["topic"], e["offset"]): (e["target"], e["errorMessage"], e["cause"]) for e in errors}
    assert sorted(mine) == sorted([(j, 1), (j, 2), (d, 1), (d, 2)]), mine
    reasons = {(j, 2): "Failed to deserialize field 'N': cannot convert \"abc\" to INTEGER",
               (d, 1): "Failed to deserialize field 'N': cannot convert \"x\" to INTEGER",
               (d, 2): "Column count mismatch on deserialization: expected 2 columns, got 3"}
    for (topic, offset), reason in reasons.items():
        assert mine[(topic, offset)] == ("value", f"Failed to deserialize value from topic: {topic}. {reason}",
                                         [reason]), mine
    assert mine[(j, 1)][1].startswith(f"Failed to deserialize value from topic: {j}. Malformed JSON"), mine
    # the record's bytes only with ksql.logging.processing.rows.include (off by default, as ksqlDB)
    assert all(e["recordB64"] is None for e in errors)


def test_processing_log_rows_include_puts_the_bad_records_bytes_in(engine, topic_name):  # type: ignore[no-untyped-def]
    src = topic_name("rows")
    engine.execute(f"""
        SET 'ksql.logging.processing.rows.include' = 'true';
        CREATE STREAM rowsin (k VARCHAR KEY, n INT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);
        CREATE STREAM rowsout AS SELECT * FROM rowsin;
    """)
    produce(engine.admin, src, [("1", "not json", 1), ("2", '{"n": 2}', 2)])
    engine.wait_until_idle()
    errors = deserialization_errors(engine.admin, engine.processing_log_topic, src)
    assert [(e["offset"], e["recordB64"]) for e in errors] == [(0, "bm90IGpzb24=")]  # base64("not json")
    assert [v for _k, v, _ts in read(engine.admin, "ROWSOUT")] == [{"N": 2}]


def test_gzipped_batches_are_read_line_by_line(engine, topic_name):  # type: ignore[no-untyped-def]
    """VALUE_COMPRESSION='GZIP' (seed 003): a message is a gzipped batch of CSV lines; each line is a
    row with the message's key, offset and timestamp; a message that is not gzip and a bad line go
    to the processing log while the good lines around them flow."""
    import gzip

    src = topic_name("gz")
    engine.execute(f"""
        CREATE STREAM quotes (batch VARCHAR KEY, route VARCHAR, price DOUBLE)
          WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='DELIMITED', VALUE_COMPRESSION='GZIP', PARTITIONS=1);
        CREATE STREAM cheap WITH (VALUE_FORMAT='JSON') AS
          SELECT batch, route, price, ROWOFFSET AS o FROM quotes WHERE price < 100;
    """)
    batches = [b"LHR-IST,169.99\nLHR-CDG,59.5\n", b"not gzip", b"JFK-SFO,99\nJFK-LAX,cheap\nJFK-SEA,42.0"]
    for i, payload in enumerate(batches):
        data = payload if payload == b"not gzip" else gzip.compress(payload)
        engine.admin.produce(src, f"b{i}".encode(), data, 1000 + i, flush=False)
    engine.admin.flush()
    engine.wait_until_idle()
    rows = [(k, v, ts) for k, v, ts in read(engine.admin, "CHEAP")]
    assert rows == [("b0", {"ROUTE": "LHR-CDG", "PRICE": 59.5, "O": 0}, 1000),
                    ("b2", {"ROUTE": "JFK-SFO", "PRICE": 99.0, "O": 2}, 1002),
                    ("b2", {"ROUTE": "JFK-SEA", "PRICE": 42.0, "O": 2}, 1002)]
    mine = deserialization_errors(engine.admin, engine.processing_log_topic, src)
    assert {e["offset"] for e in mine} == {1, 2}
    by_offset = {e["offset"]: e["errorMessage"] for e in mine}
    # offset 1 is not gzip at all (8 bytes); offset 2 decompresses but one line's PRICE is 'cheap'
    prefix = f"Failed to deserialize value from topic: {src}. "
    assert by_offset[1].startswith(f"{prefix}cannot decompress the GZIP value ({len(b'not gzip')} bytes)"), by_offset
    assert by_offset[2] == f"{prefix}Failed to deserialize field 'PRICE': cannot convert \"cheap\" to DOUBLE", by_offset
    # the same option on a table, or with a binary format, is a statement error
    with pytest.raises(AnalysisError, match="only valid for streams"):
        engine.execute(f"CREATE TABLE qt (b VARCHAR PRIMARY KEY, p DOUBLE) "
                       f"WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='DELIMITED', VALUE_COMPRESSION='GZIP');")
    with pytest.raises(ConfigError, match="^VALUE_COMPRESSION is only valid with the line-oriented value formats"):
        engine.execute(f"CREATE STREAM qa (p DOUBLE) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='AVRO', "
                       f"VALUE_COMPRESSION='GZIP');")


def test_stream_table_left_join_sees_the_table_as_of_each_record(engine, topic_name):  # type: ignore[no-untyped-def]
    """Each order meets its customer's row at the time of the order: before the customer exists
    (nulls, LEFT), after an update (the new name), after a delete (nulls again)."""
    orders, customers = topic_name("orders"), topic_name("customers")
    engine.execute(f"""
        CREATE STREAM orders (id VARCHAR KEY, customer INT, amount DOUBLE)
          WITH (KAFKA_TOPIC='{orders}', VALUE_FORMAT='JSON', PARTITIONS=1);
        CREATE TABLE customers (cid INT PRIMARY KEY, name VARCHAR)
          WITH (KAFKA_TOPIC='{customers}', VALUE_FORMAT='JSON', PARTITIONS=1);
        CREATE STREAM enriched AS SELECT o.customer, o.id, c.name AS name, o.amount AS amount
          FROM orders o LEFT JOIN customers c ON o.customer = c.cid;
    """)
    steps = [(orders, "o1", '{"customer": 1, "amount": 5}', 1), (customers, 1, '{"name": "ann"}', 2),
             (orders, "o2", '{"customer": 1, "amount": 6}', 3), (customers, 1, '{"name": "anne"}', 4),
             (orders, "o3", '{"customer": 1, "amount": 7}', 5), (customers, 1, None, 6),
             (orders, "o4", '{"customer": 1, "amount": 8}', 7)]
    for topic, key, value, ts in steps:  # one at a time: the order of the two topics matters
        key_bytes = key.to_bytes(4, "big") if isinstance(key, int) else key.encode()
        engine.admin.produce(topic, key_bytes, value.encode() if value is not None else None, ts)
        engine.wait_until_idle()
    rows = [(v["ID"], v["NAME"], v["AMOUNT"], ts) for _k, v, ts in read(engine.admin, "ENRICHED")]
    assert rows == [("o1", None, 5.0, 1), ("o2", "ann", 6.0, 3), ("o3", "anne", 7.0, 5), ("o4", None, 8.0, 7)]


def test_three_way_enrichment_join(engine, topic_name):  # type: ignore[no-untyped-def]
    """orders ⟕ customers ⟕ items, each join on a different column: each order meets its customer
    and its item as of the order (nulls where either is missing), keyed by the last join's column."""
    orders, customers, items = topic_name("orders"), topic_name("customers"), topic_name("items")
    engine.execute(f"""
        CREATE STREAM orders (id VARCHAR KEY, customer INT, item VARCHAR, qty INT)
          WITH (KAFKA_TOPIC='{orders}', VALUE_FORMAT='JSON', PARTITIONS=1);
        CREATE TABLE customers (cid INT PRIMARY KEY, name VARCHAR)
          WITH (KAFKA_TOPIC='{customers}', VALUE_FORMAT='JSON', PARTITIONS=1);
        CREATE TABLE items (iid VARCHAR PRIMARY KEY, price DOUBLE)
          WITH (KAFKA_TOPIC='{items}', VALUE_FORMAT='JSON', PARTITIONS=1);
        CREATE STREAM enriched_items AS SELECT o.item, o.id, c.name AS name, i.price AS price, o.qty AS qty
          FROM orders o LEFT JOIN customers c ON o.customer = c.cid LEFT JOIN items i ON o.item = i.iid;
    """)
    [explained] = engine.execute("EXPLAIN " + next(iter(engine.catalog.queries)) + ";")
    assert "Join LEFT (Join LEFT ORDERS ⋈ CUSTOMERS) ⋈ ITEMS" in explained.text
    steps = [(customers, 1, '{"name": "ann"}', 1), (items, "a", '{"price": 2.5}', 2),
             (orders, "o1", '{"customer": 1, "item": "a", "qty": 2}', 3),
             (orders, "o2", '{"customer": 2, "item": "a", "qty": 1}', 4),
             (orders, "o3", '{"customer": 1, "item": "z", "qty": 5}', 5),
             (items, "a", '{"price": 3.0}', 6), (customers, 2, '{"name": "bob"}', 7),
             (orders, "o4", '{"customer": 2, "item": "a", "qty": 4}', 8)]
    for topic, key, value, ts in steps:  # one at a time: the order across topics matters
        key_bytes = key.to_bytes(4, "big") if isinstance(key, int) else key.encode()
        engine.admin.produce(topic, key_bytes, value.encode(), ts)
        engine.wait_until_idle()
    # the topic is the shared broker's: its name must be this test's own
    rows = [(k, v["ID"], v["NAME"], v["PRICE"], v["QTY"], ts) for k, v, ts in read(engine.admin, "ENRICHED_ITEMS")]
    assert rows == [("a", "o1", "ann", 2.5, 2, 3), ("a", "o2", None, 2.5, 1, 4), ("z", "o3", "ann", None, 5, 5),
                    ("a", "o4", "bob", 3.0, 4, 8)]


def test_stream_stream_left_join_emits_an_unmatched_row_when_its_window_closes(engine, topic_name):  # type: ignore[no-untyped-def]
    """impressions ⟕ clicks WITHIN 10 SECONDS GRACE PERIOD 5 SECONDS, on 2 partitions: an
    impression with no click yet waits; a click within the window joins it and it never appears
    with nulls; one left unclicked appears with nulls, at its own time, once stream time (any
    record of its partition) passes its window's end plus the grace, and not before."""
    impressions, clicks = topic_name("impressions"), topic_name("clicks")
    engine.execute(f"""
        CREATE STREAM impressions (ad VARCHAR KEY, page VARCHAR)
          WITH (KAFKA_TOPIC='{impressions}', VALUE_FORMAT='JSON', PARTITIONS=2);
        CREATE STREAM clicks (ad VARCHAR KEY, button VARCHAR)
          WITH (KAFKA_TOPIC='{clicks}', VALUE_FORMAT='JSON', PARTITIONS=2);
        CREATE STREAM ad_outcomes AS SELECT i.ad AS ad, i.page AS page, c.button AS button
          FROM impressions i LEFT JOIN clicks c WITHIN 10 SECONDS GRACE PERIOD 5 SECONDS ON i.ad = c.ad;
    """)
    [explained] = engine.execute("EXPLAIN " + next(iter(engine.catalog.queries)) + ";")
    assert "Join LEFT IMPRESSIONS ⋈ CLICKS" in explained.text
    sink = engine.catalog.get("AD_OUTCOMES").topic

    def step(topic: str, key: str, value: dict[str, str], ts: int) -> list[tuple[str, str | None, int]]:
        # the same partition for every record, so one stream time covers them (a Kafka Streams task)
        engine.admin.produce(topic, key.encode(), json.dumps(value).encode(), ts, partition=0)
        engine.wait_until_idle()
        return [(v["PAGE"], v["BUTTON"], ts) for _k, v, ts in read(engine.admin, sink)]

    assert step(impressions, "a1", {"page": "home"}, 1_000) == []  # a click may still come
    assert step(impressions, "a2", {"page": "news"}, 2_000) == []
    assert step(clicks, "a2", {"button": "buy"}, 9_000) == [("news", "buy", 9_000)]
    # stream time 16 s: a1's window closes at 1 + 10 + 5 = 16 s, not yet passed
    assert step(impressions, "a3", {"page": "shop"}, 16_000) == [("news", "buy", 9_000)]
    # 16.001 s: a1 appears with nulls at its own time; a2, clicked, never does
    assert step(clicks, "zz", {"button": "none"}, 16_001) == [("news", "buy", 9_000), ("home", None, 1_000)]


def test_foreign_key_join_follows_the_key_when_it_changes(engine, topic_name):  # type: ignore[no-untyped-def]
    """products ⋈ categories ON a non-key column of products: a product moving to another category
    joins the new one and no longer hears from the old; one moving to a missing category (INNER)
    is removed; a new category reaches every product that refers to it; a delete is a tombstone."""
    products, categories = topic_name("products"), topic_name("categories")
    engine.execute(f"""
        CREATE TABLE products (pid INT PRIMARY KEY, name VARCHAR, category_id INT)
          WITH (KAFKA_TOPIC='{products}', VALUE_FORMAT='JSON', PARTITIONS=1);
        CREATE TABLE categories (cid INT PRIMARY KEY, label VARCHAR)
          WITH (KAFKA_TOPIC='{categories}', VALUE_FORMAT='JSON', PARTITIONS=1);
        CREATE TABLE labelled AS SELECT p.pid, p.name, c.label AS label
          FROM products p JOIN categories c ON p.category_id = c.cid;
    """)
    steps = [(categories, 1, '{"label": "fruit"}', 1), (categories, 2, '{"label": "veg"}', 2),
             (products, 10, '{"name": "apple", "category_id": 1}', 3),
             (products, 10, '{"name": "apple", "category_id": 2}', 4),  # moves: joins category 2
             (categories, 1, '{"label": "fresh fruit"}', 5),  # no longer its category: nothing
             (categories, 2, '{"label": "greens"}', 6),
             (products, 10, '{"name": "apple", "category_id": 3}', 7),  # no category 3 yet: removed
             (products, 11, '{"name": "nut", "category_id": 3}', 8),  # new, no match: nothing
             (categories, 3, '{"label": "nuts"}', 9),  # reaches both
             (products, 11, None, 10)]
    for topic, key, value, ts in steps:  # one at a time: the order across topics matters
        engine.admin.produce(topic, key.to_bytes(4, "big"), value.encode() if value is not None else None, ts)
        engine.wait_until_idle()
    rows = [(int.from_bytes(rec.key, "big"), json.loads(rec.value)["LABEL"] if rec.value is not None else None,
             rec.timestamp) for rec in engine.admin.read_all(engine.catalog.get("LABELLED").topic)]
    assert rows == [(10, "fruit", 3), (10, "veg", 4), (10, "greens", 6), (10, None, 7), (10, "nuts", 9),
                    (11, "nuts", 9), (11, None, 10)]


def test_errors_name_the_culprit(engine, topic_name):  # type: ignore[no-untyped-def]
    src = topic_name("e")
    engine.execute(f"CREATE STREAM e (k VARCHAR KEY, n INT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);")
    with pytest.raises(CatalogError, match="NOPE does not exist"):
        engine.execute("CREATE STREAM o1 AS SELECT * FROM nope;")
    with pytest.raises(AnalysisError, match="'MISSING' cannot be resolved"):
        engine.execute("CREATE STREAM o2 AS SELECT k, missing FROM e;")
    with pytest.raises(AnalysisError, match=r"Cannot compare N \(INTEGER\) to 'x' \(STRING\)"):
        engine.execute("CREATE STREAM o3 AS SELECT * FROM e WHERE n > 'x';")
    with pytest.raises(ParseError) as err:
        engine.execute("CREATE STREAM o4 AS SELECT * FORM e;")
    assert err.value.line == 1 and err.value.column > 1
    with pytest.raises(AnalysisError, match="Unknown format: FOO"):
        engine.execute(f"CREATE STREAM bad (n INT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='FOO');")
    # the engine keeps working after errors
    [listing] = engine.execute("SHOW STREAMS;")
    assert isinstance(listing, r.SourceList) and [s.name for s in listing.sources] == ["E"]


def test_insert_into_names_header_columns_before_a_read_only_target(engine, topic_name):  # type: ignore[no-untyped-def]
    """ksqlDB checks that a query cannot write headers before that the target is writable."""
    src = topic_name("ins")
    engine.execute(f"CREATE STREAM ins_in (k VARCHAR KEY, n INT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', "
                   f"PARTITIONS=1);")
    engine.execute(f"CREATE SOURCE STREAM ins_h (k VARCHAR KEY, n INT, h ARRAY<STRUCT<key STRING, value BYTES>> "
                   f"HEADERS) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON');")
    engine.execute(f"CREATE SOURCE STREAM ins_ro (k VARCHAR KEY, n INT) WITH (KAFKA_TOPIC='{src}', "
                   f"VALUE_FORMAT='JSON');")
    with pytest.raises(AnalysisError, match="^Cannot insert into INS_H because it has header columns$"):
        engine.execute("INSERT INTO ins_h SELECT * FROM ins_in;")
    with pytest.raises(AnalysisError, match="^Cannot insert into read-only stream: INS_RO$"):
        engine.execute("INSERT INTO ins_ro SELECT * FROM ins_in;")


def test_default_formats_come_from_properties_and_bad_ones_are_named(engine, topic_name):  # type: ignore[no-untyped-def]
    src = topic_name("d")
    with pytest.raises(AnalysisError, match='Missing required property "VALUE_FORMAT"'):
        engine.execute(f"CREATE STREAM d0 (k VARCHAR KEY, n INT) WITH (KAFKA_TOPIC='{src}', PARTITIONS=1);")
    engine.execute("SET 'ksql.persistence.default.format.value'='JSON';")
    engine.execute(f"CREATE STREAM d1 (k VARCHAR KEY, n INT) WITH (KAFKA_TOPIC='{src}', PARTITIONS=1);")
    made = engine.catalog.get("D1")
    assert (made.key_format, made.value_format) == ("KAFKA", "JSON")
    engine.execute("SET 'ksql.persistence.default.format.value'='FOO';")
    with pytest.raises(AnalysisError, match="Unknown format: FOO"):
        engine.execute(f"CREATE STREAM d2 (k VARCHAR KEY, n INT) WITH (KAFKA_TOPIC='{src}');")
    engine.execute("UNSET 'ksql.persistence.default.format.value';")
    [listing] = engine.execute("SHOW STREAMS;")  # the engine keeps working
    assert [x.name for x in listing.sources] == ["D1"]


def test_missing_topic_is_a_clear_error(engine, topic_name):  # type: ignore[no-untyped-def]
    missing = topic_name("missing")
    with pytest.raises(KafkaError, match=f"^Topic '{missing}' does not exist"):
        engine.execute(f"CREATE STREAM m (n INT) WITH (KAFKA_TOPIC='{missing}', VALUE_FORMAT='JSON');")
    assert engine.catalog.find("M") is None  # nothing half-made


def test_meta_statements_print_explain_terminate_drop(engine, topic_name):  # type: ignore[no-untyped-def]
    src = topic_name("meta")
    engine.execute(f"""
        CREATE STREAM meta (k VARCHAR KEY, n INT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);
        INSERT INTO meta (k, n, ROWTIME) VALUES ('a', 1, 0);
        INSERT INTO meta (k, n, ROWTIME) VALUES ('b', 2, 1001);
        INSERT INTO meta (k, n, ROWTIME) VALUES ('c', 3, 2000);
    """)
    [printed] = engine.execute(f"PRINT '{src}' FROM BEGINNING LIMIT 2;")
    lines = [row[0] for row in printed.rows(timeout=30)]
    assert lines == ['rowtime: 1970/01/01 00:00:00.000 Z, key: a, value: {"N":1}, partition: 0',
                     'rowtime: 1970/01/01 00:00:01.001 Z, key: b, value: {"N":2}, partition: 0']

    [pull] = engine.execute("SELECT k, n FROM meta WHERE n > 1;")
    assert list(pull.rows(timeout=60)) == [["b", 2], ["c", 3]]

    [plan] = engine.execute("EXPLAIN SELECT k FROM meta WHERE n = 2 EMIT CHANGES;")
    # comparisons compile null-safe (a comparison with NULL is false, as in ksqlDB)
    assert "FILTER coalesce((`N` = 2), FALSE)" in plan.text

    [created] = engine.execute("CREATE STREAM meta_copy AS SELECT * FROM meta;")
    [topics] = engine.execute("SHOW TOPICS;")
    assert {src, "META_COPY"} <= {tp.name for tp in topics.topics}
    with pytest.raises(CatalogError, match="Cannot drop META"):
        engine.execute("DROP STREAM meta;")
    engine.execute(f"TERMINATE {created.query_id};")
    [queries] = engine.execute("SHOW QUERIES;")
    assert queries.queries == []
    engine.execute("DROP STREAM meta_copy DELETE TOPIC;")
    engine.execute("DROP STREAM meta;")
    [streams] = engine.execute("SHOW STREAMS;")
    assert streams.sources == []
    assert "META_COPY" not in engine.admin.topics()


def test_sink_keeps_source_delimiter_and_writes_null_multi_column_keys(engine, topic_name):  # type: ignore[no-untyped-def]
    src = topic_name("pipe")
    engine.execute(f"""
        CREATE STREAM pipe (k1 VARCHAR KEY, k2 VARCHAR KEY, a INT, b VARCHAR)
          WITH (KAFKA_TOPIC='{src}', FORMAT='DELIMITED', VALUE_DELIMITER='|', PARTITIONS=1);
        CREATE STREAM pipe_out AS SELECT * FROM pipe;
    """)
    produce(engine.admin, src, [("x,y", "1|one", 1), (None, "2|two", 2)])
    engine.wait_until_idle()
    assert [(k, v) for k, v, _ in read(engine.admin, "PIPE_OUT")] == [("x,y", "1|one"), (None, "2|two")]


def test_timestamp_zero_is_kept_end_to_end(engine, topic_name):  # type: ignore[no-untyped-def]
    """librdkafka writes timestamp 0 as "now"; ksqlDB keeps 0 (most of its own tests use it)."""
    src = topic_name("zero")
    engine.execute(f"""
        CREATE STREAM zero (k VARCHAR KEY, n INT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);
        INSERT INTO zero (k, n, ROWTIME) VALUES ('a', 1, 0);
        CREATE STREAM zero_out AS SELECT * FROM zero;
    """)
    produce(engine.admin, src, [("b", '{"n": 2}', 5)])
    engine.wait_until_idle()
    assert read(engine.admin, src)[0][2] == 0
    assert [(k, ts) for k, _, ts in read(engine.admin, "ZERO_OUT")] == [("a", 0), ("b", 5)]


def test_a_sinks_timestamp_column_sets_its_records_time(engine, topic_name):  # type: ignore[no-untyped-def]
    """CREATE STREAM ... WITH (TIMESTAMP='col') AS SELECT: each written record carries the column's
    time (ksqlDB's sink timestamp), not the input record's; DESCRIBE names the column."""
    src = topic_name("events")
    engine.execute(f"""
        CREATE STREAM events (k VARCHAR KEY, happened BIGINT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON',
          PARTITIONS=1);
        CREATE STREAM events_at WITH (TIMESTAMP='HAPPENED') AS SELECT k, happened FROM events;
    """)
    produce(engine.admin, src, [("a", '{"happened": 1000}', 5), ("b", '{"happened": 7}', 6)])
    engine.wait_until_idle()
    assert [(k, ts) for k, _, ts in read(engine.admin, "EVENTS_AT")] == [("a", 1000), ("b", 7)]
    assert engine.catalog.get("EVENTS_AT").timestamp_column == "HAPPENED"


def test_records_without_a_usable_time_are_dropped_to_the_processing_log(engine, topic_name):  # type: ignore[no-untyped-def]
    """A TIMESTAMP column that is null, unparsable or negative gives no time: ksqlDB drops the
    record (timestampformat and timestamp-extractor cases) and the records around it flow. Here
    at a BIGINT source column, a string source column with a format, and a sink's column; each
    dropped record has a processing-log entry naming the column, the value and its offset."""
    nums, texts = topic_name("tnum"), topic_name("ttext")
    engine.execute(f"""
        CREATE STREAM tnum (k VARCHAR KEY, id BIGINT, ts BIGINT) WITH (KAFKA_TOPIC='{nums}', VALUE_FORMAT='JSON',
          TIMESTAMP='ts', PARTITIONS=1);
        CREATE STREAM ttext (k VARCHAR KEY, id BIGINT, ts VARCHAR) WITH (KAFKA_TOPIC='{texts}', VALUE_FORMAT='JSON',
          TIMESTAMP='ts', TIMESTAMP_FORMAT='yy-MM-dd HH:mm:ssX', PARTITIONS=1);
        CREATE STREAM tnum_out AS SELECT k, id FROM tnum;
        CREATE STREAM ttext_out AS SELECT k, id FROM ttext;
        CREATE STREAM tsink WITH (TIMESTAMP='ID') AS SELECT k, id FROM tnum;
    """)
    produce(engine.admin, nums, [("a", '{"id": 1, "ts": 1526075913000}', 5), ("b", '{"id": -2, "ts": -1}', 6),
                                 ("c", '{"id": 3, "ts": null}', 7), ("d", '{"id": -4, "ts": 1589234313000}', 8)])
    produce(engine.admin, texts, [("a", '{"id": 1, "ts": "10-04-19 12:00:17Z"}', 5),
                                  ("b", '{"id": 2, "ts": "!!!!!!!!!!!!!!!!!"}', 6),
                                  ("c", '{"id": 3, "ts": "10-04-19 12:00:17Z"}', 7)])
    engine.wait_until_idle()
    assert [(k, v, ts) for k, v, ts in read(engine.admin, "TNUM_OUT")] == [
        ("a", {"ID": 1}, 1526075913000), ("d", {"ID": -4}, 1589234313000)]
    assert [(k, v, ts) for k, v, ts in read(engine.admin, "TTEXT_OUT")] == [
        ("a", {"ID": 1}, 1271678417000), ("c", {"ID": 3}, 1271678417000)]
    assert [(k, v, ts) for k, v, ts in read(engine.admin, "TSINK")] == [("a", {"ID": 1}, 1)]  # d's ID is -4
    entries = [v for _, v, _ in read(engine.admin, engine.processing_log_topic) if isinstance(v, dict)]
    errors = {(e["logger"], e["message"]["recordProcessingError"]["errorMessage"]) for e in entries
              if e["message"]["type"] == 1 and "TIMESTAMP column" in e["message"]["recordProcessingError"]["errorMessage"]}
    by_query = {q.sink: q.id for q in engine.catalog.queries.values()}
    assert {(by_query["TNUM_OUT"], "Failed to extract timestamp from row (partition 0, offset 1): the TIMESTAMP "
             "column TS value -1 is before 1970 (a record's time is milliseconds since 1970, never negative)"),
            (by_query["TNUM_OUT"], "Failed to extract timestamp from row (partition 0, offset 2): the TIMESTAMP "
             "column TS is null"),
            (by_query["TTEXT_OUT"], "Failed to extract timestamp from row (partition 0, offset 1): the TIMESTAMP "
             "column TS value '!!!!!!!!!!!!!!!!!' does not match TIMESTAMP_FORMAT 'yy-MM-dd HH:mm:ssX'"),
            # a query's output row has no input position; the entry's record holds its columns
            (by_query["TSINK"], "Error writing row with extracted timestamp: the TIMESTAMP column ID value -4 is "
             "before 1970 (a record's time is milliseconds since 1970, never negative)"),
            } <= errors, errors


def test_show_and_describe_functions(engine):  # type: ignore[no-untyped-def]
    [listing] = engine.execute("SHOW FUNCTIONS;")
    by_name = {f.name: f for f in listing.functions}
    assert by_name["SUBSTRING"].category == "STRING" and by_name["JSON_CONCAT"].category == "JSON"
    [desc] = engine.execute("DESCRIBE FUNCTION substring;")
    assert isinstance(desc, r.FunctionDescription) and desc.function.name == "SUBSTRING"
    assert r.FunctionVariant(["STRING", "INTEGER", "INTEGER"], "STRING") in desc.variants
    with pytest.raises(AnalysisError, match="Can't find any functions with the name 'NOPE'"):
        engine.execute("DESCRIBE FUNCTION nope;")


def test_alter_adds_columns_later_queries_read(engine, topic_name):  # type: ignore[no-untyped-def]
    """ksqlDB's ALTER: value columns added to a declared source; a query started afterwards reads
    them; a query started before keeps its schema; its rules and messages as ksqlDB's."""
    src = topic_name("alter")
    engine.execute(f"CREATE STREAM alt (id VARCHAR KEY, a INT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', "
                   "PARTITIONS=1);")
    engine.execute("CREATE STREAM alt_before AS SELECT * FROM alt;")
    [status] = engine.execute("ALTER STREAM alt ADD COLUMN b STRING, ADD c DOUBLE;")
    assert isinstance(status, r.CommandStatus) and status.message == "Stream ALT altered."
    [desc] = engine.execute("DESCRIBE alt;")
    assert [f.name for f in desc.fields] == ["ID", "A", "B", "C"]
    engine.execute("CREATE STREAM alt_after AS SELECT * FROM alt;")
    produce(engine.admin, src, [("k", '{"a": 1, "b": "x", "c": 2.5}', 1000)])
    engine.wait_until_idle()
    assert read(engine.admin, "ALT_AFTER") == [("k", {"A": 1, "B": "x", "C": 2.5}, 1000)]
    assert read(engine.admin, "ALT_BEFORE") == [("k", {"A": 1}, 1000)]
    with pytest.raises(CatalogError, match="Cannot add column `B` to schema. A column with the same name already exists."):
        engine.execute("ALTER STREAM alt ADD b INT;")
    with pytest.raises(CatalogError, match="Incompatible data source type is STREAM, but statement was ALTER TABLE"):
        engine.execute("ALTER TABLE alt ADD d INT;")
    with pytest.raises(CatalogError, match=r"ALTER command is not supported for CREATE \.\.\. AS statements\."):
        engine.execute("ALTER STREAM alt_after ADD d INT;")
    with pytest.raises(CatalogError, match="Source NOPE does not exist."):
        engine.execute("ALTER STREAM nope ADD d INT;")
    engine.execute(f"CREATE SOURCE TABLE alt_src (id VARCHAR PRIMARY KEY, a INT) WITH (KAFKA_TOPIC='{src}', "
                   "VALUE_FORMAT='JSON');")
    with pytest.raises(CatalogError, match="Cannot alter table 'ALT_SRC': ALTER operations are not supported on "
                                           "source tables."):
        engine.execute("ALTER TABLE alt_src ADD d INT;")


def test_a_thread_that_did_not_start_the_session_starts_queries(engine, topic_name):  # type: ignore[no-untyped-def]
    """A server's request threads and a warm-up thread: the session was started in another
    thread, where alone it is the JVM thread's active session, yet Spark finds the Kafka data
    source in the active session (this failed with DATA_SOURCE_NOT_FOUND once a background
    warm-up started the session)."""
    import threading

    src = topic_name("threads")
    engine.execute(f"CREATE STREAM th_src (id VARCHAR KEY, v INT) WITH (KAFKA_TOPIC='{src}', "
                   "VALUE_FORMAT='JSON', PARTITIONS=1);")
    produce(engine.admin, src, [("a", '{"v": 1}', 1000), ("b", '{"v": 2}', 2000)])
    box: dict[str, object] = {}

    def body() -> None:
        try:
            box["result"] = engine.execute("CREATE STREAM th_out AS SELECT id, v * 10 AS w FROM th_src;")
        except Exception as exc:  # noqa: BLE001 - reported below
            box["error"] = exc

    thread = threading.Thread(target=body)
    thread.start()
    thread.join(timeout=120)
    assert "error" not in box, box.get("error")
    engine.wait_until_idle()
    assert read(engine.admin, "TH_OUT") == [("a", {"W": 10}, 1000), ("b", {"W": 20}, 2000)]


def test_a_closed_engine_leaves_no_kafka_client_to_the_cycle_collector(bootstrap, spark, tmp_path, topic_name) -> None:  # type: ignore[no-untyped-def]
    """The conformance runner closes an engine per case from several threads at once: a client
    left in a cycle would be destroyed wherever the collector next runs (tests/support/cycles.py)."""
    from streamsql.runtime.config import EngineConfig
    from streamsql.runtime.engine import Engine

    t = topic_name("cyc")

    def run() -> None:
        e = Engine(EngineConfig(bootstrap, tmp_path / "state"), spark=spark)
        e.start()
        e.execute(f"CREATE STREAM s (id INT KEY, v INT) WITH (KAFKA_TOPIC='{t}', PARTITIONS=1, FORMAT='JSON');")
        e.execute("INSERT INTO s (id, v) VALUES (1, 2);")
        e.close()

    assert kafka_clients_left_to_the_cycle_collector(run) == []


def test_a_where_the_reader_applies_keeps_what_the_query_keeps(engine, topic_name):  # type: ignore[no-untyped-def]
    """The simple conjuncts of a stream's WHERE are applied by its reader (planner/pushdown.py):
    the output is the WHERE's, Java's remainder included (-7 % 123 is -7), rows whose compared
    column is null are dropped, the other conjunct is Spark's, and a malformed record still
    reaches the processing log with its offset while the records around it come out."""
    src = topic_name("bids")
    engine.execute(f"""
        CREATE STREAM bids (k VARCHAR KEY, auction BIGINT, price DOUBLE, who VARCHAR)
          WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);
    """)
    produce(engine.admin, src, [
        ("a", '{"auction": -7, "price": 2.5, "who": "ann"}', 1),
        ("b", '{"auction": 116, "price": 2.5, "who": "bob"}', 2),  # floored modulo would give -7's 116
        ("c", '{"auction": -130, "price": 0.5, "who": "cy"}', 3),
        ("d", 'not json', 4),
        ("e", '{"auction": null, "price": 9.0, "who": "dee"}', 5),
        ("f", '{"auction": 239, "price": 3.0, "who": "eve"}', 6),
        ("g", '{"auction": -7, "price": 3.0, "who": "ANN"}', 7),
    ])
    where = "auction % 123 = -7 AND price > 1 AND LCASE(who) = 'ann'"
    [plan] = engine.execute(f"EXPLAIN SELECT * FROM bids WHERE {where} EMIT CHANGES;")
    assert "the reader keeps only rows where AUCTION % 123 = -7 AND PRICE > 1.0" in str(plan), plan
    engine.execute(f"CREATE STREAM picked AS SELECT * FROM bids WHERE {where};")
    engine.wait_until_idle()
    assert [(k, v) for k, v, _ in read(engine.admin, "PICKED")] == [
        ("a", {"AUCTION": -7, "PRICE": 2.5, "WHO": "ann"}), ("g", {"AUCTION": -7, "PRICE": 3.0, "WHO": "ANN"})]
    errors = deserialization_errors(engine.admin, engine.processing_log_topic, src)
    assert [e["offset"] for e in errors] == [3]


def test_a_select_the_reader_runs_writes_what_spark_would(engine, topic_name):  # type: ignore[no-untyped-def]
    """A stream's projection of its own columns with a WHERE that translates whole runs in the
    reader's tasks with the sink (kafka/pipe.py; EXPLAIN says so): the records are those of
    Spark's plan — renamed columns, the record's time and headers kept, Java's remainder,
    null-valued and null-column records dropped by the WHERE, a malformed record in the
    processing log with its offset and the records around it written."""
    src = topic_name("bids")
    engine.execute(f"""
        CREATE STREAM bids (k VARCHAR KEY, auction BIGINT, price DOUBLE, who VARCHAR)
          WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);
    """)
    produce(engine.admin, src, [
        ("a", '{"auction": -7, "price": 2.5, "who": "ann"}', 1),
        ("b", '{"auction": 116, "price": 2.5, "who": "bob"}', 2),
        ("c", None, 3),
        ("d", 'not json', 4),
        ("e", '{"auction": null, "price": 9.0, "who": "dee"}', 5),
        ("f", '{"auction": 239, "price": 3.0, "who": "eve"}', 6),
        ("g", '{"auction": -7, "price": 3.5, "who": "gil"}', 7),
    ])
    select = "SELECT k, who AS name, price FROM bids WHERE auction % 123 = -7 OR who = 'eve'"
    picked, converted_topic = topic_name("picked"), topic_name("converted")
    [plan] = engine.execute(f"EXPLAIN CREATE STREAM picked WITH (KAFKA_TOPIC='{picked}') AS {select};")
    assert "in the reader" in str(plan) and "no row reaches the JVM" in str(plan), plan
    engine.execute(f"CREATE STREAM picked WITH (KAFKA_TOPIC='{picked}') AS {select};")
    engine.wait_until_idle()
    assert read(engine.admin, picked) == [
        ("a", {"NAME": "ann", "PRICE": 2.5}, 1), ("f", {"NAME": "eve", "PRICE": 3.0}, 6),
        ("g", {"NAME": "gil", "PRICE": 3.5}, 7)]
    errors = deserialization_errors(engine.admin, engine.processing_log_topic, src)
    assert [e["offset"] for e in errors] == [3]
    # Nexmark q1's arithmetic, with Spark's types: DECIMAL(3,3) × BIGINT is DECIMAL(24,3)
    converted = "SELECT k, 0.908 * auction AS p, price * 2 AS d, auction + 1 AS a FROM bids WHERE who = 'gil'"
    into = f"CREATE STREAM converted WITH (KAFKA_TOPIC='{converted_topic}') AS {converted};"
    [plan] = engine.execute(f"EXPLAIN {into}")
    assert "no row reaches the JVM" in str(plan), plan
    engine.execute(into)
    engine.wait_until_idle()
    [(key, value, ts)] = read(engine.admin, converted_topic)
    assert (key, ts) == ("g", 7)
    assert value == {"P": -6.356, "D": 7.0, "A": -6}
    [raw] = [r.value for r in engine.admin.read_all(converted_topic)]
    assert b'"P":-6.356' in raw


def test_a_select_spark_must_compute_keeps_spark_plan(engine, topic_name):  # type: ignore[no-untyped-def]
    """Division, or a function in the projection or the WHERE keep the step in Spark."""
    src = topic_name("bids")
    engine.execute(f"""
        CREATE STREAM bids2 (k VARCHAR KEY, auction BIGINT, price DOUBLE)
          WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);
    """)
    for select in ("SELECT k, auction / 2 AS a FROM bids2", "SELECT k, LCASE(k) AS l FROM bids2",
                   "SELECT k, auction FROM bids2 WHERE LCASE(k) = 'a'"):
        [plan] = engine.execute(f"EXPLAIN CREATE STREAM o AS {select};")
        assert "no row reaches the JVM" not in str(plan), plan


def test_an_aggregate_pull_query_over_a_stream_is_refused_in_ksqldbs_words(engine, topic_name):  # type: ignore[no-untyped-def]
    """ksqlDB 0.29 gives an aggregate without GROUP BY a grouping of its own (its Analyzer's
    addDummyGroupbyForUdafs), so its PullQueryValidator answers ``SELECT COUNT(*) FROM stream;``
    with the GROUP BY message and the push-query hint: streamsql says the same."""
    src = topic_name("pull_agg")
    engine.execute(f"CREATE STREAM pull_agg (k VARCHAR KEY, n INT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', "
                   f"PARTITIONS=1);")
    expected = ("Pull queries don't support GROUP BY clauses. See https://cnfl.io/queries for more info.\n"
                "Add EMIT CHANGES if you intended to issue a push query.")
    for statement in ("SELECT COUNT(*) FROM pull_agg;", "SELECT k, COUNT(*) FROM pull_agg GROUP BY k;"):
        with pytest.raises(AnalysisError) as refused:
            engine.execute(statement)
        assert str(refused.value) == expected
