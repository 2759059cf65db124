"""ksqlDB's built-in scalar functions, one module per category, each mapping calls onto Spark SQL.

Every module has ``register(reg)``; :func:`register_all` is called once by
:func:`streamsql.functions.catalog.builtin_registry` to fill the registry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streamsql.functions.registry import FunctionRegistry


def register_all(reg: FunctionRegistry) -> None:
    from streamsql.functions.builtins import (
        collections,
        conversion,
        datetime,
        json,
        lambdas,
        math,
        nulls,
        regex,
        string,
        url,
    )

    for module in (string, math, nulls, regex, collections, lambdas, json, url, datetime, conversion):
        module.register(reg)
