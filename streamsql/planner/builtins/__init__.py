"""ksqlDB's built-in scalar functions, one module per category, each mapping calls onto Spark SQL.

Every module has ``register(reg)``; :func:`register_all` is called once by
:mod:`streamsql.planner.functions` to fill ``REGISTRY``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streamsql.planner.functions import FunctionRegistry


def register_all(reg: FunctionRegistry) -> None:
    from streamsql.planner.builtins import (
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
