"""Streams over windowed topics (WINDOW_TYPE): the key's window suffix read as WINDOWSTART/WINDOWEND
and written again by a persistent query, as ksqlDB does."""

from __future__ import annotations

import json
import struct

import pytest

pytestmark = pytest.mark.integration


def test_tumbling_and_session_keys_are_read_and_rewritten(engine, topic_name):  # type: ignore[no-untyped-def]
    tumbling, session = topic_name("tumbling"), topic_name("session")
    engine.execute("SET 'auto.offset.reset'='earliest';")
    engine.execute(f"""
        CREATE STREAM t_in (k INT KEY, v BIGINT) WITH (KAFKA_TOPIC='{tumbling}', VALUE_FORMAT='DELIMITED',
          WINDOW_TYPE='Tumbling', WINDOW_SIZE='30 seconds', PARTITIONS=1);
        CREATE STREAM s_in (k INT KEY, n BIGINT) WITH (KAFKA_TOPIC='{session}', VALUE_FORMAT='JSON',
          WINDOW_TYPE='Session', PARTITIONS=1);
    """)
    key = struct.pack(">i", 7)
    engine.admin.produce(tumbling, key + struct.pack(">q", 30_000), b"1", 31_000, flush=False)
    engine.admin.produce(tumbling, key[:2], b"2", 32_000, flush=False)  # too short for its suffix: logged
    engine.admin.produce(tumbling, key + struct.pack(">q", 60_000), b"3", 61_000, flush=False)
    engine.admin.produce(session, key + struct.pack(">qq", 5_000, 1_000), b'{"N": 1}', 5_000, flush=False)
    engine.admin.produce(session, key + struct.pack(">qq", 9_000, 9_000), b'{"N": 2}', 9_000, flush=False)
    engine.admin.flush()
    engine.execute("CREATE STREAM t_out AS SELECT * FROM t_in WHERE v > 0;")
    engine.execute("CREATE STREAM s_starts AS SELECT * FROM s_in WHERE WINDOWSTART = WINDOWEND;")
    engine.wait_until_idle()

    out = [(r.key, r.value) for r in engine.admin.read_all("T_OUT")]
    assert out == [(key + struct.pack(">q", 30_000), b"1"), (key + struct.pack(">q", 60_000), b"3")]
    starts = [(r.key, r.value) for r in engine.admin.read_all("S_STARTS")]
    assert starts == [(key + struct.pack(">qq", 9_000, 9_000), b'{"N":2}')]
    # exactly the one short key (offset 1, 2 bytes) of the tumbling topic is logged, none of the session's
    log = [json.loads(rec.value)["message"] for rec in engine.admin.read_all(engine.processing_log_topic) if rec.value]
    errors = [m["deserializationError"] for m in log if m.get("deserializationError")]
    mine = [(e["topic"], e["offset"], e["target"], e["errorMessage"])
            for e in errors if e["topic"] in (tumbling, session)]
    assert mine == [(tumbling, 1, "key", f"Failed to deserialize key from topic: {tumbling}. windowed key of "
                                         f"{len(key[:2])} bytes is shorter than its 8-byte window suffix")]


def test_a_join_of_session_windowed_streams_meets_on_key_and_exact_window(engine, topic_name):  # type: ignore[no-untyped-def]
    """As Kafka Streams compares windowed keys' bytes: a right record in another session of the
    same key (same start, other end) does not join; the result is windowed as the left side."""
    left, right = topic_name("wj_left"), topic_name("wj_right")
    engine.execute("SET 'auto.offset.reset'='earliest';")
    engine.execute(f"""
        CREATE STREAM wl (k INT KEY, v BIGINT) WITH (KAFKA_TOPIC='{left}', VALUE_FORMAT='JSON',
          WINDOW_TYPE='Session', PARTITIONS=1);
        CREATE STREAM wr (k INT KEY, v BIGINT) WITH (KAFKA_TOPIC='{right}', VALUE_FORMAT='JSON',
          WINDOW_TYPE='Session', PARTITIONS=1);
    """)

    def session_key(k: int, start: int, end: int) -> bytes:  # Kafka Streams: key, end, start
        return struct.pack(">i", k) + struct.pack(">qq", end, start)

    engine.admin.produce(left, session_key(1, 1_000, 5_000), b'{"V": 1}', 5_000, flush=False)
    engine.admin.produce(right, session_key(1, 1_000, 3_000), b'{"V": 2}', 3_000, flush=False)  # other session
    engine.admin.produce(right, session_key(1, 1_000, 5_000), b'{"V": 3}', 5_000, flush=False)
    engine.admin.produce(right, session_key(2, 1_000, 5_000), b'{"V": 4}', 5_000, flush=False)  # other key
    engine.admin.flush()
    engine.execute("CREATE STREAM wj AS SELECT wl.k, wl.v AS lv, wr.v AS rv, wr.WINDOWEND AS r_end "
                   "FROM wl JOIN wr WITHIN 1 MINUTE ON wl.k = wr.k;")
    engine.wait_until_idle()

    out = [(r.key, json.loads(r.value), r.timestamp) for r in engine.admin.read_all("WJ")]
    assert out == [(session_key(1, 1_000, 5_000), {"LV": 1, "RV": 3, "R_END": 5_000}, 5_000)]
    wj = engine.catalog.get("WJ")
    assert wj.window_type is not None and wj.window_type.upper() == "SESSION"


def test_an_n_way_join_of_windowed_streams_meets_on_key_and_window(engine, topic_name):  # type: ignore[no-untyped-def]
    """Three tumbling-windowed streams joined on their keys, as ksqlDB checks and runs each join
    of an n-way join: rows meet when key and window start are equal; the result is windowed as
    the first stream, and a LEFT join keeps a left row whose window the third stream lacks. (A
    persistent query over windowed tables is refused, as in ksqlDB.)"""
    names = [topic_name(f"nw_{i}") for i in range(3)]
    engine.execute("SET 'auto.offset.reset'='earliest';")
    for alias, topic in zip(("a", "b", "c"), names):
        engine.execute(f"CREATE STREAM w{alias} (k INT KEY, v BIGINT) WITH (KAFKA_TOPIC='{topic}', "
                       f"VALUE_FORMAT='JSON', WINDOW_TYPE='Tumbling', WINDOW_SIZE='10 seconds', PARTITIONS=1);")

    def key(k: int, start: int) -> bytes:
        return struct.pack(">i", k) + struct.pack(">q", start)

    a, b, c = names
    engine.admin.produce(a, key(1, 0), b'{"V": 1}', 1_000, flush=False)
    engine.admin.produce(a, key(1, 10_000), b'{"V": 2}', 11_000, flush=False)
    engine.admin.produce(b, key(1, 0), b'{"V": 10}', 2_000, flush=False)
    engine.admin.produce(b, key(1, 10_000), b'{"V": 20}', 12_000, flush=False)
    engine.admin.produce(c, key(1, 0), b'{"V": 100}', 3_000, flush=False)
    engine.admin.produce(c, key(2, 10_000), b'{"V": 300}', 13_000, flush=False)  # another key
    engine.admin.flush()
    engine.execute("CREATE STREAM nw AS SELECT wa.k, wa.v AS av, wb.v AS bv, wc.v AS cv FROM wa "
                   "JOIN wb WITHIN 1 MINUTE ON wa.k = wb.k LEFT JOIN wc WITHIN 1 MINUTE ON wb.k = wc.k;")
    engine.wait_until_idle()

    rows = [(r.key, json.loads(r.value)) for r in engine.admin.read_all("NW")]
    assert (key(1, 0), {"AV": 1, "BV": 10, "CV": 100}) in rows
    assert all(k in (key(1, 0), key(1, 10_000)) for k, _v in rows)
    assert all(v["CV"] is None for k, v in rows if k == key(1, 10_000))
    nw = engine.catalog.get("NW")
    assert (nw.window_type or "").upper() == "TUMBLING" and nw.window_size_ms == 10_000
