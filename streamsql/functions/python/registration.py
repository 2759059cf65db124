"""Python functions in the function catalog: how a call to a UDF, UDTF or UDAF compiles to Spark SQL.

Every overload of a Python function is registered with Spark (by :mod:`streamsql.functions.python.runtime`)
under its own name, :func:`spark_name` (in the namespace of the files it was loaded from); a
call compiles to that Spark function applied to the arguments, each cast to the declared
parameter type (ksqlDB widens INT → BIGINT → DECIMAL → DOUBLE when it picks an overload; a cast
makes Spark hand the Python code the declared type).

* UDF: ``spark_fn(args)`` typed as ``returns``.
* UDTF: ``spark_fn(args)`` typed ``ARRAY<returns>``; the planner's table-function step turns the
  array into rows (:mod:`streamsql.functions.table_functions`).
* UDAF: not a Spark function at all: GROUP BY runs in the aggregation processor, record by record,
  and a UDAF is one more accumulator there (:mod:`streamsql.functions.python.aggregate`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from streamsql import types as t
from streamsql.functions.compiled import Compiled
from streamsql.functions.python import aggregate
from streamsql.functions.python.signatures import accepts, declared, spark_name
from streamsql.functions.registry import FunctionDef, FunctionRegistry, rejected

if TYPE_CHECKING:
    from streamsql.functions.python.api import FunctionSpec

K = t.Kind
PYTHON_CATEGORY = "PYTHON"


def _argument(c: Compiled, param: t.SqlType | None) -> str:
    if param is None or c.type == param:
        return c.sql
    return f"CAST({c.sql} AS {t.to_spark(param).simpleString()})"


class PythonFunction:
    """All overloads of one Python function name, compiled as one catalog entry."""

    def __init__(self, specs: Sequence[FunctionSpec], namespace: str) -> None:
        self.specs = list(specs)
        self.namespace = namespace
        self.name = self.specs[0].name
        self.kind = self.specs[0].kind
        self.params = [[declared(p) for p in s.params + s.literals] for s in self.specs]

    def overload(self, cs: list[Compiled]) -> int | None:
        for i, params in enumerate(self.params):
            if len(params) == len(cs) and all(accepts(p, c.type) for p, c in zip(params, cs)):
                return i
        return None

    def compile(self, cs: list[Compiled]) -> Compiled:
        i = self.overload(cs)
        if i is None:
            raise rejected(self.name, cs)
        spec, params = self.specs[i], self.params[i]
        args = [_argument(c, p) for c, p in zip(cs, params)]
        fn = spark_name(self.name, i, self.namespace)
        result = declared(spec.returns)
        if self.kind == "TABLE":
            assert result is not None  # the loader refuses ANY as a return type
            return Compiled(f"{fn}({', '.join(args)})", t.Array(result))
        return Compiled(f"{fn}({', '.join(args)})", result)

    def definition(self) -> FunctionDef:
        lo = min(len(p) for p in self.params)
        hi = max(len(p) for p in self.params)
        descriptions = [s.description for s in self.specs if s.description]
        return FunctionDef(self.name, self.kind, self.compile, signatures=[s.signature() for s in self.specs],
                           description=(descriptions[0] if descriptions else "Python function")
                           + f" (Python: {self.specs[0].source_file})",
                           category=PYTHON_CATEGORY, min_args=lo, max_args=hi,
                           accepts=lambda cs: self.overload(cs) is not None)


def register(registry: FunctionRegistry, specs: Sequence[FunctionSpec], previous: set[str],
             namespace: str) -> tuple[list[str], set[str]]:
    """Register ``specs`` (grouped by name) in ``registry``, replacing the Python functions a
    previous load registered there (``previous``: their names; a reload never shadows a
    built-in). ``namespace``: the Spark names' (:func:`spark_name`). Returns the problems, one
    per name that clashes with a built-in function or mixes kinds (those are not registered),
    and the names registered."""
    problems: list[str] = []
    for old in previous:
        registry.unregister(old)
        aggregate.unregister(registry, old)
    registered: set[str] = set()
    by_name: dict[str, list[FunctionSpec]] = {}
    for s in specs:
        by_name.setdefault(s.name, []).append(s)
    for name, group in by_name.items():
        kinds = {s.kind for s in group}
        if registry.get(name) is not None:
            problems.append(f"{group[0].source_file}: function {group[0].python_name} ({name}): the name is a "
                            f"built-in function; choose another name")
            continue
        if len(kinds) > 1:
            problems.append(f"{group[0].source_file}: function {name} is declared as more than one kind "
                            f"({', '.join(sorted(kinds))})")
            continue
        if kinds == {"AGGREGATE"}:
            aggregate.register(registry, name, group, PYTHON_CATEGORY)
        else:
            registry.register(PythonFunction(group, namespace).definition())
        registered.add(name)
    return problems, registered
