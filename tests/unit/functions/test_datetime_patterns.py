"""The date functions' pattern check at planning (``functions/builtins/datetime.py``): a literal
pattern Spark accepts compiles to Spark's function as it is; an invalid literal, or a pattern
from a column, goes through the per-record check that logs the record and yields NULL. (That the
rules are Spark's is held against Spark itself in tests/integration/test_function_errors.py.)"""

from __future__ import annotations

import pytest

from streamsql import types as t
from streamsql.functions.builtins.datetime import checked
from streamsql.functions.builtins.datetime_patterns import PATTERN_CHECK, pattern_error
from streamsql.planner.expressions import Compiled


@pytest.mark.parametrize("pattern, parsing, refused", [
    ("yyyy-MM-dd HH:mm:ss.SSS", False, False), ("yyyy-MM-dd'T'HH:mm:ssX", True, False),
    ("invalid", False, True), ("yyyy'", False, True), ("YYYY", False, True), ("u", False, True),
    ("EEE", False, False), ("EEE", True, True), ("ss.SSS'Z", True, False), ("ss.SSS'Z", False, True),
    ("S" * 10, True, True), ("[yyyy]", False, False), ("yyyy]", False, True), ("{}", False, True),
])
def test_pattern_rules(pattern: str, parsing: bool, refused: bool) -> None:
    assert (pattern_error(pattern, parsing) is not None) == refused, pattern_error(pattern, parsing)


def test_only_patterns_spark_accepts_reach_it_unchecked() -> None:
    ts = Compiled("TS", t.BIGINT)
    good = checked("TIMESTAMPTOSTRING", [ts, Compiled("'yyyy-MM-dd'", t.STRING)], parsing=False)
    assert good[1].sql == "'yyyy-MM-dd'"
    bad = checked("TIMESTAMPTOSTRING", [ts, Compiled("'invalid'", t.STRING)], parsing=False)
    assert bad[1].sql.startswith(f"{PATTERN_CHECK}('TIMESTAMPTOSTRING', 'invalid', false, array(")
    column = checked("PARSE_DATE", [Compiled("D", t.STRING), Compiled("P", t.STRING)], parsing=True)
    assert column[1].sql.startswith(f"{PATTERN_CHECK}('PARSE_DATE', P, true, ")
    # PARSE_TIME checks the pattern with the date it puts in front, and hands on what follows
    time_of = checked("PARSE_TIME", [Compiled("S", t.STRING), Compiled("'HH:mm'", t.STRING)], parsing=True,
                      prefix="yyyy-MM-dd ")
    assert time_of[1].sql == "'HH:mm'"
