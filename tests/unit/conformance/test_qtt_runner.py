"""The QTT runner's pure parts: reading and templating files, topic rewriting, encoding, comparison."""

from __future__ import annotations

import json
from decimal import Decimal
import struct
from pathlib import Path

from streamsql import types as t
from streamsql.conformance import cases as case_files
from streamsql.conformance import compare, expectations, qtt, records, topics
from streamsql.conformance import results as case_results
from streamsql.conformance.rawproduce import crc32c, murmur2, partition_for, record_batch
from streamsql.formats import FormatSpec


def test_comments_are_stripped_outside_strings() -> None:
    text = '{"a": "x // not a comment", // comment\n "b": /* block */ 2, "c": "/* kept */"}'
    assert json.loads(case_files.strip_json_comments(text)) == {"a": "x // not a comment", "b": 2, "c": "/* kept */"}


def test_format_and_config_templating_make_one_case_each(tmp_path: Path) -> None:
    f = tmp_path / "my-file.json"
    f.write_text(json.dumps({"tests": [
        {"name": "plain", "statements": ["CREATE STREAM A (X INT) WITH (KAFKA_TOPIC='a', VALUE_FORMAT='JSON');"]},
        {"name": "templ", "format": ["JSON", "DELIMITED"],
         "statements": ["CREATE STREAM A (X INT) WITH (KAFKA_TOPIC='a', VALUE_FORMAT='{FORMAT}');"],
         "topics": [{"name": "a", "valueFormat": "{FORMAT}"}]},
        {"name": "cfg", "config": ["true", "false"], "properties": {"some.flag": "{CONFIG}"}, "statements": ["X;"]},
        {"name": "off", "enabled": False, "statements": ["X;"]},
    ]}))
    cases = case_files.load_file(f)
    assert [c.id for c in cases] == ["my-file/plain", "my-file/templ - JSON", "my-file/templ - DELIMITED",
                                     "my-file/cfg - true", "my-file/cfg - false", "my-file/off"]
    assert "VALUE_FORMAT='DELIMITED'" in cases[2].statements[0]
    assert cases[2].topics == [{"name": "a", "valueFormat": "DELIMITED"}]
    assert cases[4].properties == {"some.flag": "false"}
    assert cases[5].skip_reason and cases[0].skip_reason is None


def test_kafka_topic_literals_are_prefixed() -> None:
    stmt = "CREATE STREAM s (x INT) WITH (kafka_topic = 'in_topic', value_format='JSON', KAFKA_TOPIC='it''s');"
    out = topics.rewrite_statement(stmt, "p1_")
    assert "kafka_topic = 'p1_in_topic'" in out and "KAFKA_TOPIC='p1_it''s'" in out
    assert topics.statement_topics(stmt) == ["in_topic", "it's"]


def test_topics_to_create_leaves_engine_created_topics_alone() -> None:
    case = case_files.QttCase("f/t", "f.json", "t", statements=[
        "CREATE STREAM a (x INT) WITH (kafka_topic='src', value_format='JSON');",
        "CREATE STREAM b (x INT) WITH (kafka_topic='made', value_format='JSON', partitions=3);",
        "CREATE STREAM c WITH (kafka_topic='sink') AS SELECT * FROM a;",
    ], inputs=[{"topic": "src"}, {"topic": "other"}], topics=[{"name": "declared", "partitions": 4}])
    assert topics.topics_to_create(case) == {"declared": 4, "src": 1, "other": 1}


def test_encoding_follows_declared_formats() -> None:
    int_key = FormatSpec("KAFKA", (t.Column("K", t.INTEGER, "key"),))
    assert records.encode_with(int_key, 8) == struct.pack(">i", 8)
    big_key = FormatSpec("KAFKA", (t.Column("K", t.BIGINT, "key"),))
    assert records.encode_with(big_key, 8) == struct.pack(">q", 8)
    str_key = FormatSpec("KAFKA", (t.Column("K", t.STRING, "key"),))
    assert records.encode_with(str_key, "abc") == b"abc"
    assert records.encode_with(FormatSpec("JSON", ()), {"a": 1}) == b'{"a": 1}'
    assert records.encode_with(FormatSpec("DELIMITED", ()), "1,x") == b"1,x"
    assert records.encode_with(FormatSpec("JSON", ()), None) is None
    assert records.window_suffix({"start": 5, "end": 9, "type": "session"}) == struct.pack(">qq", 9, 5)  # end, start
    assert records.window_suffix({"start": 5, "end": 9, "type": "time"}) == struct.pack(">q", 5)


def test_decoding_for_comparison() -> None:
    int_key = FormatSpec("KAFKA", (t.Column("K", t.INTEGER, "key"),))
    assert records.decode_with(int_key, struct.pack(">i", 42)) == 42
    assert isinstance(records.decode_with(int_key, b"xx"), records.Undecodable)
    assert records.decode_with(FormatSpec("JSON", ()), b'{"A": 1.5}') == {"A": 1.5}
    assert records.decode_with(FormatSpec("DELIMITED", ()), b"1,2") == "1,2"
    assert records.decode_with(None, None) is None


def test_data_equal_compares_json_as_data() -> None:
    assert compare.data_equal({"a": 1, "B": [1.0, None]}, {"A": 1.0, "B": [1, None]})
    assert compare.data_equal(0.1 + 0.2, 0.3)
    assert not compare.data_equal(1, "1")
    assert not compare.data_equal(True, 1)
    assert not compare.data_equal({"A": 1}, {"A": 1, "B": 2})
    assert not compare.data_equal([1, 2], [2, 1])
    assert not compare.data_equal(None, {})


def test_data_equal_reads_absent_fields_as_null_like_ksqldb() -> None:
    """ksqlDB's comparator looks expected fields up with Map.get: an absent field is null, so
    objects of the same size match when the differing fields are null (encode.json relies on it)."""
    assert compare.data_equal({"HEX": None, "BASE64": None}, {"HEX": None, "ASCII": None})
    assert not compare.data_equal({"HEX": None, "BASE64": "x"}, {"HEX": None, "ASCII": "x"})
    assert not compare.data_equal({"HEX": None}, {"HEX": None, "ASCII": None})


def test_delimited_text_is_compared_as_ksqldbs_harness_compares_it() -> None:
    # ksqlDB reads a DELIMITED side as a string (StringSerdeSupplier) and compares the text
    # (ExpectedRecordComparator.compareText); a number expected never equals a string
    assert compare.text_equal("1,a,2.0", "1,a,2.0")
    assert not compare.text_equal("1,a,2.0", "1,a,2")
    assert not compare.text_equal("1|2", "1|2.0")
    assert not compare.text_equal("1,a", "1,b")
    assert not compare.text_equal(5, "5")
    assert compare.text_equal(None, None) and not compare.text_equal("", None)
    assert compare.SideFormat("text", "|").equal("1|2", "1|2") and not compare.SideFormat("text", "|").equal(
        "1|2", "1|2.0")


def test_a_topic_no_source_reads_is_compared_as_text_or_json() -> None:
    assert compare.raw_equal({"A": 1}, '{"A": 1}') and compare.raw_equal("1,a,2.0", "1,a,2")
    assert not compare.raw_equal("1,a", "1,b")


def _rec(key, value, ts=0, partition=0, offset=0):  # type: ignore[no-untyped-def]
    return compare.ActualRecord(partition, offset, key, value, ts)


def test_compare_topic_in_order_with_useful_reason() -> None:
    js = compare.SideFormat("json")
    exp = [{"topic": "S", "key": 1, "value": {"A": 1}, "timestamp": 5}, {"topic": "S", "key": 2, "value": {"A": 2}}]
    assert compare.compare_topic("S", exp, [_rec(1, {"A": 1}, 5), _rec(2, {"A": 2}, 0)], js, js, 0) is None
    reason = compare.compare_topic("S", exp, [_rec(1, {"A": 1}, 5), _rec(2, {"A": 3}, 0)], js, js, 0)
    assert reason and "message 2" in reason and '{"A": 2}' in reason and '{"A": 3}' in reason
    reason = compare.compare_topic("S", exp, [_rec(1, {"A": 1}, 5)], js, js, 0)
    assert reason and "expected 2 records but got 1" in reason
    # the timestamp counts when given; the runner passes None (an omitted one matches any, as in
    # ksqlDB's harness); with a default of 0 an omitted one must be 0
    assert compare.compare_topic("S", exp, [_rec(1, {"A": 1}, 5), _rec(2, {"A": 2}, 7)], js, js, 0)
    assert compare.compare_topic("S", exp, [_rec(1, {"A": 1}, 5), _rec(2, {"A": 2}, 7)], js, js, None) is None


def test_a_failure_numbers_messages_from_1_and_shows_windows_alike() -> None:
    """As ksql-test-runner: the first record is message 1; the expected window is shown with the
    fields the actual one has (a ``type`` on one side only read as a second difference)."""
    js = compare.SideFormat("json")
    exp = [{"key": 1, "value": {"C": 1}, "timestamp": 5, "window": {"start": 0, "end": 1000, "type": "TIME"}}]
    act = [compare.ActualRecord(0, 0, 1, {"C": 2}, 5, {"start": 0, "end": 1000, "type": "time"})]
    reason = compare.compare_topic("S", exp, act, js, js, None)
    window = 'window={"start": 0, "end": 1000, "type": "time"}'
    assert reason and reason.startswith("Topic 'S', message 1: Expected") and reason.count(window) == 2, reason


def test_a_window_is_checked_whole_as_ksqldb_compares_window_data() -> None:
    """Start, end and type, even when the record carries no end (a time window whose size the
    runner did not know used to pass on its start alone)."""
    js = compare.SideFormat("json")
    exp = {"key": 1, "value": 1, "window": {"start": 0, "end": 1000, "type": "time"}}

    def matches(window):  # type: ignore[no-untyped-def]
        return compare.record_matches(exp, compare.ActualRecord(0, 0, 1, 1, 5, window), js, js, None)

    assert matches({"start": 0, "end": 1000, "type": "time"})
    assert not matches({"start": 0, "type": "time"})
    assert not matches({"start": 0, "end": 2000, "type": "time"})
    assert not matches({"start": 0, "end": 1000, "type": "session"})
    assert not matches(None)


def test_compare_topic_across_partitions_keeps_per_partition_order() -> None:
    js = compare.SideFormat("json")
    exp = [{"key": 1, "value": 1}, {"key": 2, "value": 2}, {"key": 1, "value": 3}]
    ok = [_rec(1, 1, partition=0), _rec(1, 3, partition=0), _rec(2, 2, partition=1)]
    assert compare.compare_topic("S", exp, ok, js, js, 0) is None
    swapped = [_rec(1, 3, partition=0), _rec(1, 1, partition=0), _rec(2, 2, partition=1)]
    assert compare.compare_topic("S", exp, swapped, js, js, 0)


def test_expected_exception_messages() -> None:
    assert expectations.message_matches("does not exist", "Source FOO does not exist.")
    assert expectations.message_matches(None, "anything")
    assert expectations.message_matches("a  b", "x A B y")
    assert not expectations.message_matches("other", "Source FOO does not exist.")


def test_post_schema_normalization() -> None:
    assert expectations.normalize_schema("ID INT KEY, NAME STRING") == expectations.normalize_schema("`ID` INTEGER KEY, `NAME` STRING")
    assert expectations.normalize_schema("A STRUCT<B VARCHAR, C DECIMAL(4, 2)>") == expectations.normalize_schema(
        "`A` STRUCT<`B` STRING, `C` DECIMAL(4,2)>")


def test_reason_categories_group_similar_failures() -> None:
    a = case_results.reason_category("statement 2 rejected: Not supported yet: CREATE TABLE (tables come later)")
    b = case_results.reason_category("statement 1 rejected: Not supported yet: CREATE TABLE (tables come later)")
    assert a == b == "Not supported yet: CREATE TABLE"
    assert case_results.reason_category("statement 1 rejected: Source 'X' does not exist") == \
        case_results.reason_category("statement 3 rejected: Source 'Y' does not exist")


def test_summary_lines() -> None:
    rs = [case_results.CaseResult("f/a", "f.json", "passed"), case_results.CaseResult("f/b", "f.json", "failed", "x"),
          case_results.CaseResult("f/c", "f.json", "skipped")]
    assert case_results.summary_line(rs) == "1 passed, 1 failed, 1 skipped"
    assert case_results.summary_line(rs[:2]) == "1 passed, 1 failed"
    assert case_results.file_line("f.json", rs).startswith("f.json: 1 passed, 1 failed, 1 skipped")
    rs.append(case_results.CaseResult("f/d", "f.json", "infrastructure", "Python worker failed to connect back"))
    assert case_results.summary_line(rs) == "1 passed, 1 failed, 1 infrastructure failure, 1 skipped"
    assert case_results.file_line("f.json", rs).startswith("f.json: 1 passed, 1 failed, 1 infrastructure, 1 skipped")


def test_test_runner_trio(tmp_path: Path) -> None:
    (tmp_path / "s.sql").write_text("CREATE STREAM A (X INT) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='JSON');")
    (tmp_path / "in.json").write_text('{"inputs": [{"topic": "t", "key": null, "value": {"X": 1}, "timestamp": 3}]}')
    (tmp_path / "out.json").write_text('{"outputs": [{"topic": "t", "value": {"X": 1}, "timestamp": 3}]}')
    case = case_files.load_test_runner_case(tmp_path / "s.sql", tmp_path / "in.json", tmp_path / "out.json")
    assert case.statements and case.inputs[0]["value"] == {"X": 1} and case.outputs[0]["timestamp"] == 3


def test_raw_producer_encoding() -> None:
    assert crc32c(b"123456789") == 0xE3069283
    signed = lambda x: x - 2**32 if x >= 2**31 else x  # noqa: E731
    # values from Kafka's UtilsTest
    assert signed(murmur2(b"21")) == -973932308
    assert signed(murmur2(b"foobar")) == -790332482
    assert partition_for(None, 4) == 0 and partition_for(b"x", 1) == 0
    batch = record_batch(b"k", b"v", 0)
    base_offset, length = struct.unpack_from(">qi", batch)
    assert base_offset == 0 and length == len(batch) - 12
    assert batch[16] == 2  # magic


def test_kafka_bytes_are_base64_in_qtt_files() -> None:
    spec = FormatSpec("KAFKA", (t.Column("B", t.BYTES),))
    assert records.encode_with(spec, "IQ==") == b"!"
    assert records.decode_with(spec, b"!") == "IQ=="


def test_timestamp_only_differences_are_named() -> None:
    js = compare.SideFormat("json")
    exp = [{"key": 1, "value": 1, "timestamp": 0}, {"key": 2, "value": 2}]
    reason = compare.compare_topic("S", exp, [_rec(1, 1, 99), _rec(2, 2, 99)], js, js, 0)
    assert reason and reason.startswith("only timestamps differ")
    reason = compare.compare_topic("S", exp, [_rec(1, 1, 99), _rec(2, 3, 99)], js, js, 0)
    assert reason and "message 2" in reason and not reason.startswith("only")


def test_documented_message_rewrites() -> None:
    assert expectations.message_matches("Line: 1, Col: 21: Column `ID` is a 'KEY' column",
                               "line 1:21: Column `ID` is a 'KEY' column: please use 'PRIMARY KEY' for tables.")
    assert expectations.message_matches("Error in WHERE expression: Cannot compare ID (INTEGER) to 'x' (STRING) with EQUAL.",
                               "Cannot compare ID (INTEGER) to 'x' (STRING) with EQUAL.")
    assert expectations.message_matches("Stream TEST does not exist", "Source TEST does not exist.")
    # syntax errors need no rewrite: the parser renders them as ksqlDB does (errors.syntax_message)
    actual = "line 1:8: Syntax Error\nSyntax error at or near 'X' at line 1:8"
    assert expectations.message_matches("Syntax error at or near 'X' at line 1:8", actual)
    assert not expectations.message_matches("Syntax error at or near 'X' at line 2:8", actual)


def test_topics_to_create_for_a_multi_statement_script() -> None:
    script = ("CREATE STREAM a (x INT) WITH (kafka_topic='src', value_format='JSON');\n"
              "CREATE STREAM b AS SELECT * FROM a WHERE x = ';';")
    case = case_files.QttCase("f/t", "f.json", "t", statements=[script])
    assert topics.topics_to_create(case) == {"src": 1}


def test_report_has_per_file_counts_and_top_failures(tmp_path: Path) -> None:
    results = [
        case_results.CaseResult("a/1", "a.json", "passed"),
        case_results.CaseResult("a/2", "a.json", "failed", "statement 1 rejected: Not supported yet: FOO (later)"),
        case_results.CaseResult("b/1", "b.json", "failed", "statement 2 rejected: Not supported yet: FOO (later)"),
        case_results.CaseResult("b/2", "b.json", "failed", "Topic 'X', message 0: Expected <1, 2> but was <1, 3>"),
        case_results.CaseResult("b/3", "b.json", "skipped", "disabled"),
    ]
    assert case_results.top_failures(results, 1) == [("Not supported yet: FOO", 2)]
    report = tmp_path / "r.json"
    case_results.write_report(report, results, 1.0)
    data = json.loads(report.read_text())
    assert data["files"] == {"a.json": {"passed": 1, "failed": 1, "infrastructure": 0, "skipped": 0},
                             "b.json": {"passed": 0, "failed": 2, "infrastructure": 0, "skipped": 1}}
    assert data["top_failures"][0] == {"category": "Not supported yet: FOO", "tests": 2}
    assert [t["id"] for t in data["tests"]] == ["a/1", "a/2", "b/1", "b/2", "b/3"]


def test_parallel_results_come_back_in_order_with_every_worker_busy() -> None:
    """iter_results queues every case up front: a slow first case does not hold back the start
    of the others (only their reporting), and results keep the order of the cases."""
    import threading
    import time

    started: list[str] = []
    release = threading.Event()

    class Runner(qtt.QttRunner):
        def __init__(self) -> None:  # no broker or Spark: run_case is replaced
            self.parallel = 2
            self._warm = True

        def run_case(self, case: case_files.QttCase) -> case_results.CaseResult:
            started.append(case.id)
            if case.id == "slow":
                assert release.wait(10)
            return case_results.CaseResult(case.id, case.file, "passed")

    cases = [case_files.QttCase(i, "f.json", i, []) for i in ("slow", "b", "c", "d", "e")]
    results: list[case_results.CaseResult] = []
    consumer = threading.Thread(target=lambda: results.extend(Runner().iter_results(cases)))
    consumer.start()
    deadline = time.monotonic() + 10
    while len(started) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sorted(started) == ["b", "c", "d", "e", "slow"]  # all ran while "slow" was still running
    assert results == []  # reported in order: nothing before "slow"
    release.set()
    consumer.join(10)
    assert [r.id for r in results] == ["slow", "b", "c", "d", "e"]


def test_markdown_summary_of_a_report(tmp_path: Path) -> None:
    from streamsql.conformance import report

    results = [case_results.CaseResult("a/1", "a.json", "passed"), case_results.CaseResult("a/2", "a.json", "failed", "timeout: x"),
               case_results.CaseResult("b/1", "b.json", "skipped", "disabled")]
    path = tmp_path / "r.json"
    case_results.write_report(path, results, 90.0)
    text = report.markdown(json.loads(path.read_text()))
    assert text.startswith("**1 of 3 cases passed (33%; 50% of the 2 not disabled), 1 failed, 1 skipped; 1.5 min.**")
    assert "| a | 1/2 | 50% |" in text and "| b | 0/1 | 0% |" in text
    assert "| 1 | timeout |" in text


def test_cases_run_one_at_a_time_until_one_has_warmed_spark() -> None:
    """The first case that runs a query through Spark runs alone (see QttRunner.iter_results:
    concurrent first tasks corrupted Spark's shared environment map)."""
    import threading
    import time

    running: list[int] = []
    peak_before_warm: list[int] = []
    lock = threading.Lock()

    class Runner(qtt.QttRunner):
        def __init__(self) -> None:
            self.parallel = 3
            self._warm = False

        def run_case(self, case: case_files.QttCase) -> case_results.CaseResult:
            with lock:
                running.append(1)
                if not self._warm:
                    peak_before_warm.append(len(running))
            time.sleep(0.05)
            with lock:
                running.pop()
            if case.id == "runs-a-query":
                self._warm = True
            return case_results.CaseResult(case.id, case.file, "passed")

    ids = ["rejected-early", "runs-a-query", "c", "d", "e", "f"]
    results = list(Runner().iter_results([case_files.QttCase(i, "f.json", i, []) for i in ids]))
    assert [r.id for r in results] == ids
    assert peak_before_warm == [1, 1]


def test_markdown_summary_names_a_file_that_is_not_a_report(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from streamsql.conformance import report

    bad = tmp_path / "bad.json"
    bad.write_text('{"passed": 1}')
    assert report.main([str(bad)]) == 2
    assert "is not a report written by streamsql test --json (KeyError" in capsys.readouterr().err
    assert report.main([str(tmp_path / "missing.json")]) == 2


def test_expected_exception_classes_follow_ksqldbs_hierarchy() -> None:
    """Our failure is mapped once to the class ksqlDB throws there, and the expected class must be
    one of its classes (instanceOf): KsqlException used to accept a processing failure, which
    reaches ksqlDB's harness as Kafka Streams' StreamsException (not a KsqlException)."""
    from streamsql.errors import AnalysisError, ParseError, StreamsqlError

    ksql = "io.confluent.ksql."
    parse, analysis, runtime = ParseError("x", 1, 1), AnalysisError("x"), StreamsqlError("Query q failed: x")
    assert expectations.ksql_class(parse, True) == ksql + "parser.exception.ParseFailedException"
    assert expectations.ksql_class(analysis, True) == ksql + "util.KsqlStatementException"
    assert expectations.ksql_class(runtime, False) == "org.apache.kafka.streams.errors.StreamsException"
    for expected in ("parser.exception.ParseFailedException", "util.KsqlStatementException", "util.KsqlException"):
        assert expectations.class_mismatch({"type": ksql + expected}, parse, True) is None
    assert expectations.class_mismatch({"type": ksql + "util.KsqlException"}, analysis, True) is None
    streams = "org.apache.kafka.streams.errors.StreamsException"
    assert expectations.class_mismatch({"type": streams}, analysis, True) is None
    assert expectations.class_mismatch({}, runtime, False) is None
    assert expectations.class_mismatch({"type": ksql + "parser.exception.ParseFailedException"}, analysis, True) == (
        "expected io.confluent.ksql.parser.exception.ParseFailedException but a statement was rejected, "
        "which ksqlDB throws as io.confluent.ksql.util.KsqlStatementException")
    assert expectations.class_mismatch({"type": ksql + "util.KsqlException"}, runtime, False) == (
        "expected io.confluent.ksql.util.KsqlException but processing failed, "
        "which ksqlDB throws as org.apache.kafka.streams.errors.StreamsException")
    assert expectations.class_mismatch({"type": "java.lang.IllegalStateException"}, analysis, True)
    # ksqlDB's parser also builds the statement (a WITH clause's values): "Failed to prepare statement"
    built = AnalysisError("Failed to prepare statement: Configuration WINDOW_SIZE is invalid: x")
    assert expectations.ksql_class(built, True) == ksql + "parser.exception.ParseFailedException"


def test_an_infrastructure_failure_is_reported_as_such_never_run_again_into_a_pass(tmp_path: Path) -> None:
    """The runner used to run a case that hit a Python worker's connect timeout again (up to 3
    times) and report the second run's pass; a case runs once, and the machine's failure has its
    own status, counted apart in the summary and as a failure in the figure."""
    runs: list[str] = []

    class Runner(qtt.QttRunner):
        def __init__(self) -> None:  # no broker or Spark: _run_case_once is replaced
            self.parallel = 1

        def _run_case_once(self, case: case_files.QttCase, feed_first: bool = True) -> case_results.CaseResult:
            runs.append(case.id)
            if case.id == "flaky" and runs.count("flaky") == 1:
                return case_results.CaseResult(case.id, case.file, "failed",
                                               "crash: SparkException: Python worker failed to connect back.")
            return case_results.CaseResult(case.id, case.file, "passed")

    results = Runner().run([case_files.QttCase(i, "f.json", i, []) for i in ("steady", "flaky")])
    assert runs == ["steady", "flaky"]
    assert [(r.id, r.status) for r in results] == [("steady", "passed"), ("flaky", "infrastructure")]
    assert case_results.summary_line(results) == "1 passed, 0 failed, 1 infrastructure failure"
    assert case_results.summarize(results).not_passed == 1
    case_results.write_report(tmp_path / "r.json", results, 1.0)
    data = json.loads((tmp_path / "r.json").read_text())
    assert (data["passed"], data["failed"], data["infrastructure"]) == (1, 0, 1)
    assert {t["id"]: t["status"] for t in data["tests"]} == {"steady": "passed", "flaky": "infrastructure"}
    from streamsql.conformance import report

    assert report.markdown(data).startswith("**1 of 2 cases passed (50%; 50% of the 2 not disabled), "
                                            "1 failed (1 of them infrastructure failures), 0 skipped;")


def test_the_rest_runner_runs_a_case_once_and_reports_an_infrastructure_failure() -> None:
    """The REST runner ran a case whose failure matched a broad list (timeouts, "internal error",
    STREAM_FAILED) a second time and kept the second result; now once, and only the machine's
    failures get the infrastructure status: an engine's failure stays a failure."""
    from streamsql.conformance import rqtt

    runs: list[str] = []
    reasons = {"worker": "crash: Python worker failed to connect back.",
               "engine": "query failed: STREAM_FAILED internal error when processing"}

    class Runner(rqtt.RqttRunner):
        def __init__(self) -> None:  # no server: _run_once is replaced
            pass

        def _run_once(self, case: rqtt.RqttCase) -> case_results.CaseResult:
            runs.append(case.id)
            if runs.count(case.id) == 1:
                return case_results.CaseResult(case.id, case.file, "failed", reasons[case.id])
            return case_results.CaseResult(case.id, case.file, "passed")

    runner = Runner()
    results = [runner.run_case(rqtt.RqttCase(i, "r.json", i, [])) for i in ("worker", "engine")]
    assert runs == ["worker", "engine"]
    assert [r.status for r in results] == ["infrastructure", "failed"]


def test_a_statement_decides_the_partitions_of_a_listed_topic_without_a_count() -> None:
    """A ``topics`` entry without ``partitions`` that a statement creates with PARTITIONS=n is the
    statement's (ksqlDB's harness; creating it with 1 first made the statement fail); an entry
    with a count is made as declared."""
    stmt = "CREATE TABLE l WITH (kafka_topic='left_topic', partitions=128, format='PROTOBUF');"
    case = case_files.QttCase("t/a", "t.json", "a", [stmt], topics=[{"name": "left_topic", "valueFormat": "PROTOBUF"}])
    assert topics.topics_to_create(case) == {}
    case = case_files.QttCase("t/b", "t.json", "b", [stmt], topics=[{"name": "left_topic", "partitions": 2}])
    assert topics.topics_to_create(case) == {"left_topic": 2}


def test_merge_order_is_input_order_only_without_ties() -> None:
    """Inputs can be fed first when a Kafka Streams task, taking the earliest next record across
    topics, would process them in their listed order."""
    def rec(topic: str, ts: int) -> dict[str, object]:
        return {"topic": topic, "timestamp": ts}

    assert qtt.merge_order_is_input_order([rec("a", 1), rec("b", 2), rec("a", 3)])
    # a topic's own records keep their order whatever their timestamps
    assert qtt.merge_order_is_input_order([rec("a", 5), rec("a", 1), rec("b", 6)])
    assert not qtt.merge_order_is_input_order([rec("a", 2), rec("b", 1)])
    # equal timestamps on two topics: which comes first is not the timestamps' to say, but the
    # join's (its right side first)
    assert not qtt.merge_order_is_input_order([rec("a", 1), rec("b", 1)])
    assert qtt.merge_order_is_input_order([rec("a", 1), rec("b", 1)], tie_winner="a")
    assert not qtt.merge_order_is_input_order([rec("a", 1), rec("b", 1)], tie_winner="b")
    # before the sides are known: could some tie-breaking give the input order?
    assert qtt.merge_order_is_input_order([rec("a", 1), rec("b", 1)], any_tie_winner=True)
    assert not qtt.merge_order_is_input_order([rec("a", 2), rec("b", 1)], any_tie_winner=True)
    # a later topic's earlier record is taken before the first topic's later one
    assert not qtt.merge_order_is_input_order([rec("a", 1), rec("a", 9), rec("b", 5)])


def test_two_runners_made_at_once_never_share_topic_names(tmp_path: Path) -> None:
    """Their tag was the second they were made: two runners of one test process on the shared
    broker within one second wrote and read each other's topics (a random-order suite run)."""
    tags = {qtt.QttRunner("127.0.0.1:9", None, work_dir=tmp_path / str(i)).run_tag for i in range(20)}  # type: ignore[arg-type]
    assert len(tags) == 20 and all(tag.isdigit() for tag in tags)


def test_headers_are_compared_as_ksqldbs_runner_compares_them() -> None:
    """A record's headers must equal the expected ones, in order; a record expected without
    headers must have none (ksqlDB's TestExecutor defaults them to an empty list)."""
    js = compare.SideFormat("json")
    with_headers = compare.ActualRecord(0, 0, 1, {"A": 1}, 5, headers=[("h", b"\x01"), ("n", None)])
    want = [{"KEY": "h", "VALUE": "AQ=="}, {"KEY": "n", "VALUE": None}]
    exp = [{"topic": "S", "key": 1, "value": {"A": 1}, "timestamp": 5, "headers": want}]
    assert compare.compare_topic("S", exp, [with_headers], js, js, None) is None
    other = compare.ActualRecord(0, 0, 1, {"A": 1}, 5, headers=[("h", b"\x02"), ("n", None)])
    reason = compare.compare_topic("S", exp, [other], js, js, None)
    assert reason and "headers=[{KEY=h,VALUE=AQ==}, {KEY=n,VALUE=}]" in reason and "{KEY=h,VALUE=Ag==}" in reason
    reordered = compare.ActualRecord(0, 0, 1, {"A": 1}, 5, headers=[("n", None), ("h", b"\x01")])
    assert compare.compare_topic("S", exp, [reordered], js, js, None)
    unexpected = [{"topic": "S", "key": 1, "value": {"A": 1}, "timestamp": 5}]
    assert compare.compare_topic("S", unexpected, [with_headers], js, js, None)
    assert compare.compare_topic("S", unexpected, [_rec(1, {"A": 1}, 5)], js, js, None) is None


def test_a_users_missing_properties_file_is_a_clear_error(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    import argparse

    from streamsql.conformance import command

    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    missing = tmp_path / "nope.properties"
    args = parser.parse_args(["--sql", str(tmp_path / "s.sql"), "--output", str(tmp_path / "o.json"),
                              "--config", str(missing)])
    assert command.run_command(args) == 2
    assert f"Error: config file not found: {missing}" in capsys.readouterr().err


def test_an_expected_integer_never_matches_a_decimal_with_a_scale() -> None:
    """ksqlDB's compareDecimal: an integer literal matches only a DECIMAL of scale 0 (the runner
    used to compare them as numbers, so ``1`` matched ``1.0``)."""
    assert not compare.data_equal({"R": 1}, {"R": Decimal("1.0")})
    assert not compare.data_equal(0, Decimal("0E-7"))
    assert compare.data_equal({"R": 1}, {"R": Decimal("1")})


def test_a_fractional_literal_is_read_exactly_and_compared_at_its_scale(tmp_path: Path) -> None:
    """Expected records are read with their literals (as ksqlDB's BigDecimal reading): a literal
    that is not a double's shortest text is compared as BigDecimal.equals; one that is (all of
    the corpus's, written through doubles) matches a DECIMAL of that value at a scale at least
    its own. The runner used to read ``1.10`` as the double 1.1 and match any scale."""
    f = tmp_path / "output.json"
    f.write_text('{"outputs": [{"topic": "T", "value": {"A": 1.10, "B": 10.0, "C": 8e+18}}]}')
    value = case_files.load_json(f)["outputs"][0]["value"]
    assert value["A"].text == "1.10" and value["A"] == 1.1
    assert compare.data_equal(value["A"], Decimal("1.10"))
    assert not compare.data_equal(value["A"], Decimal("1.1"))
    assert not compare.data_equal(value["A"], Decimal("1.100"))
    assert compare.data_equal(value["B"], Decimal("10.0000"))  # ksqlDB's 10.0000 through a double
    assert not compare.data_equal(value["B"], Decimal("10"))  # a trimmed scale is a difference
    assert not compare.data_equal(value["B"], Decimal("10.0001"))
    assert compare.data_equal(value["C"], Decimal("8000000000000000000"))
    copied = case_files.copy_case(case_files.QttCase("x/y", "x", "y", [], outputs=[{"value": value}]))
    assert copied.outputs[0]["value"]["A"].text == "1.10"


def test_doubles_are_compared_within_ksqldbs_tolerance_and_json_doubles_read_as_doubles() -> None:
    """A DOUBLE within 1e-6, as ksqlDB's compareNumber (absolute, not relative: the runner's old
    relative tolerance passed a standard deviation 0.001 off); a JSON sink's DOUBLE column read as
    a double, a DECIMAL column with the scale it was written with."""
    assert compare.data_equal(case_files.JsonDecimal("0.7580764521133173"), 0.7580764521133172)
    assert not compare.data_equal(case_files.JsonDecimal("5325116385962.54"), 5325116385962.539)
    spec = FormatSpec("JSON", (t.Column("D", t.DOUBLE), t.Column("M", t.Decimal(6, 4)),
                               t.Column("L", t.Array(t.DOUBLE))))
    decoded = records.decode_with(spec, b'{"D": 1, "M": 10.0, "L": [2.5]}')
    assert decoded == {"D": 1.0, "M": Decimal("10.0"), "L": [2.5]}
    assert isinstance(decoded["D"], float) and str(decoded["M"]) == "10.0"
    key = FormatSpec("JSON", (t.Column("K", t.DOUBLE, "key"),))
    assert records.decode_with(key, b"3") == 3.0


def test_the_corpus_runs_under_the_engines_defaults_on_request(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """``--settings defaults`` runs QTT files with the engine's defaults (only ksqlDB's test
    functions added: no single aggregation bucket, and the session's Spark settings), the
    comparison docs/conformance.md reports; the corpus's settings stay the default."""
    import argparse

    from streamsql.conformance import command

    f = tmp_path / "one.json"
    f.write_text(json.dumps({"tests": [{"name": "a", "statements": ["X;"]}]}))
    seen: list[dict[str, str] | None] = []
    monkeypatch.setattr(command, "run_cases", lambda cases, args, out, props=None: seen.append(props) or [])
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    command.run_command(parser.parse_args([str(f)]))
    command.run_command(parser.parse_args([str(f), "--settings", "defaults"]))
    assert seen == [None, qtt.QTT_FUNCTIONS]
    assert qtt.QTT_ENGINE_PROPERTIES == {**qtt.QTT_FUNCTIONS, "streamsql.aggregation.buckets": "1"}


def test_a_decimal_difference_shows_both_numbers_as_written() -> None:
    """The expected literal as the file writes it, the decimal as its text, neither quoted (the
    actual decimal was shown as a string, as if its type differed too)."""
    fmt = compare.SideFormat("json")
    problem = compare.compare_topic("T", [{"value": {"DEC": case_files.JsonDecimal("10.10")}}],
                                    [_rec(None, {"DEC": Decimal("10.1")})], fmt, fmt, None)
    assert problem is not None and '{"DEC": 10.10}' in problem and '{"DEC": 10.1}' in problem
