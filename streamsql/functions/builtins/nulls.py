"""Conditional / null handling (category CONDITIONAL) and AS_VALUE."""

from __future__ import annotations

from streamsql.functions.builtins.base import add, args_sql, c, first_type
from streamsql.functions.compiled import Compiled
from streamsql.functions.registry import FunctionRegistry, rejected

CAT = "CONDITIONAL"


def _same_kinds(name: str, cs: list[Compiled]) -> None:
    from streamsql import types as t

    known = [x.type for x in cs if x.type is not None]
    cats = {"num" if t.is_numeric(ty) else ty.kind for ty in known}
    if len(cats) > 1:
        raise rejected(name, cs)


def register(reg: FunctionRegistry) -> None:
    def coalesce(cs: list[Compiled]) -> Compiled:
        _same_kinds("COALESCE", cs)
        return c(f"coalesce({args_sql(cs)})", first_type(cs))

    add(reg, "COALESCE", coalesce, lo=1, hi=None, category=CAT, description="The first non-null argument.")

    def ifnull(cs: list[Compiled]) -> Compiled:
        _same_kinds("IFNULL", cs)
        return c(f"coalesce({args_sql(cs)})", first_type(cs))

    add(reg, "IFNULL", ifnull, lo=2, hi=2, category=CAT,
        description="The first argument, or the second when the first is null.")
    def nullif(cs: list[Compiled]) -> Compiled:
        _same_kinds("NULLIF", cs)  # ksqlDB's nullIf(T, T): one type parameter for both
        return c(f"nullif({args_sql(cs)})", cs[0].type)

    add(reg, "NULLIF", nullif, lo=2, hi=2, category=CAT,
        description="Null when both arguments are equal, else the first.")
    add(reg, "AS_VALUE", lambda cs: c(cs[0].sql, cs[0].type), lo=1, hi=1, category="OTHER",
        description="Copies a key column into the value.")
