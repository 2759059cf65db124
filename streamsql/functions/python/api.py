"""The public decorators users write Python functions with: ``@udf``, ``@udaf``, ``@udtf``.

A decorator only records a :class:`FunctionSpec` (name, SQL types, the Python object); nothing
is checked or registered until the loader (:mod:`streamsql.functions.python.loader`) imports the file, so a
bad signature is reported with the file and function named, and one file's mistake never leaves
half a registration behind. The decorated object is returned unchanged, so functions stay
plain Python and unit-testable without Spark.

Shapes (ksqlDB's, in Python):

* ``@udf(name="MASK", returns="VARCHAR", params=["VARCHAR"])`` on ``def f(s): ...`` — called once
  per row with Python values (None for SQL NULL). With ``vectorized=True`` the function takes and
  returns pandas Series instead (one call per Arrow batch).
* ``@udtf(name="WORDS", returns="VARCHAR", params=["VARCHAR"])`` on ``def f(s) -> list`` — each
  element of the returned list becomes one output row (like EXPLODE); ``returns`` is the element
  type.
* ``@udaf(name="TOP_WORDS", returns=..., params=["VARCHAR"], literals=["INT"])`` on a class whose
  constructor takes the literal arguments and which has ``initialize() -> acc``,
  ``aggregate(value, acc) -> acc``, ``merge(a, b) -> acc`` and ``map(acc) -> result``.

Several functions may share a name with different ``params`` (overloads, as in ksqlDB); a call
uses the first overload whose parameter types accept the arguments. ``"ANY"`` as a parameter type
accepts any argument type.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

F = TypeVar("F")

SCALAR = "SCALAR"
AGGREGATE = "AGGREGATE"
TABLE = "TABLE"


@dataclass
class FunctionSpec:
    """One Python function (one overload) as declared by a decorator."""

    name: str
    kind: str
    returns: str
    params: list[str]
    impl: Any  # a function (UDF/UDTF) or a class (UDAF)
    description: str = ""
    vectorized: bool = False
    literals: list[str] = field(default_factory=list)  # UDAF constructor arguments (constants)
    source_file: str = "<unknown>"

    @property
    def python_name(self) -> str:
        return getattr(self.impl, "__qualname__", repr(self.impl))

    def signature(self) -> str:
        args = ", ".join(self.params + self.literals)
        return f"{self.name}({args}) -> {'ARRAY<' + self.returns + '>' if self.kind == TABLE else self.returns}"


_collected: list[FunctionSpec] = []
_lock = threading.Lock()


def _record(spec: FunctionSpec) -> None:
    with _lock:
        _collected.append(spec)


def drain() -> list[FunctionSpec]:
    """The specs recorded since the last call (the loader calls this after importing a file)."""
    with _lock:
        out = list(_collected)
        _collected.clear()
    return out


def _name_of(name: str | None, obj: Any) -> str:
    fallback: str = getattr(obj, "__name__", "")
    return (name or fallback).upper()


def udf(name: str | None = None, *, returns: str, params: Sequence[str], description: str = "",
        vectorized: bool = False) -> Callable[[F], F]:
    """Declare a scalar function. ``returns``/``params`` are ksqlDB type text (``VARCHAR``,
    ``ARRAY<BIGINT>``, ``BYTES`` ...)."""

    def wrap(fn: F) -> F:
        _record(FunctionSpec(_name_of(name, fn), SCALAR, returns, list(params), fn,
                             description or (fn.__doc__ or "").strip().split("\n")[0], vectorized))
        return fn

    return wrap


def udtf(name: str | None = None, *, returns: str, params: Sequence[str], description: str = "") -> Callable[[F], F]:
    """Declare a table function: the Python function returns a list; each element is one row.
    ``returns`` is the type of one element."""

    def wrap(fn: F) -> F:
        _record(FunctionSpec(_name_of(name, fn), TABLE, returns, list(params), fn,
                             description or (fn.__doc__ or "").strip().split("\n")[0]))
        return fn

    return wrap


def udaf(name: str | None = None, *, returns: str, params: Sequence[str], literals: Sequence[str] = (),
         description: str = "") -> Callable[[F], F]:
    """Declare an aggregate function on a class (initialize/aggregate/merge/map). ``literals`` are
    the types of trailing constant arguments, passed to the class's constructor (e.g. a top-N's N)."""

    def wrap(cls: F) -> F:
        _record(FunctionSpec(_name_of(name, cls), AGGREGATE, returns, list(params), cls,
                             description or (getattr(cls, "__doc__", None) or "").strip().split("\n")[0],
                             literals=list(literals)))
        return cls

    return wrap
