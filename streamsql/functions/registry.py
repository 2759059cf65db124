"""The function catalog: ksqlDB function names → Spark SQL, with result types.

Each function is registered once with how to compile a call (Spark SQL text from compiled
arguments) and its result type. Built-ins map onto Spark's where the semantics match and are
written out where they do not; Python UDFs register here too (as Spark UDF calls).
``SHOW FUNCTIONS`` / ``DESCRIBE FUNCTION`` read this registry.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlglot import exp

from streamsql import types as t
from streamsql.errors import AnalysisError, located

if TYPE_CHECKING:
    from streamsql.functions.aggregates import AggregateFunction
    from streamsql.functions.compiled import Compiled
    from streamsql.planner.expressions import ExpressionCompiler

CompileFn = Callable[[list["Compiled"]], "Compiled"]


RawCompileFn = Callable[[Sequence[exp.Expr], "ExpressionCompiler"], "Compiled"]


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
    #: type check of the compiled arguments (None types always pass); False → "does not accept"
    accepts: Callable[[list[Compiled]], bool] | None = None
    #: for syntax-like functions (lambdas, ``MAP(k := v)``, time units): gets the argument trees
    compile_nodes: RawCompileFn | None = None
    #: False for syntax constructors (ARRAY[...], MAP(...), STRUCT(...)) SHOW FUNCTIONS omits
    listed: bool = True
    #: an aggregate's binding to argument types and accumulators (kind AGGREGATE)
    aggregate: AggregateFunction | None = None


class FunctionRegistry:
    """Every function a statement may call, by upper-case name: the built-ins
    (:func:`streamsql.functions.catalog.builtin_registry` registers them) and the Python functions
    loaded into it."""

    def __init__(self) -> None:
        self._functions: dict[str, FunctionDef] = {}

    def register(self, fn: FunctionDef) -> None:
        self._functions[fn.name.upper()] = fn

    def register_aggregate(self, fn: AggregateFunction) -> None:
        """Add an aggregate (built-in or Python); a call outside an aggregation is refused."""

        def not_here(_cs: list[Compiled]) -> Compiled:
            raise AnalysisError(f"Aggregate function {fn.name} can only be used with GROUP BY")

        self.register(FunctionDef(fn.name.upper(), "AGGREGATE", not_here, signatures=fn.signatures,
                                  description=fn.description, category=fn.category,
                                  min_args=fn.min_args, max_args=fn.max_args, aggregate=fn))

    def aggregate(self, name: str) -> AggregateFunction | None:
        fn = self.get(name)
        return fn.aggregate if fn is not None else None

    def unregister(self, name: str) -> None:
        self._functions.pop(name.upper(), None)

    def get(self, name: str) -> FunctionDef | None:
        return self._functions.get(name.upper())

    def all(self) -> list[FunctionDef]:
        return sorted((f for f in self._functions.values() if f.listed), key=lambda f: f.name)

    def is_aggregate(self, name: str) -> bool:
        fn = self.get(name)
        return fn is not None and fn.kind == "AGGREGATE"

    def is_table_function(self, name: str) -> bool:
        fn = self.get(name)
        return fn is not None and fn.kind == "TABLE"

    def compile_call(self, name: str, args: Sequence[exp.Expr], compiler: ExpressionCompiler) -> Compiled:
        fn = self.get(name)
        if fn is None:
            raise unknown_function(name)
        if fn.compile_nodes is not None:
            if len(args) < fn.min_args or (fn.max_args is not None and len(args) > fn.max_args):
                raise rejected_types(name, [_shown_type(compiler, a) for a in args])
            return fn.compile_nodes(args, compiler)
        compiled = [compiler.compile(a) if not isinstance(a, exp.Star) else _star() for a in args]
        bad_arity = len(compiled) < fn.min_args or (fn.max_args is not None and len(compiled) > fn.max_args)
        if bad_arity or (fn.accepts is not None and not fn.accepts(compiled)):
            raise rejected(name, compiled)
        if fn.kind == "TABLE":  # an array of rows-to-be; the SELECT's table-function step explodes it
            return compiler.table_function(fn.name, fn.compile(compiled))
        return fn.compile(compiled)


def rejected(name: str, compiled: Sequence[Compiled]) -> AnalysisError:
    """ksqlDB's error for a call whose compiled arguments match no signature."""
    return rejected_types(name, [c.type for c in compiled if c.sql != "*"])


def rejected_types(name: str, types: Sequence[t.SqlType | str | None]) -> AnalysisError:
    """ksqlDB's error for a call of a known function whose arguments it does not accept — by
    their types, or as shown (``LAMBDA``, a literal): the one "function rejected" message of
    scalar, table and aggregate functions, built-in or Python."""
    shown = ", ".join("null" if ty is None else str(ty) for ty in types)
    return AnalysisError(f"Function '{name.lower()}' does not accept parameters ({shown}).")


def _shown_type(compiler: ExpressionCompiler, node: exp.Expr) -> str:
    if isinstance(node, exp.Lambda):
        return "LAMBDA"
    try:
        ty = compiler.compile(node).type
    except AnalysisError:
        return "null"
    return "null" if ty is None else str(ty)


def _star() -> Compiled:
    from streamsql.functions.compiled import Compiled

    return Compiled("*", None)


def unknown_function(name: str, call: exp.Expr | None = None) -> AnalysisError:
    """ksqlDB's error for a call of a function no registry knows, starting with where the call is
    in the script (``Line: 2, Col: 10: ``) when ``call`` is the parsed call: a typo'd name is
    found without reading the whole statement."""
    return AnalysisError(f"{located(call)}Can't find any functions with the name '{name}'")
