"""Python functions end to end: a UDF, a vectorized UDF, a UDTF and a UDAF from an extension
directory in streaming queries over the real broker and SparkSession, including a function that
raises on one row (that row in the processing log, the others written)."""

from __future__ import annotations

import textwrap

import pytest

from streamsql.runtime import results as r
from tests.integration.test_engine import produce, read

pytestmark = pytest.mark.integration

EXTENSION = textwrap.dedent('''
    import pandas as pd
    from streamsql.udf import udf, udaf, udtf

    @udf(name="HIDE", returns="VARCHAR", params=["VARCHAR"], description="Masks all but the first letter.")
    def hide(name):
        if name == "boom":
            raise ValueError("cannot hide boom")
        return name[0] + "*" * (len(name) - 1)

    @udf(name="TWICE", returns="BIGINT", params=["BIGINT"], vectorized=True)
    def twice(n: pd.Series) -> pd.Series:
        if (n == 13).any():
            raise ArithmeticError("13 is unlucky")
        return n * 2

    @udtf(name="WITH_INDEX", returns="STRUCT<I INT, TAG VARCHAR>", params=["ARRAY<VARCHAR>"])
    def with_index(tags):
        return [{"I": i, "TAG": tag} for i, tag in enumerate(tags)]

    @udaf(name="LONGEST", returns="VARCHAR", params=["VARCHAR"])
    class Longest:
        """The longest value in the group."""
        def initialize(self):
            return ""
        def aggregate(self, value, acc):
            return value if value is not None and len(value) > len(acc) else acc
        def merge(self, a, b):
            return a if len(a) >= len(b) else b
        def map(self, acc):
            return acc

    @udaf(name="PICKY_SUM", returns="BIGINT", params=["BIGINT"])
    class PickySum:
        """A sum that refuses 13."""
        def initialize(self):
            return 0
        def aggregate(self, value, acc):
            if value == 13:
                raise ArithmeticError("13 is unlucky")
            return acc + (value or 0)
        def merge(self, a, b):
            return a + b
        def map(self, acc):
            return acc
''')


@pytest.fixture
def ext_engine(bootstrap, spark, tmp_path):  # type: ignore[no-untyped-def]
    from streamsql.runtime.config import EngineConfig
    from streamsql.runtime.engine import Engine

    ext = tmp_path / "ext"
    ext.mkdir()
    (ext / "mine.py").write_text(EXTENSION)
    (ext / "broken.py").write_text('from streamsql.udf import udf\n@udf(name="NOPE", returns="INT", params=["INT"])\n'
                                   'def nope():\n    return 1\n')
    e = Engine(EngineConfig(bootstrap, tmp_path / "state", properties={"ksql.extension.dir": str(ext)}), spark=spark)
    notices = e.start()
    e.execute("SET 'auto.offset.reset'='earliest';")
    yield e, notices, ext
    e.close()


def test_udf_udtf_udaf_from_extension_dir(ext_engine, topic_name):  # type: ignore[no-untyped-def]
    engine, notices, ext = ext_engine
    broken = [n for n in notices if str(ext / "broken.py") in n]  # one notice, naming file, function and arity
    assert len(broken) == 1, notices
    assert broken[0].endswith(f"{ext / 'broken.py'}: function nope (NOPE): declares 1 parameters but the Python "
                              f"function takes 0 ()"), notices
    src = topic_name("ev")
    engine.execute(f"CREATE STREAM ev (k VARCHAR KEY, name VARCHAR, n BIGINT, tags ARRAY<VARCHAR>) "
                   f"WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);")
    produce(engine.admin, src, [
        ("a", '{"name": "alice", "n": 1, "tags": ["x", "y"]}', 1000),
        ("a", '{"name": "boom", "n": 13, "tags": []}', 2000),
        ("b", '{"name": "bo", "n": 3, "tags": ["z"]}', 3000),
    ])
    # one query at a time: each query's start spawns a Python source runner that must connect
    # back to Spark within 10 s, which a loaded 2-core machine can miss when several start at once
    for statement in [
        "CREATE STREAM masked AS SELECT k, HIDE(name) AS m, TWICE(n) AS d FROM ev;",
        "CREATE STREAM tagged AS SELECT k, WITH_INDEX(tags) AS t, EXPLODE(tags) AS tag FROM ev;",
        "CREATE TABLE longest AS SELECT k, LONGEST(name) AS l, COUNT(*) AS c FROM ev "
        "WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY k EMIT CHANGES;",
    ]:
        engine.execute(statement)
        engine.wait_until_idle()

    assert [(k, v) for k, v, _ in read(engine.admin, "MASKED")] == [
        ("a", {"M": "a****", "D": 2}), ("a", {"M": None, "D": None}), ("b", {"M": "b*", "D": 6})]
    assert [(k, v) for k, v, _ in read(engine.admin, "TAGGED")] == [
        ("a", {"T": {"I": 0, "TAG": "x"}, "TAG": "x"}), ("a", {"T": {"I": 1, "TAG": "y"}, "TAG": "y"}),
        ("b", {"T": {"I": 0, "TAG": "z"}, "TAG": "z"})]
    latest = {}
    for k, v, _ in read(engine.admin, "LONGEST"):
        latest[k[:-8]] = v  # windowed key: the key, then the window start (8 bytes, 0 here)
    assert latest == {"a": {"L": "alice", "C": 2}, "b": {"L": "bo", "C": 1}}

    log = [v["message"] for _, v, _ in read(engine.admin, engine.processing_log_topic)
           if isinstance(v, dict) and v["message"].get("recordProcessingError")]
    messages = [m["recordProcessingError"]["errorMessage"] for m in log]
    assert "Error in function HIDE: ValueError: cannot hide boom" in messages
    assert "Error in function TWICE: ArithmeticError: 13 is unlucky" in messages
    assert all(m["type"] == 1 for m in log)
    # HIDE failed on exactly one row, the one whose name is "boom"
    hide_error = "Error in function HIDE: ValueError: cannot hide boom"
    hide_failed = [m["recordProcessingError"]["record"] for m in log
                   if m["recordProcessingError"]["errorMessage"] == hide_error]
    assert hide_failed == ['["boom"]'], log

    [shown] = engine.execute("SHOW FUNCTIONS;")
    assert isinstance(shown, r.FunctionList)
    kinds = {f.name: (f.kind, f.category) for f in shown.functions}
    assert kinds["HIDE"] == ("SCALAR", "PYTHON") and kinds["WITH_INDEX"] == ("TABLE", "PYTHON")
    assert kinds["LONGEST"] == ("AGGREGATE", "PYTHON") and kinds["SPLIT_WORDS"] == ("SCALAR", "PYTHON")
    [described] = engine.execute("DESCRIBE FUNCTION longest;")
    assert isinstance(described, r.FunctionDescription)
    assert "The longest value in the group." in described.function.description
    assert [(v.arguments, v.returns) for v in described.variants] == [(["VARCHAR"], "VARCHAR")]
    assert engine.failed_queries() == []


def test_bad_records_inside_an_aggregation_batch(ext_engine, topic_name):  # type: ignore[no-untyped-def]
    """One micro-batch of an aggregation holds a malformed record and a row its Python UDAF
    refuses: both go to the processing log (the malformed one with its offset), the query goes
    on and every other record of the batch is counted."""
    engine, _, _ = ext_engine
    src = topic_name("picky")
    sink = topic_name("picky_totals")
    engine.execute(f"CREATE STREAM picky (k VARCHAR KEY, v BIGINT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', "
                   f"PARTITIONS=1);")
    produce(engine.admin, src, [("a", '{"v": 1}', 1000), ("a", "{not json", 1001), ("a", '{"v": 13}', 1002),
                                ("a", '{"v": 5}', 1003), ("b", '{"v": 7}', 1004)])
    engine.execute(f"CREATE TABLE picky_totals WITH (KAFKA_TOPIC='{sink}') AS "
                   f"SELECT k, PICKY_SUM(v) AS total, COUNT(*) AS n FROM picky GROUP BY k;")
    engine.wait_until_idle()
    latest = {k: v for k, v, _ in read(engine.admin, sink)}
    # the refused row is dropped whole (ksqlDB drops the record an aggregate fails on)
    assert latest == {"a": {"TOTAL": 6, "N": 2}, "b": {"TOTAL": 7, "N": 1}}
    entries = [v["message"] for _, v, _ in read(engine.admin, engine.processing_log_topic) if isinstance(v, dict)]
    bad = [m["deserializationError"] for m in entries
           if m.get("deserializationError") and m["deserializationError"]["topic"] == src]
    assert [(e["partition"], e["offset"]) for e in bad] == [(0, 1)]
    refused = [m["recordProcessingError"] for m in entries if m.get("recordProcessingError")
               and "PICKY_SUM" in m["recordProcessingError"]["errorMessage"]]
    assert [e["errorMessage"] for e in refused] == ["Error in function PICKY_SUM: ArithmeticError: 13 is unlucky"]


TAGGERS = {
    "first": 'from streamsql.udf import udf\n@udf(name="TAG", returns="VARCHAR", params=["VARCHAR"])\n'
             'def tag(s):\n    return "first:" + s\n'
             '@udf(name="ONLY_FIRST", returns="INT", params=["INT"])\ndef only_first(n):\n    return n\n',
    "second": 'from streamsql.udf import udf\n@udf(name="TAG", returns="VARCHAR", params=["VARCHAR"])\n'
              'def tag(s):\n    return "second:" + s\n',
}


def test_two_engines_in_one_process_keep_their_own_python_functions(  # type: ignore[no-untyped-def]
        bootstrap, spark, tmp_path, topic_name):
    """Two engines of one process and SparkSession, each with its own ``ksql.extension.dir``:
    a function only one declares is unknown to the other (planning, SHOW FUNCTIONS), and a name
    both declare runs each engine's own code in Spark (INSERT VALUES evaluates it there)."""
    from streamsql.errors import AnalysisError
    from streamsql.runtime.config import EngineConfig
    from streamsql.runtime.engine import Engine

    engines = {}
    for name, text in TAGGERS.items():
        ext = tmp_path / name / "ext"
        ext.mkdir(parents=True)
        (ext / "tag.py").write_text(text)
        engines[name] = Engine(EngineConfig(bootstrap, tmp_path / name / "state",
                                            properties={"ksql.extension.dir": str(ext)}), spark=spark)
    try:
        for engine in engines.values():
            assert not [n for n in engine.start() if n.startswith("Python functions")]
        first, second = engines["first"], engines["second"]
        [shown] = second.execute("SHOW FUNCTIONS;")
        assert isinstance(shown, r.FunctionList)
        names = {f.name for f in shown.functions}
        assert "TAG" in names and "ONLY_FIRST" not in names
        with pytest.raises(AnalysisError, match="Can't find any functions with the name 'ONLY_FIRST'"):
            second.execute("DESCRIBE FUNCTION only_first;")
        [described] = first.execute("DESCRIBE FUNCTION only_first;")
        assert isinstance(described, r.FunctionDescription)
        topic = topic_name("tags")
        for name, engine in engines.items():
            engine.execute(f"CREATE STREAM tags (k VARCHAR KEY, v VARCHAR) "
                           f"WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON', PARTITIONS=1);")
        with pytest.raises(AnalysisError, match="Can't find any functions with the name 'ONLY_FIRST'"):
            second.execute("INSERT INTO tags (k, v) VALUES ('x', CAST(ONLY_FIRST(1) AS VARCHAR));")
        for name in ("first", "second", "first"):  # each call after the other engine's
            engines[name].execute(f"INSERT INTO tags (k, v) VALUES ('{name}', TAG('x'));")
        assert [(k, v) for k, v, _ in read(first.admin, topic)] == [
            ("first", {"V": "first:x"}), ("second", {"V": "second:x"}), ("first", {"V": "first:x"})]
    finally:
        for engine in engines.values():
            engine.close()
