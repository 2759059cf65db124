"""Python UDAFs as accumulators of the aggregation processor.

A ``@udaf`` class has ksqlDB's shape (``initialize``, ``aggregate``, ``merge``, ``map`` and,
optionally, ``undo``). The aggregation processor (``streamsql.physical.aggregator``) runs every
GROUP BY record by record with one accumulator per group and window, so a Python UDAF is simply
one more :class:`~streamsql.functions.aggregates.AggregateFunction`: each group keeps one
accumulator value (``initialize()``), each input record folds in (``aggregate``), session
windows merging call ``merge``, and the row's value is ``map(acc)``. Its state is bounded by
what the UDAF keeps (a count-min sketch stays a fixed size), not by the group's inputs.

``undo`` (ksqlDB's TableUdaf) is what lets a UDAF aggregate a TABLE; without it, aggregating a
table with the UDAF is rejected, as ksqlDB rejects non-table UDAFs there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from streamsql import types as t
from streamsql.errors import AnalysisError
from streamsql.functions.aggregates import Accumulator, AggregateFunction, BoundAggregate
from streamsql.functions.python.api import FunctionSpec
from streamsql.functions.python.signatures import accepts, declared
from streamsql.functions.registry import FunctionRegistry, rejected_types

#: name -> overloads (FunctionSpec), for accumulators restored from the state store (their
#: pickled state names the function): in a worker, those of the query whose batch runs now
_SPECS: dict[str, list[FunctionSpec]] = {}


def loaded(names: Sequence[str]) -> dict[str, list[FunctionSpec]]:
    """The overloads of those of ``names`` that are Python UDAFs loaded in this process (the
    last load of each name), for a query built without an engine's Python functions."""
    return {n: list(_SPECS[n]) for n in names if n in _SPECS}


def install(specs: dict[str, list[FunctionSpec]]) -> None:
    """Make the UDAFs a query carries the ones its accumulators run in this (worker) process,
    before each of its batches: a worker that ran another engine's query with a UDAF of the
    same name runs this query's own."""
    _SPECS.update({name: list(overloads) for name, overloads in specs.items()})


def _impl(name: str, overload: int, literals: Sequence[Any]) -> Any:
    specs = _SPECS.get(name)
    if specs is None or overload >= len(specs):
        raise AnalysisError(f"Python aggregate function {name} is no longer loaded")
    return specs[overload].impl(*literals)


class FunctionError(Exception):
    """A Python UDAF raised: carries the function's name to the processing log."""

    def __init__(self, function: str, error: BaseException) -> None:
        super().__init__(f"Error in function {function}: {type(error).__name__}: {error}")
        self.function = function
        self.error = error


class PythonAccumulator(Accumulator):
    """One group's value of a Python UDAF. Pickled into the state store as (name, overload,
    literals, accumulator value): the UDAF object is re-created from the loaded function."""

    def __init__(self, name: str, overload: int, literals: Sequence[Any]) -> None:
        self.name, self.overload, self.literals = name, overload, list(literals)
        self._udaf: Any = None
        self.acc = self.udaf.initialize()

    @property
    def udaf(self) -> Any:
        if self._udaf is None:
            self._udaf = _impl(self.name, self.overload, self.literals)
        return self._udaf

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_udaf"] = None
        return state

    @staticmethod
    def _value(args: Sequence[Any]) -> Any:
        return args[0] if len(args) == 1 else tuple(args)

    def add(self, args: Sequence[Any]) -> None:
        try:
            self.acc = self.udaf.aggregate(self._value(args), self.acc)
        except Exception as e:  # the processor drops the record and logs it (the query goes on)
            raise FunctionError(self.name, e) from e

    def remove(self, args: Sequence[Any]) -> None:
        try:
            self.acc = self.udaf.undo(self._value(args), self.acc)
        except Exception as e:
            raise FunctionError(self.name, e) from e

    def merge(self, other: Accumulator) -> None:
        assert isinstance(other, PythonAccumulator)
        try:
            self.acc = self.udaf.merge(self.acc, other.acc)
        except Exception as e:
            raise FunctionError(self.name, e) from e

    def result(self) -> Any:
        try:
            return self.udaf.map(self.acc)
        except Exception as e:
            raise FunctionError(self.name, e) from e


def aggregate_function(name: str, specs: Sequence[FunctionSpec], category: str) -> AggregateFunction:
    """The aggregate-function entry of one Python UDAF name (all its overloads)."""
    def overloads_of_arity(n: int) -> list[int]:
        return [i for i, s in enumerate(specs) if len(s.params) + len(s.literals) == n]

    def columns(n: int) -> int:
        matching = overloads_of_arity(n)
        return len(specs[matching[0]].params) if matching else min(n, len(specs[0].params))

    def bind(types: list[t.SqlType | None], params: list[Any]) -> BoundAggregate:
        for i in overloads_of_arity(len(types) + len(params)):
            spec = specs[i]
            if len(spec.params) == len(types) and all(accepts(declared(p), ty) for p, ty in zip(spec.params, types)):
                def factory(b: BoundAggregate, i: int = i) -> Accumulator:
                    return PythonAccumulator(name, i, b.params)

                return BoundAggregate(name, types, params, declared(spec.returns), factory,
                                      undoable=callable(getattr(spec.impl, "undo", None)))
        raise rejected_types(name, types)

    arities = [len(s.params) + len(s.literals) for s in specs]
    descriptions = [s.description for s in specs if s.description]
    return AggregateFunction(name, bind, columns, min(arities), max(arities),
                             (descriptions[0] if descriptions else "Python aggregate function")
                             + f" (Python: {specs[0].source_file})",
                             [s.signature() for s in specs], category=category)


def register(registry: FunctionRegistry, name: str, specs: Sequence[FunctionSpec], category: str) -> None:
    _SPECS[name] = list(specs)
    registry.register_aggregate(aggregate_function(name, specs, category))


def unregister(registry: FunctionRegistry, name: str) -> None:
    _SPECS.pop(name, None)
    registry.unregister(name)
