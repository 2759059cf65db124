"""The process's function catalog: one :class:`FunctionRegistry`, built from the built-in modules
on first use (each module registers its functions into it; none fills a registry when imported).

One per process, not per engine: Python function files load into it process-wide (see
:mod:`streamsql.functions.python.library`), and the planner, ``SHOW FUNCTIONS`` and the
shell's completion all read the same catalog.
"""

from __future__ import annotations

import threading

from streamsql.functions import aggregates, builtins, table_functions
from streamsql.functions.registry import FunctionRegistry

_lock = threading.Lock()
_registry: list[FunctionRegistry] = []


def builtin_registry() -> FunctionRegistry:
    """A new registry of ksqlDB's built-in functions: scalar, table and aggregate."""
    registry = FunctionRegistry()
    builtins.register_all(registry)
    table_functions.register(registry)
    aggregates.register(registry)
    return registry


def registry() -> FunctionRegistry:
    """The process's registry, built on the first call."""
    with _lock:
        if not _registry:
            _registry.append(builtin_registry())
        return _registry[0]
