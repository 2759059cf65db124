"""Python functions without Spark: loading and rejecting files, catalog entries and signatures,
how calls compile (overloads, casts, UDAF shape), and table functions in the planner."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from streamsql import types as t
from streamsql.catalog import Catalog, Source
from streamsql.errors import AnalysisError
from streamsql.functions.catalog import builtin_registry
from streamsql.functions.python.library import PythonFunctions
from streamsql.functions.registry import FunctionRegistry
from streamsql.planner.planner import Planner
from streamsql.sql import parse

GOOD = '''
from streamsql.udf import udf, udaf, udtf

@udf(name="SHOUT", returns="VARCHAR", params=["VARCHAR"], description="Upper-cases.")
def shout(s):
    return s.upper()

@udf(name="SHOUT", returns="VARCHAR", params=["VARCHAR", "INT"])
def shout_n(s, n):
    return s.upper() * n

@udtf(name="CHARS", returns="VARCHAR", params=["VARCHAR"])
def chars(s):
    return list(s)

@udaf(name="LONGEST", returns="VARCHAR", params=["VARCHAR"], literals=["INT"])
class Longest:
    def __init__(self, limit):
        self.limit = limit
    def initialize(self):
        return ""
    def aggregate(self, value, acc):
        return value if value and len(value) > len(acc) else acc
    def merge(self, a, b):
        return a if len(a) >= len(b) else b
    def map(self, acc):
        return acc[: self.limit]
'''

BAD_FILES = {
    "bad_type.py": ('from streamsql.udf import udf\n@udf(name="F1", returns="VARCHAR", params=["NOPE<"])\n'
                    'def f1(x):\n    return x\n', "f1 (F1): bad parameter 1 type 'NOPE<'"),
    "bad_arity.py": ('from streamsql.udf import udf\n@udf(name="F2", returns="INT", params=["INT", "INT"])\n'
                     'def f2(x):\n    return x\n', "f2 (F2): declares 2 parameters but the Python function takes 1 (x)"),
    "bad_udaf.py": ('from streamsql.udf import udaf\n@udaf(name="F3", returns="INT", params=["INT"])\n'
                    'class F3:\n    def initialize(self):\n        return 0\n', "F3 (F3): UDAF class lacks method(s) aggregate, merge, map"),
    "bad_import.py": ("import no_such_module_here\n", "cannot import: ModuleNotFoundError"),
    "builtin_clash.py": ('from streamsql.udf import udf\n@udf(name="ABS", returns="INT", params=["INT"])\n'
                         'def my_abs(x):\n    return x\n', "my_abs (ABS): the name is a built-in function"),
    "bad_return.py": ('from streamsql.udf import udf\n@udf(name="F4", returns="ANY", params=["INT"])\n'
                      'def f4(x):\n    return x\n', "f4 (F4): the return type must be a SQL type"),
}


@pytest.fixture
def extension_dir(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "good.py").write_text(GOOD)
    (tmp_path / "_private.py").write_text("raise RuntimeError('never imported')\n")
    for name, (text, _) in BAD_FILES.items():
        (tmp_path / name).write_text(text)
    yield tmp_path


@pytest.fixture
def python_functions() -> PythonFunctions:
    """An engine's Python functions over its own registry of the built-ins."""
    return PythonFunctions(builtin_registry())


@pytest.fixture
def registry(python_functions: PythonFunctions) -> FunctionRegistry:
    return python_functions.registry


def test_load_reports_each_bad_file_and_function_and_loads_the_rest(extension_dir: Path, registry: FunctionRegistry,
                                                                    python_functions: PythonFunctions) -> None:
    problems = python_functions.load(str(extension_dir))
    for name, (_, expected) in BAD_FILES.items():
        matching = [p for p in problems if str(extension_dir / name) in p]
        assert matching, f"no problem reported for {name}: {problems}"
        assert expected in matching[0], matching[0]
    assert not any("_private.py" in p for p in problems)
    shout = registry.get("SHOUT")
    assert (shout.kind, shout.category) == ("SCALAR", "PYTHON")
    assert shout.signatures == ["SHOUT(VARCHAR) -> VARCHAR", "SHOUT(VARCHAR, INT) -> VARCHAR"]
    assert "good.py" in shout.description
    assert registry.get("CHARS").kind == "TABLE"
    assert registry.get("LONGEST").signatures == ["LONGEST(VARCHAR, INT) -> VARCHAR"]
    assert registry.get("F2") is None and registry.get("ABS").category != "PYTHON"
    # the seed functions from udfs/ are there too, and leave with nothing when reloaded without
    # (signatures as declared by the @udf decorators in udfs/text.py)
    split_words = ["SPLIT_WORDS(VARCHAR) -> ARRAY<VARCHAR>", "SPLIT_WORDS(VARCHAR, BOOLEAN) -> ARRAY<VARCHAR>"]
    assert (registry.get("SPLIT_WORDS").kind, registry.get("SPLIT_WORDS").signatures) == ("SCALAR", split_words)
    assert registry.get("HEAVY_HITTERS").kind == "AGGREGATE"
    assert python_functions.load(None) == []
    assert registry.get("SHOUT") is None and registry.get("SPLIT_WORDS").signatures == split_words


def test_loading_says_which_directories_to_ship_and_calls_no_spark(extension_dir: Path,
                                                                    python_functions: PythonFunctions,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The loader returns what a cluster's executors need (the loaded files' directories) and
    ships nothing itself: the engine does (runtime/spark.ship_directory)."""
    from streamsql.functions.python import loader
    from streamsql.runtime import spark as sp

    monkeypatch.setattr(sp, "_ship_dirs", {})
    python_functions.load(str(extension_dir))
    assert set(python_functions.code_directories()) == {loader.SEED_FUNCTIONS_DIR.resolve(), extension_dir.resolve()}
    assert sp._ship_dirs == {}
    python_functions.load(None)
    assert python_functions.code_directories() == (loader.SEED_FUNCTIONS_DIR.resolve(),)


def test_missing_extension_dir_is_reported(tmp_path: Path, python_functions: PythonFunctions) -> None:
    problems = python_functions.load(str(tmp_path / "nope"))
    assert problems == [f"ksql.extension.dir: '{tmp_path / 'nope'}' is not a directory"]


def test_two_engines_registries_keep_their_own_python_functions(extension_dir: Path, tmp_path: Path,
                                                                  catalog: Catalog) -> None:
    """Each engine loads its extension directory into its own registry: the other engine's
    functions are unknown to it, a name both declare compiles to a Spark function of its own
    files (engines may share a SparkSession), and a new registry holds the built-ins only."""
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    (other_dir / "other.py").write_text(
        'from streamsql.udf import udf\n'
        '@udf(name="SHOUT", returns="VARCHAR", params=["VARCHAR"])\ndef shout(s):\n    return s + "!"\n'
        '@udf(name="ONLY_OTHER", returns="INT", params=["INT"])\ndef only_other(n):\n    return n\n')
    first, second = PythonFunctions(builtin_registry()), PythonFunctions(builtin_registry())
    first.load(str(extension_dir))
    assert second.load(str(other_dir)) == []
    assert first.registry.get("ONLY_OTHER") is None and second.registry.get("ONLY_OTHER") is not None
    assert second.registry.get("CHARS") is None and first.registry.get("CHARS") is not None
    assert first.names() >= {"SHOUT", "CHARS", "LONGEST"} and "ONLY_OTHER" not in first.names()
    sql = "CREATE STREAM O AS SELECT K, SHOUT(MSG) S FROM LOGS;"
    first_call = plan(catalog, sql, first.registry).columns[1].sql
    second_call = plan(catalog, sql, second.registry).columns[1].sql
    assert first_call != second_call and "shout_0" in first_call and "shout_0" in second_call
    with pytest.raises(AnalysisError, match="Can't find any functions with the name 'ONLY_OTHER'"):
        plan(catalog, "CREATE STREAM O AS SELECT K, ONLY_OTHER(N) X FROM LOGS;", first.registry)
    assert builtin_registry().get("SHOUT") is None and builtin_registry().get("SPLIT_WORDS") is None


def test_each_engine_s_queries_carry_its_own_udaf(extension_dir: Path, tmp_path: Path) -> None:
    """Two engines declare a UDAF of one name: each one's aggregation carries its own to the
    workers, and a worker running one query's batch after the other's runs that query's UDAF."""
    from streamsql.functions.python.aggregate import _impl, install

    other_dir = tmp_path / "other"
    other_dir.mkdir()
    (other_dir / "shortest.py").write_text(
        'from streamsql.udf import udaf\n'
        '@udaf(name="LONGEST", returns="VARCHAR", params=["VARCHAR"], literals=["INT"])\n'
        'class Shortest:\n'
        '    def __init__(self, limit):\n        self.limit = limit\n'
        '    def initialize(self):\n        return None\n'
        '    def aggregate(self, value, acc):\n        return value if acc is None or len(value) < len(acc) else acc\n'
        '    def merge(self, a, b):\n        return a\n'
        '    def map(self, acc):\n        return acc\n')
    first, second = PythonFunctions(builtin_registry()), PythonFunctions(builtin_registry())
    first.load(str(extension_dir))
    assert second.load(str(other_dir)) == []
    mine, theirs = first.aggregates(["LONGEST", "SHOUT", "COUNT"]), second.aggregates(["LONGEST"])
    assert list(mine) == list(theirs) == ["LONGEST"] and mine["LONGEST"][0].impl is not theirs["LONGEST"][0].impl

    def folded(words: list[str]) -> str:
        udaf = _impl("LONGEST", 0, [10])
        acc = udaf.initialize()
        for word in words:
            acc = udaf.aggregate(word, acc)
        return str(udaf.map(acc))

    install(theirs)
    assert folded(["abc", "a", "ab"]) == "a"
    install(mine)  # the next batch in this worker is the first engine's query's
    assert folded(["abc", "a", "ab"]) == "abc"


@pytest.fixture
def catalog() -> Catalog:
    c = Catalog()
    c.add(Source("LOGS", "STREAM", [t.Column("K", t.STRING, "key"), t.Column("MSG", t.STRING),
                                    t.Column("N", t.INTEGER), t.Column("A", t.Array(t.BIGINT)),
                                    t.Column("B", t.Array(t.STRING))],
                 topic="logs", key_format="KAFKA", value_format="JSON"))
    c.add(Source("TBL", "TABLE", [t.Column("K", t.STRING, "key"), t.Column("A", t.Array(t.BIGINT))],
                 topic="tbl", key_format="KAFKA", value_format="JSON"))
    return c


def plan(catalog: Catalog, sql: str, functions: FunctionRegistry | None = None):  # type: ignore[no-untyped-def]
    [stmt] = parse(sql)
    return Planner(catalog, functions or builtin_registry()).plan_query(stmt.query, persistent=True, sink_name=stmt.name)


def test_calls_compile_to_the_overload_with_casts(catalog: Catalog, extension_dir: Path,
                                                  python_functions: PythonFunctions) -> None:
    python_functions.load(str(extension_dir))
    functions = python_functions.registry
    p = plan(catalog, "CREATE STREAM O AS SELECT K, SHOUT(MSG) A1, SHOUT(MSG, N) A2 FROM LOGS;", functions)
    sqls = [c.sql for c in p.columns[1:]]
    assert re.fullmatch(r"streamsql_py_(\w+)_shout_0\(`MSG`\)", sqls[0]), sqls
    assert sqls[1] == sqls[0].replace("_shout_0(`MSG`)", "_shout_1(`MSG`, `N`)")
    assert p.columns[1].type == t.STRING
    with pytest.raises(AnalysisError, match=r"Function 'shout' does not accept parameters \(INTEGER\)"):
        plan(catalog, "CREATE STREAM O AS SELECT K, SHOUT(N) FROM LOGS;", functions)
    p = plan(catalog, "CREATE TABLE O AS SELECT K, LONGEST(MSG, 3) L FROM LOGS GROUP BY K;", functions)
    [call] = p.calls  # a UDAF is an accumulator of the aggregation processor
    assert call.function.name == "LONGEST" and call.function.params == [3] and call.function.result_type == t.STRING
    acc = call.function.create()
    words = ("a", "abcde", "ab", "xyz")
    for word in words:
        acc.add([word])
    # LONGEST keeps the first longest value and cuts it to the literal (3): computed independently
    assert acc.result() == max(words, key=len)[:3] == "abc"


def test_table_functions_zip_into_one_flatmap(catalog: Catalog, extension_dir: Path,
                                              python_functions: PythonFunctions) -> None:
    python_functions.load(str(extension_dir))
    p = plan(catalog, "CREATE STREAM O AS SELECT K, EXPLODE(A) X, EXPLODE(B) Y, EXPLODE(A) Z, CHARS(MSG) C FROM LOGS;",
             python_functions.registry)
    assert p.table_functions[:2] == ["`A`", "`B`"]
    assert re.fullmatch(r"streamsql_py_\w+_chars_0\(`MSG`\)", p.table_functions[2]), p.table_functions
    assert [c.sql for c in p.columns[1:]] == ["try_element_at(`__TF0`, __TF_POS + 1)",
                                              "try_element_at(`__TF1`, __TF_POS + 1)",
                                              "try_element_at(`__TF0`, __TF_POS + 1)",
                                              "try_element_at(`__TF2`, __TF_POS + 1)"]
    assert [c.type for c in p.columns[1:]] == [t.BIGINT, t.STRING, t.BIGINT, t.STRING]
    assert "FLATMAP" in p.explain()
    p = plan(catalog, "CREATE STREAM O AS SELECT K, CUBE_EXPLODE(ARRAY[MSG, MSG]) C FROM LOGS;")
    assert p.columns[1].type == t.Array(t.STRING)


@pytest.mark.parametrize("sql,message", [
    ("CREATE TABLE O AS SELECT K, EXPLODE(A), COUNT(*) FROM LOGS GROUP BY K;",
     "Table functions cannot be used with aggregations."),
    ("CREATE TABLE O AS SELECT K, EXPLODE(A) V FROM TBL;", "Table source is not supported with table functions"),
    ("CREATE STREAM O AS SELECT K FROM LOGS WHERE EXPLODE(A) > 1;", "Table function EXPLODE can only be used in the SELECT list"),
    ("CREATE STREAM O AS SELECT K, EXPLODE(MSG) FROM LOGS;", "Function 'explode' does not accept parameters (STRING)"),
])
def test_table_function_misuse_is_rejected(catalog: Catalog, sql: str, message: str) -> None:
    with pytest.raises(AnalysisError) as info:
        plan(catalog, sql)
    assert message in str(info.value)
