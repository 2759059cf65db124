"""The built-in function catalog: a new :class:`FunctionRegistry` of ksqlDB's functions, each
built-in module registering its own into it (none fills a registry when imported).

The engine (its composition root) builds one per engine and loads its Python functions into it
(:class:`streamsql.functions.python.library.PythonFunctions`); the planner, ``SHOW FUNCTIONS``
and the shell's completion read the registry of the engine they are given, never a module-wide one.
"""

from __future__ import annotations

from streamsql.functions import aggregates, builtins, table_functions
from streamsql.functions.registry import FunctionRegistry


def builtin_registry() -> FunctionRegistry:
    """A new registry of ksqlDB's built-in functions: scalar, table and aggregate."""
    registry = FunctionRegistry()
    builtins.register_all(registry)
    table_functions.register(registry)
    aggregates.register(registry)
    return registry
