"""Table functions in a stream's SELECT list: EXPLODE, CUBE_EXPLODE and Python UDTFs.

A table function turns one input row into zero or more output rows. Each call compiles to an
array (the rows it produces); the query then gets one output row per position up to the longest
array, and each call reads its element at that position (NULL past its end). That is ksqlDB's
rule for several table functions in one SELECT: they are zipped, not crossed
(``EXPLODE([1,2]), EXPLODE(['a'])`` → ``(1,'a'), (2,NULL)``), and a row whose arrays are all
empty or NULL produces nothing.

On Spark: ``__TF0, __TF1 ...`` hold the arrays, ``explode`` over the positions makes the rows
(Spark's generators run in streaming queries, stateless like a filter), and the projection
reads ``try_element_at(__TFi, pos + 1)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from streamsql import types as t
from streamsql.errors import AnalysisError
from streamsql.functions.compiled import Compiled, quote

if TYPE_CHECKING:

    from streamsql.functions.registry import FunctionRegistry
    from streamsql.sql import ast

POSITION = "__TF_POS"
WITH_AGGREGATION = "Table functions cannot be used with aggregations."
WITH_TABLE_SOURCE = "Table source is not supported with table functions"


def array_column(i: int) -> str:
    return f"__TF{i}"


class TableFunctionCollector:
    """Collects the table-function calls of one SELECT list (set on its ExpressionCompiler)."""

    def __init__(self, reject: str | None = None) -> None:
        self.arrays: list[str] = []
        self.reject = reject

    def add(self, array: Compiled) -> Compiled:
        if self.reject:
            raise AnalysisError(self.reject)
        if array.sql not in self.arrays:
            self.arrays.append(array.sql)
        i = self.arrays.index(array.sql)
        element = array.type.element if isinstance(array.type, t.Array) else None
        return Compiled(f"try_element_at({quote(array_column(i))}, {POSITION} + 1)", element)


def uses_table_functions(query: ast.Query, registry: FunctionRegistry) -> bool:
    for item in query.select:
        if item.expression is not None:
            for call in item.expression.find_all(exp.Anonymous):
                if registry.is_table_function(str(call.this)):
                    return True
    return False


# --- the built-in table functions ---------------------------------------------------------------


def _explode(cs: list[Compiled]) -> Compiled:
    return Compiled(cs[0].sql, cs[0].type)


def _cube_explode(cs: list[Compiled]) -> Compiled:
    """All combinations of the array with some elements replaced by NULL, ksqlDB's order (first
    element most significant, NULL before value) and duplicates (from NULL inputs) dropped."""
    x = cs[0].sql
    n = f"size({x})"
    combos = (f"array_distinct(transform(sequence(0, shiftleft(1, {n}) - 1), __m -> "
              f"transform({x}, (__v, __i) -> IF((shiftright(__m, {n} - 1 - __i) & 1) = 1, __v, NULL))))")
    return Compiled(f"(CASE WHEN {x} IS NULL THEN NULL ELSE {combos} END)", t.Array(cs[0].type) if cs[0].type else None)


def _is_array(cs: list[Compiled]) -> bool:
    return len(cs) == 1 and (cs[0].type is None or isinstance(cs[0].type, t.Array))


def register(reg: FunctionRegistry) -> None:
    from streamsql.functions.registry import FunctionDef

    reg.register(FunctionDef("EXPLODE", "TABLE", _explode, signatures=["EXPLODE(ARRAY<T>) -> T"],
                             description="One output row per element of the array (elements of several "
                                         "EXPLODEs in one SELECT are zipped).",
                             category="TABLE", min_args=1, max_args=1, accepts=_is_array))
    reg.register(FunctionDef("CUBE_EXPLODE", "TABLE", _cube_explode,
                             signatures=["CUBE_EXPLODE(ARRAY<T>) -> ARRAY<T>"],
                             description="One output row per combination of the array's elements with "
                                         "some replaced by NULL (a cube).",
                             category="TABLE", min_args=1, max_args=1, accepts=_is_array))
