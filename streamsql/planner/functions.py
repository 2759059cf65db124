"""The function catalog: ksqlDB function names → Spark SQL, with result types.

Each function is registered once with how to compile a call (Spark SQL text from compiled
arguments) and its result type. Built-ins map onto Spark's where the semantics match and are
written out where they do not; Python UDFs register here too (as Spark UDF calls).
``SHOW FUNCTIONS`` / ``DESCRIBE FUNCTION`` read this registry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Sequence

from sqlglot import exp

from streamsql import types as t
from streamsql.errors import AnalysisError

if TYPE_CHECKING:
    from streamsql.planner.expressions import Compiled, ExpressionCompiler

CompileFn = Callable[[list["Compiled"]], "Compiled"]


@dataclass
class FunctionDef:
    name: str
    kind: str  # SCALAR | AGGREGATE | TABLE
    compile: CompileFn
    signatures: list[str] = field(default_factory=list)
    description: str = ""
    category: str = "OTHER"
    min_args: int = 0
    max_args: int | None = None


class FunctionRegistry:
    def __init__(self) -> None:
        self._functions: dict[str, FunctionDef] = {}

    def register(self, fn: FunctionDef) -> None:
        self._functions[fn.name.upper()] = fn

    def get(self, name: str) -> FunctionDef | None:
        return self._functions.get(name.upper())

    def all(self) -> list[FunctionDef]:
        return sorted(self._functions.values(), key=lambda f: f.name)

    def is_aggregate(self, name: str) -> bool:
        fn = self.get(name)
        return fn is not None and fn.kind == "AGGREGATE"

    def is_table_function(self, name: str) -> bool:
        fn = self.get(name)
        return fn is not None and fn.kind == "TABLE"

    def compile_call(self, name: str, args: Sequence[exp.Expression], compiler: "ExpressionCompiler") -> "Compiled":
        fn = self.get(name)
        if fn is None:
            raise AnalysisError(f"Can't find any functions with the name '{name}'")
        compiled = [compiler.compile(a) if not isinstance(a, exp.Star) else _star() for a in args]
        if len(compiled) < fn.min_args or (fn.max_args is not None and len(compiled) > fn.max_args):
            shown = ", ".join(str(c.type) if c.type else "NULL" for c in compiled)
            raise AnalysisError(f"Function '{name.lower()}' does not accept parameters ({shown}).")
        return fn.compile(compiled)


def _star() -> "Compiled":
    from streamsql.planner.expressions import Compiled

    return Compiled("*", None)


REGISTRY = FunctionRegistry()


def _c(sql: str, ty: t.SqlType | None) -> "Compiled":
    from streamsql.planner.expressions import Compiled

    return Compiled(sql, ty)


def _args(cs: list["Compiled"]) -> str:
    return ", ".join(c.sql for c in cs)


def spark_function(name: str, spark_name: str, result: t.SqlType | None | Callable[[list["Compiled"]], t.SqlType | None],
                   min_args: int, max_args: int | None, category: str, description: str,
                   kind: str = "SCALAR") -> None:
    """Register a ksqlDB function whose semantics equal a Spark function's."""

    def compile_(cs: list["Compiled"]) -> "Compiled":
        ty = result(cs) if callable(result) else result
        return _c(f"{spark_name}({_args(cs)})", ty)

    REGISTRY.register(FunctionDef(name, kind, compile_, description=description, category=category,
                                  min_args=min_args, max_args=max_args))


def _first_type(cs: list["Compiled"]) -> t.SqlType | None:
    return next((c.type for c in cs if c.type is not None), None)


def _register_builtins() -> None:
    s = t.STRING
    for name, spark, res, lo, hi, cat, desc in [
        ("UCASE", "upper", s, 1, 1, "STRING", "Upper-cases a string."),
        ("LCASE", "lower", s, 1, 1, "STRING", "Lower-cases a string."),
        ("TRIM", "trim", s, 1, 1, "STRING", "Removes leading and trailing spaces."),
        ("LEN", "char_length", t.INTEGER, 1, 1, "STRING", "Length of a string."),
        ("CONCAT", "concat", s, 1, None, "STRING", "Concatenates strings."),
        ("ABS", "abs", _first_type, 1, 1, "MATHEMATICAL", "Absolute value."),
        ("CEIL", "ceil", _first_type, 1, 1, "MATHEMATICAL", "Smallest integer not below the value."),
        ("FLOOR", "floor", _first_type, 1, 1, "MATHEMATICAL", "Largest integer not above the value."),
        ("SQRT", "sqrt", t.DOUBLE, 1, 1, "MATHEMATICAL", "Square root."),
        ("COALESCE", "coalesce", _first_type, 1, None, "OTHER", "First non-null argument."),
        ("IFNULL", "coalesce", _first_type, 2, 2, "OTHER", "Second argument when the first is null."),
        ("ARRAY_LENGTH", "size", t.INTEGER, 1, 1, "ARRAY", "Number of elements of an array."),
        ("UUID", "uuid", s, 0, 0, "OTHER", "A random UUID string."),
    ]:
        spark_function(name, spark, res, lo, hi, cat, desc)

    def substring(cs: list["Compiled"]) -> "Compiled":
        # ksqlDB SUBSTRING(str, pos [, len]): 1-based; Spark's substring agrees.
        return _c(f"substring({_args(cs)})", t.STRING)

    REGISTRY.register(FunctionDef("SUBSTRING", "SCALAR", substring, min_args=2, max_args=3, category="STRING",
                                  description="Substring from a 1-based position."))

    def round_(cs: list["Compiled"]) -> "Compiled":
        # ksqlDB rounds half up and ROUND(double) returns BIGINT.
        if len(cs) == 1:
            ty = cs[0].type
            if ty is not None and ty.kind == t.Kind.DOUBLE:
                return _c(f"CAST(round({cs[0].sql}) AS BIGINT)", t.BIGINT)
            return _c(f"round({cs[0].sql})", ty)
        return _c(f"round({_args(cs)})", cs[0].type)

    REGISTRY.register(FunctionDef("ROUND", "SCALAR", round_, min_args=1, max_args=2, category="MATHEMATICAL",
                                  description="Rounds half up; with a scale, to that many decimals."))

    # Aggregates: compiled inside an aggregation (groupBy().agg) by the planner.
    for name, spark, res, lo, hi, desc in [
        ("COUNT", "count", t.BIGINT, 0, 1, "Counts rows (COUNT(*)) or non-null values."),
        ("SUM", "sum", _first_type, 1, 1, "Sum of the values."),
        ("MIN", "min", _first_type, 1, 1, "Smallest value."),
        ("MAX", "max", _first_type, 1, 1, "Largest value."),
        ("AVG", "avg", t.DOUBLE, 1, 1, "Mean of the values."),
    ]:
        spark_function(name, spark, res, lo, hi, "AGGREGATE", desc, kind="AGGREGATE")

    def count(cs: list["Compiled"]) -> "Compiled":
        return _c("count(1)" if not cs or cs[0].sql == "*" else f"count({cs[0].sql})", t.BIGINT)

    REGISTRY.register(FunctionDef("COUNT", "AGGREGATE", count, min_args=0, max_args=1, category="AGGREGATE",
                                  description="Counts rows (COUNT(*)) or non-null values."))


_register_builtins()
