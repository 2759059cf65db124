"""A built-in function failing on a record (ksqlDB's ``KsqlFunctionException``): the record goes to
the processing log naming the function and the error, the call yields null, the query goes on.

Spark refuses an invalid datetime pattern when it formats the first row and fails the task, so a
query with one restarted in a loop (issue #52); the date functions now check their pattern
first (``functions/builtins/datetime_patterns.py``), at planning for a literal and per record for
a column. Real broker, real Spark (fixture ``engine``)."""

from __future__ import annotations

import random

from tests.integration.test_engine import produce, read


def _function_errors(engine, marker: str) -> list[dict]:  # type: ignore[no-untyped-def]
    """The record-processing errors of the shared processing log whose record holds ``marker``."""
    out = []
    for _, value, _ in read(engine.admin, engine.processing_log_topic):
        body = (value.get("message") or {}).get("recordProcessingError") if isinstance(value, dict) else None
        if body and marker in (body.get("record") or ""):
            out.append(body)
    return out


def test_an_invalid_date_pattern_logs_the_record_and_yields_null(engine, topic_name) -> None:  # type: ignore[no-untyped-def]
    base = random.randrange(10**9, 2 * 10**9) * 1000  # the records' own epoch millis: found in the log by them
    src = topic_name("dates")
    engine.execute(f"CREATE STREAM dates (k VARCHAR KEY, ts BIGINT, p VARCHAR, d VARCHAR) "
                   f"WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);")
    produce(engine.admin, src, [
        ("a", f'{{"ts": {base}, "p": "yyyy", "d": "2020-01-02"}}', 1000),
        ("b", f'{{"ts": {base + 1}, "p": "invalid", "d": "2020-01-03 {base + 1}"}}', 2000),
        ("c", f'{{"ts": {base + 2}, "p": "MM", "d": "2020-01-04"}}', 3000),
    ])
    engine.execute("CREATE STREAM formatted AS SELECT k, TIMESTAMPTOSTRING(ts, p) AS by_column, "
                   "TIMESTAMPTOSTRING(ts, 'invalid') AS by_literal, "
                   "FORMAT_TIMESTAMP(FROM_UNIXTIME(ts), 'yyyy') AS fine, "
                   "PARSE_DATE(d, p) IS NULL AS unparsed FROM dates;")
    engine.wait_until_idle()

    rows = {k: v for k, v, _ in read(engine.admin, "FORMATTED")}
    assert set(rows) == {"a", "b", "c"}, rows  # the good records around the bad one come out
    assert rows["a"]["BY_COLUMN"] == rows["a"]["FINE"] and rows["a"]["FINE"].isdigit(), rows
    assert rows["b"]["BY_COLUMN"] is None and rows["b"]["FINE"] == rows["a"]["FINE"][:4], rows
    assert rows["c"]["BY_COLUMN"] is not None and len(rows["c"]["BY_COLUMN"]) == 2, rows
    assert all(v["BY_LITERAL"] is None for v in rows.values()), rows
    # PARSE_DATE reads a pattern's length of text, as ksqlDB's FastDateFormat: '2020' of
    # '2020-01-02' with 'yyyy'; not '20' with 'MM'; nothing with an invalid pattern
    assert [rows[k]["UNPARSED"] for k in "abc"] == [False, True, True], rows

    [query] = [q for q in engine.execute("SHOW QUERIES;")[0].queries if q.sink == "FORMATTED"]
    assert query.state == "RUNNING", query  # not restarted in a loop, not ERROR

    errors = _function_errors(engine, str(base + 1))
    messages = sorted(e["errorMessage"] for e in errors)
    # record b: its own pattern and the literal one (TIMESTAMPTOSTRING), PARSE_DATE with its pattern
    assert any("TIMESTAMPTOSTRING" in m and "'invalid'" in m and "Illegal pattern character: n" in m
               for m in messages), messages
    assert any(m.startswith("Error in function PARSE_DATE") for m in messages), messages
    assert len(messages) == 3, messages  # each failing call once: no duplicate entries
    # the literal pattern fails every record, each logged once
    for ts in (base, base + 2):
        logged = [e["errorMessage"] for e in _function_errors(engine, str(ts))]
        assert len([m for m in logged if "TIMESTAMPTOSTRING" in m]) == 1, logged


PATTERN_ALPHABET = "yMdHhmsSaEzZXxVvOQqLDGuYwWecFgknNAKpB'[]{}#-: .T\n"


def _spark_refuses(spark, pattern: str, parsing: bool) -> bool:  # type: ignore[no-untyped-def]
    """Spark's own verdict: its timestamp formatter built for the pattern (and, to format,
    used once: some patterns fail only then)."""
    jvm = spark._jvm
    try:
        formatter = jvm.org.apache.spark.sql.catalyst.util.TimestampFormatter.apply(
            pattern, jvm.java.time.ZoneId.of("UTC"), parsing)
        if not parsing:
            formatter.format(0)
    except Exception:  # noqa: BLE001 - py4j's wrapper of Spark's refusal
        return True
    return False


def test_datetime_pattern_rules_match_spark(spark) -> None:  # type: ignore[no-untyped-def]
    """``pattern_error`` says what Spark says, for formatting and for parsing, over generated
    patterns and the edges (quotes, brackets, letter counts, week-based letters)."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from streamsql.functions.builtins.datetime_patterns import pattern_error

    edges = ["yyyy-MM-dd HH:mm:ss.SSS", "yyyy-MM-dd'T'HH:mm:ssX", "''", "'", "yyyy'", "[yyyy]", "yyyy]", "{", "#",
             "ss.SSS'Z", "S" * 9, "S" * 10, "y" * 6, "y" * 7, "GGGGG", "MMMMM", "xxxxxx", "VV", "V", "vvvv", "OOOO",
             "aa", "B", "u", "YYYY", "e", "E", "F", "Q", "invalid", "é", "\n", "yyyy\nMM", "hh 'o''clock' a"]
    for pattern in edges:
        for parsing in (False, True):
            assert (pattern_error(pattern, parsing) is not None) == _spark_refuses(spark, pattern, parsing), \
                (pattern, parsing, pattern_error(pattern, parsing))

    @settings(max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(st.text(PATTERN_ALPHABET, min_size=1, max_size=10), st.booleans())
    def agrees(pattern: str, parsing: bool) -> None:
        assert (pattern_error(pattern, parsing) is not None) == _spark_refuses(spark, pattern, parsing), \
            (pattern, parsing, pattern_error(pattern, parsing))

    agrees()


def test_an_unknown_time_zone_logs_the_record_and_yields_null(engine, topic_name) -> None:  # type: ignore[no-untyped-def]
    """A time zone Spark does not know failed the whole task (the query restarted in a loop); now
    the call yields null and the record is logged, by literal and by column, as ksqlDB does."""
    base = random.randrange(10**9, 2 * 10**9) * 1000
    src = topic_name("zones")
    engine.execute(f"CREATE STREAM zoned (k VARCHAR KEY, ts BIGINT, z VARCHAR) "
                   f"WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);")
    produce(engine.admin, src, [
        ("a", f'{{"ts": {base}, "z": "America/New_York"}}', 1000),
        ("b", f'{{"ts": {base + 1}, "z": "Mars/Olympus_Mons"}}', 2000),
        ("c", f'{{"ts": {base + 2}, "z": "+05:30"}}', 3000),
    ])
    engine.execute("CREATE STREAM zoned_out AS SELECT k, TIMESTAMPTOSTRING(ts, 'HH:mm', z) AS by_column, "
                   "TIMESTAMPTOSTRING(ts, 'HH:mm', 'Nowhere/City') AS by_literal, "
                   "CONVERT_TZ(FROM_UNIXTIME(ts), 'UTC', z) AS converted, "
                   "TIMESTAMPTOSTRING(ts, 'HH:mm', 'UTC') AS utc FROM zoned;")
    engine.wait_until_idle()

    rows = {k: v for k, v, _ in read(engine.admin, "ZONED_OUT")}
    assert set(rows) == {"a", "b", "c"}, rows
    assert rows["a"]["BY_COLUMN"] is not None and rows["a"]["BY_COLUMN"] != rows["a"]["UTC"], rows
    assert rows["b"]["BY_COLUMN"] is None and rows["b"]["CONVERTED"] is None and rows["b"]["UTC"], rows
    assert rows["c"]["CONVERTED"] is not None, rows
    assert all(v["BY_LITERAL"] is None for v in rows.values()), rows
    [query] = [q for q in engine.execute("SHOW QUERIES;")[0].queries if q.sink == "ZONED_OUT"]
    assert query.state == "RUNNING", query
    messages = sorted(e["errorMessage"] for e in _function_errors(engine, str(base + 1)))
    assert any("TIMESTAMPTOSTRING" in m and "Unknown time-zone ID: Mars/Olympus_Mons" in m for m in messages), messages
    # CONVERT_TZ's record holds its arguments: the timestamp as text, not the epoch millis
    by_zone = [e["errorMessage"] for e in _function_errors(engine, "Mars/Olympus_Mons")]
    assert any("CONVERT_TZ" in m and "Mars/Olympus_Mons" in m for m in by_zone), by_zone
    assert any("Nowhere/City" in m for m in messages), messages


def test_time_zone_rules_match_spark(spark) -> None:  # type: ignore[no-untyped-def]
    """``zone_error`` says what Spark's ``DateTimeUtils.getZoneId`` says, over regions, short ids,
    offsets in every form and near misses."""
    from streamsql.functions.builtins.datetime_patterns import zone_error

    get_zone = spark._jvm.org.apache.spark.sql.catalyst.util.DateTimeUtils.getZoneId
    zones = ["UTC", "GMT", "UT", "Z", "America/New_York", "Europe/London", "Asia/Kolkata", "Etc/GMT+5", "PST", "EST",
             "IST", "+08:00", "+8:00", "-05:3", "+0530", "+05:30:15", "+18:00", "+18:01", "+19", "-1", "GMT+8",
             "UTC-05:30", "UT+1", "GMT+", "UTC+25", "america/new_york", "Mars/Olympus_Mons", "", " UTC", "UTC ",
             "Foo", "US/Pacific", "Etc/UTC", "+", "08:00", "CET", "EST5EDT", "Europe/Kyiv", "GMT0", "UCT"]
    for zone in zones:
        try:
            get_zone(zone)
            refused = False
        except Exception:  # noqa: BLE001 - py4j's wrapper of Java's refusal
            refused = True
        assert (zone_error(zone) is not None) == refused, (zone, zone_error(zone))
