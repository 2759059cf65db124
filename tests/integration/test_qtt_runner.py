"""The QTT runner on the real engine, with hand-written QTT files: a pass, an output mismatch, an
expected exception, a templated format, an unsupported feature, and the CLI's output shape."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import pytest

from streamsql.conformance import cases as case_files
from streamsql.conformance import qtt
from streamsql.conformance.command import add_arguments
from tests.support.corpus import corpus_dir

pytestmark = pytest.mark.integration

# Timestamps are non-zero on purpose: the engine's sink cannot write timestamp 0 (see
# docs/conformance.md), and these tests are about the runner.
TESTS = {"tests": [
    {"name": "pass", "statements": [
        "CREATE STREAM TEST (K STRING KEY, ID bigint, NAME varchar) WITH (kafka_topic='test_topic', value_format='DELIMITED');",
        "CREATE STREAM S1 as SELECT K, name FROM test where id > 100;"],
     "inputs": [{"topic": "test_topic", "key": "0", "value": "0,zero", "timestamp": 10},
                {"topic": "test_topic", "key": "101", "value": "101,one", "timestamp": 20},
                {"topic": "test_topic", "key": "102", "value": "102,two", "timestamp": 30}],
     "outputs": [{"topic": "S1", "key": "101", "value": "one", "timestamp": 20},
                 {"topic": "S1", "key": "102", "value": "two", "timestamp": 30}]},
    {"name": "mismatch", "statements": [
        "CREATE STREAM TEST (ID INT KEY, V INT) WITH (kafka_topic='test_topic', value_format='JSON');",
        "CREATE STREAM OUTPUT AS SELECT ID, V * 2 AS D FROM TEST;"],
     "inputs": [{"topic": "test_topic", "key": 1, "value": {"V": 5}, "timestamp": 7}],
     "outputs": [{"topic": "OUTPUT", "key": 1, "value": {"D": 11}, "timestamp": 7}]},
    {"name": "expected exception", "statements": [
        "CREATE STREAM TEST (ID INT KEY, V INT) WITH (kafka_topic='test_topic', value_format='JSON');",
        "CREATE STREAM OUTPUT AS SELECT ID, NOPE FROM TEST;"],
     "expectedException": {"type": "io.confluent.ksql.util.KsqlStatementException", "message": "NOPE"}},
    {"name": "templated", "format": ["JSON", "DELIMITED"], "statements": [
        "CREATE STREAM TEST (ID INT KEY, V INT) WITH (kafka_topic='test_topic', value_format='{FORMAT}');",
        "CREATE STREAM OUTPUT AS SELECT ID, V FROM TEST WHERE V > 1;"],
     "inputs": [{"topic": "test_topic", "key": 1, "value": {"V": 1}, "timestamp": 1},
                {"topic": "test_topic", "key": 2, "value": {"V": 2}, "timestamp": 2}],
     "outputs": [{"topic": "OUTPUT", "key": 2, "value": {"V": 2}, "timestamp": 2}]},
    {"name": "unsupported", "statements": [
        "CREATE STREAM A (ID INT KEY, V INT) WITH (kafka_topic='a', value_format='JSON', partitions=1);",
        # an aggregation without GROUP BY in a persistent query: not supported yet
        "CREATE STREAM J AS SELECT COUNT(*) AS N FROM A;"],
     "inputs": [], "outputs": []},
    # the strict rules (ksqlDB's harness checks nothing for an empty output list, nor the kind of
    # an expected exception beyond its class)
    {"name": "no outputs expected but some written", "statements": [
        "CREATE STREAM TEST (ID INT KEY, V INT) WITH (kafka_topic='test_topic', value_format='JSON');",
        "CREATE STREAM OUTPUT AS SELECT ID, V FROM TEST WHERE V > 1;"],
     "inputs": [{"topic": "test_topic", "key": 1, "value": {"V": 1}, "timestamp": 1},
                {"topic": "test_topic", "key": 2, "value": {"V": 2}, "timestamp": 2}],
     "outputs": []},
    {"name": "no outputs expected and none written", "statements": [
        "CREATE STREAM TEST (ID INT KEY, V INT) WITH (kafka_topic='test_topic', value_format='JSON');",
        "CREATE STREAM OUTPUT AS SELECT ID, V FROM TEST WHERE V > 5;"],
     "inputs": [{"topic": "test_topic", "key": 1, "value": {"V": 1}, "timestamp": 1},
                {"topic": "test_topic", "key": 2, "value": {"V": 2}, "timestamp": 2}],
     "outputs": []},
    # a join whose inputs are in timestamp order across its topics: produced before its query
    # starts, all in its first micro-batch (the results as record at a time)
    {"name": "join fed first", "statements": [
        "CREATE TABLE T (ID INT PRIMARY KEY, NAME STRING) WITH (kafka_topic='t', value_format='JSON');",
        "CREATE STREAM S (ID INT KEY, AMOUNT INT) WITH (kafka_topic='s', value_format='JSON');",
        "CREATE STREAM J AS SELECT S.ID, AMOUNT, NAME FROM S LEFT JOIN T ON S.ID = T.ID;"],
     "inputs": [{"topic": "s", "key": 1, "value": {"AMOUNT": 5}, "timestamp": 10},
                {"topic": "t", "key": 1, "value": {"NAME": "a"}, "timestamp": 20},
                {"topic": "s", "key": 1, "value": {"AMOUNT": 6}, "timestamp": 30}],
     "outputs": [{"topic": "J", "key": 1, "value": {"AMOUNT": 5, "NAME": None}, "timestamp": 10},
                 {"topic": "J", "key": 1, "value": {"AMOUNT": 6, "NAME": "a"}, "timestamp": 30}]},
    # the same join over a table another query derives: fed first, its first batch could miss the
    # table's rows, so the case is run again record at a time
    {"name": "join of a query's output", "statements": [
        "CREATE STREAM R (ID INT KEY, NAME STRING) WITH (kafka_topic='r', value_format='JSON');",
        "CREATE STREAM S (ID INT KEY, AMOUNT INT) WITH (kafka_topic='s', value_format='JSON');",
        "CREATE TABLE T AS SELECT ID, LATEST_BY_OFFSET(NAME) AS NAME FROM R GROUP BY ID;",
        "CREATE STREAM J AS SELECT S.ID, AMOUNT, NAME FROM S LEFT JOIN T ON S.ID = T.ID;"],
     "inputs": [{"topic": "r", "key": 1, "value": {"NAME": "a"}, "timestamp": 10},
                {"topic": "s", "key": 1, "value": {"AMOUNT": 5}, "timestamp": 20}],
     "outputs": [{"topic": "J", "key": 1, "value": {"AMOUNT": 5, "NAME": "a"}, "timestamp": 20}]},
    {"name": "parse failure expected but an unknown column rejected", "statements": [
        "CREATE STREAM TEST (ID INT KEY, V INT) WITH (kafka_topic='test_topic', value_format='JSON');",
        "CREATE STREAM OUTPUT AS SELECT ID, NOPE FROM TEST;"],
     "expectedException": {"type": "io.confluent.ksql.parser.exception.ParseFailedException"}},
    # KsqlStatementException extends KsqlException extends StreamsException: instanceOf holds
    {"name": "streams exception expected and a statement rejected", "statements": [
        "CREATE STREAM TEST (ID INT KEY, V INT) WITH (kafka_topic='test_topic', value_format='JSON');",
        "CREATE STREAM OUTPUT AS SELECT ID, NOPE FROM TEST;"],
     "expectedException": {"type": "org.apache.kafka.streams.errors.StreamsException", "message": "NOPE"}},
]}


@pytest.fixture(scope="module")
def results(bootstrap, spark, tmp_path_factory):  # type: ignore[no-untyped-def]
    d = tmp_path_factory.mktemp("qtt")
    f = d / "handmade.json"
    # the DELIMITED variant has text values
    f.write_text(json.dumps(TESTS))
    cases = case_files.load_file(f)
    for c in cases:
        if c.id.endswith("templated - DELIMITED"):
            c.inputs = [{**r, "value": str(r["value"]["V"])} for r in c.inputs]
            c.outputs = [{**r, "value": str(r["value"]["V"])} for r in c.outputs]
    runner = qtt.QttRunner(bootstrap, spark, work_dir=d / "work", timeout_s=120)
    try:
        yield {r.id: r for r in runner.run(cases)}
    finally:
        runner.close()


def test_passing_case(results) -> None:  # type: ignore[no-untyped-def]
    assert results["handmade/pass"].status == "passed", results["handmade/pass"].reason


def test_output_mismatch_is_a_failure_with_a_useful_reason(results) -> None:  # type: ignore[no-untyped-def]
    r = results["handmade/mismatch"]
    assert r.status == "failed"
    assert "Topic 'OUTPUT', message 1" in r.reason and '{"D": 11}' in r.reason and '{"D": 10}' in r.reason
    assert "qtt" not in r.reason.split("Topic")[0]  # per-case topic prefixes are not shown


def test_expected_exception(results) -> None:  # type: ignore[no-untyped-def]
    assert results["handmade/expected exception"].status == "passed", results["handmade/expected exception"].reason


def test_an_empty_output_list_means_the_queries_write_nothing(results) -> None:  # type: ignore[no-untyped-def]
    r = results["handmade/no outputs expected but some written"]
    assert r.status == "failed" and "expected no output records but topic 'OUTPUT' has 1" in r.reason, r.reason
    r = results["handmade/no outputs expected and none written"]
    assert r.status == "passed", r.reason


def test_an_expected_exception_is_checked_against_the_class_ksqldb_throws(results) -> None:  # type: ignore[no-untyped-def]
    """The expected class is checked as ksqlDB's harness does (instanceOf): an unknown column is a
    KsqlStatementException, not a ParseFailedException (any rejected statement used to pass
    for it); a StreamsException is any of ksqlDB's own exceptions too."""
    r = results["handmade/parse failure expected but an unknown column rejected"]
    assert r.status == "failed", r.reason
    assert r.reason.startswith(
        "expected io.confluent.ksql.parser.exception.ParseFailedException but a statement was rejected, "
        "which ksqlDB throws as io.confluent.ksql.util.KsqlStatementException"), r.reason
    assert "NOPE" in r.reason
    r = results["handmade/streams exception expected and a statement rejected"]
    assert r.status == "passed", r.reason


def test_templated_formats(results) -> None:  # type: ignore[no-untyped-def]
    for fmt in ("JSON", "DELIMITED"):
        r = results[f"handmade/templated - {fmt}"]
        assert r.status == "passed", (fmt, r.reason)


def test_a_join_in_timestamp_order_is_fed_first(results) -> None:  # type: ignore[no-untyped-def]
    r = results["handmade/join fed first"]
    assert r.status == "passed" and r.fed_first, (r.reason, r.fed_first)


def test_a_join_of_a_query_output_runs_record_at_a_time(results) -> None:  # type: ignore[no-untyped-def]
    r = results["handmade/join of a query's output"]
    assert r.status == "passed" and not r.fed_first, (r.reason, r.fed_first)


def test_unsupported_feature_is_reported_not_crashed(results) -> None:  # type: ignore[no-untyped-def]
    r = results["handmade/unsupported"]
    assert r.status == "failed" and "rejected: Not supported yet" in r.reason and "crash" not in r.reason


def test_command_output_shape(bootstrap, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "mini.json"
    f.write_text(json.dumps({"tests": [TESTS["tests"][0], TESTS["tests"][1]]}))
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    report = tmp_path / "report.json"
    args = parser.parse_args([str(f), "--json", str(report), "--bootstrap-servers", bootstrap])
    out = io.StringIO()
    cases = {"mini.json": case_files.load_file(f)}
    # run_cases stops the SparkSession it used; give it its own by not sharing the fixture's:
    # instead, drive the runner as the command does but with the session fixture kept alive.
    from streamsql.conformance import command

    real_get_spark = None
    import streamsql.runtime.spark as spark_mod

    class _KeepAlive:
        def __init__(self, s):  # type: ignore[no-untyped-def]
            self._s = s
            self.streams = s.streams

        def stop(self) -> None:  # the session fixture owns the SparkSession
            pass

        def __getattr__(self, name):  # type: ignore[no-untyped-def]
            return getattr(self._s, name)

    real_get_spark = spark_mod.get_spark
    spark_mod.get_spark = lambda master=None, conf=None: _KeepAlive(real_get_spark(master, conf))  # type: ignore[assignment]
    try:
        results = command.run_cases(cases, args, out)
    finally:
        spark_mod.get_spark = real_get_spark  # type: ignore[assignment]
    lines = out.getvalue().strip().splitlines()
    assert lines[-1] == "1 passed, 1 failed"
    assert any(line.startswith("mini.json: 1 passed, 1 failed, 0 skipped") for line in lines)
    data = json.loads(report.read_text())
    assert {t["id"]: t["status"] for t in data["tests"]} == {"mini/pass": "passed", "mini/mismatch": "failed"}
    assert all("duration_s" in t and "reason" in t for t in data["tests"])
    assert len(results) == 2


@pytest.mark.qtt_corpus
def test_corpus_reader_handles_every_file() -> None:
    root = corpus_dir() / "qtt"
    cases = [c for f in case_files.collect_files([root]) for c in case_files.load_file(f)]
    assert len(cases) >= 1395
    assert len({c.id for c in cases}) == len(cases)


def test_the_example_pipeline_test_passes_and_a_typo_is_located(bootstrap, spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """examples/pipeline-test (the trio docs/conformance.md describes) passes; the same script
    with a typo'd function fails naming the statement's line and the call's line and column."""
    example = Path(__file__).resolve().parents[2] / "examples" / "pipeline-test"
    sql, inputs, outputs = example / "statements.sql", example / "input.json", example / "output.json"
    typo = tmp_path / "typo.sql"
    typo.write_text(sql.read_text().replace("COUNT(*)", "CUONT(*)"))
    cases = [case_files.load_test_runner_case(s, inputs, outputs) for s in (sql, typo)]
    runner = qtt.QttRunner(bootstrap, spark, work_dir=tmp_path / "work", timeout_s=120)
    try:
        passed, failed = runner.run(cases)
    finally:
        runner.close()
    assert passed.status == "passed", passed.reason
    assert failed.status == "failed"
    assert failed.reason == ("statement at line 11 rejected: "
                             "Line: 12, Col: 19: Can't find any functions with the name 'CUONT'"), failed.reason


def test_a_users_pipeline_runs_with_the_users_properties_file(bootstrap, spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``streamsql test --sql`` runs a pipeline with the properties file ``streamsql run`` reads
    (here single values unwrapped), not the corpus's settings; the record cache stays off."""
    from streamsql.conformance import command

    (tmp_path / "streamsql.properties").write_text("ksql.persistence.wrap.single.values=false\n"
                                                   "ksql.streams.cache.max.bytes.buffering=10000000\n")
    sql, inputs, outputs = tmp_path / "s.sql", tmp_path / "in.json", tmp_path / "out.json"
    sql.write_text("CREATE STREAM A (ID STRING KEY, V INT) WITH (kafka_topic='a', value_format='JSON');\n"
                   "CREATE STREAM B AS SELECT ID, V FROM A;\n"
                   "CREATE TABLE C AS SELECT ID, COUNT(*) AS N FROM A GROUP BY ID;\n")
    # single values unwrapped on both sides, as ksqlDB reads the property
    inputs.write_text(json.dumps({"inputs": [{"topic": "a", "key": "k", "value": 5, "timestamp": 1},
                                             {"topic": "a", "key": "k", "value": 6, "timestamp": 2}]}))
    outputs.write_text(json.dumps({"outputs": [{"topic": "B", "key": "k", "value": 5, "timestamp": 1},
                                               {"topic": "B", "key": "k", "value": 6, "timestamp": 2},
                                               {"topic": "C", "key": "k", "value": 1, "timestamp": 1},
                                               {"topic": "C", "key": "k", "value": 2, "timestamp": 2}]}))
    props = command.user_settings(str(tmp_path / "streamsql.properties"))
    assert props["ksql.persistence.wrap.single.values"] == "false"
    assert "ksql.extension.dir" not in props  # the corpus's test functions are not the user's
    runner = qtt.QttRunner(bootstrap, spark, work_dir=tmp_path / "work", timeout_s=120, engine_properties=props)
    try:
        (result,) = runner.run([case_files.load_test_runner_case(sql, inputs, outputs)])
    finally:
        runner.close()
    assert result.status == "passed", result.reason


def test_runner_settings_apply_while_cases_run_and_are_restored(spark) -> None:  # type: ignore[no-untyped-def]
    before = {k: spark.conf.get(k, None) for k in qtt.RUNNER_SPARK_CONF}
    with qtt.runner_settings(spark):
        assert {k: spark.conf.get(k) for k in qtt.RUNNER_SPARK_CONF} == qtt.RUNNER_SPARK_CONF
        # interpreted expressions give the same values as compiled ones (a mixed-type sample)
        row = spark.sql("SELECT CAST(1.5 AS DECIMAL(4,2)) * 3 AS d, concat('a', 2) AS s, "
                        "round(2.345, 2) AS r, array_max(array(3, 1, 2)) AS m").collect()[0]
    assert {k: spark.conf.get(k, None) for k in qtt.RUNNER_SPARK_CONF} == before
    assert (str(row.d), row.s, str(row.r), row.m) == ("4.50", "a2", "2.35", 3)
