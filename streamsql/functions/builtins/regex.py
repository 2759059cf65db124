"""Regular-expression functions (category REGULAR EXPRESSION). Java regexes, as Spark's."""

from __future__ import annotations

from streamsql import types as t
from streamsql.functions.builtins.base import add, any_sig, c, sig
from streamsql.functions.compiled import Compiled
from streamsql.functions.registry import FunctionRegistry

CAT = "REGULAR EXPRESSION"


def register(reg: FunctionRegistry) -> None:
    def extract(cs: list[Compiled]) -> Compiled:
        # ksqlDB: REGEXP_EXTRACT(pattern, string [, group]); null (Spark: '') when nothing matches.
        pat, s = cs[0].sql, cs[1].sql
        g = cs[2].sql if len(cs) > 2 else "0"
        return c(f"(CASE WHEN {s} RLIKE {pat} THEN regexp_extract({s}, {pat}, {g}) END)", t.STRING)

    add(reg, "REGEXP_EXTRACT", extract, lo=2, hi=3, category=CAT,
        description="The first match of a pattern (or of one group of it) in a string.",
        accepts=any_sig(sig("str", "str"), sig("str", "str", "int")))

    def extract_all(cs: list[Compiled]) -> Compiled:
        pat, s = cs[0].sql, cs[1].sql
        g = cs[2].sql if len(cs) > 2 else "0"
        return c(f"(CASE WHEN {s} IS NULL OR {pat} IS NULL THEN NULL ELSE regexp_extract_all({s}, {pat}, {g}) END)",
                 t.Array(t.STRING))

    add(reg, "REGEXP_EXTRACT_ALL", extract_all, lo=2, hi=3, category=CAT,
        description="All matches of a pattern (or of one group of it) in a string.",
        accepts=any_sig(sig("str", "str"), sig("str", "str", "int")))
    add(reg, "REGEXP_REPLACE", lambda cs: c(f"regexp_replace({cs[0].sql}, {cs[1].sql}, {cs[2].sql})", t.STRING),
        lo=3, hi=3, category=CAT, description="Replaces every match of a pattern.", accepts=sig("str", "str", "str"))
    add(reg, "REGEXP_SPLIT_TO_ARRAY", lambda cs: c(f"split({cs[0].sql}, {cs[1].sql}, -1)", t.Array(t.STRING)),
        lo=2, hi=2, category=CAT, description="Splits a string around matches of a pattern.",
        accepts=sig("str", "str"))
