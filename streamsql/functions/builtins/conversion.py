"""Conversions (category CONVERSIONS): numbers from bytes, an integer from a boolean; plus
TO_BYTES/FROM_BYTES, which ksqlDB lists as STRING."""

from __future__ import annotations

from streamsql import types as t
from streamsql.functions.builtins.base import add, any_sig, c, literal_text, sig
from streamsql.functions.compiled import Compiled
from streamsql.functions.registry import FunctionRegistry

ENCODINGS = ("hex", "utf8", "ascii", "base64")


def to_binary(s: str, enc: str) -> str:
    if enc == "hex":
        # ksqlDB accepts 0x..., X'...' and x'...' forms; an odd number of digits is padded with a
        # leading 0 after 0x (as Spark's unhex does) and is null otherwise
        inner = f"substring({s}, 3, char_length({s}) - 3)"
        return (f"unhex(CASE WHEN {s} RLIKE '^[xX]\\'.*\\'$' "
                f"THEN (CASE WHEN char_length({inner}) % 2 = 0 THEN {inner} END) "
                f"WHEN {s} RLIKE '^0x' THEN substring({s}, 3) "
                f"WHEN char_length({s}) % 2 = 0 THEN {s} END)")
    if enc == "utf8":
        return f"encode({s}, 'UTF-8')"
    if enc == "ascii":
        return f"encode({s}, 'US-ASCII')"
    return f"unbase64({s})"


def from_binary(b: str, enc: str, upper_hex: bool = False) -> str:
    """Bytes as text in ``enc``; hex digits lower-case (ENCODE's) or upper-case (FROM_BYTES')."""
    if enc == "hex":
        return f"hex({b})" if upper_hex else f"lower(hex({b}))"
    if enc == "utf8":
        return f"decode({b}, 'UTF-8')"
    if enc == "ascii":
        return f"decode({b}, 'US-ASCII')"
    return f"base64({b})"


def _by_encoding(value: Compiled, enc: Compiled, fn, out: t.SqlType) -> Compiled:
    e = literal_text(enc)
    if e is not None:
        e = e.lower()
        return c(fn(value.sql, e) if e in ENCODINGS else "NULL", out)
    branches = " ".join(f"WHEN lower({enc.sql}) = '{x}' THEN {fn(value.sql, x)}" for x in ENCODINGS)
    return c(f"(CASE {branches} END)", out)


def _swap(b: str, order: Compiled | None) -> str:
    if order is None:
        return f"hex({b})"
    return (f"(CASE WHEN upper({order.sql}) = 'LITTLE_ENDIAN' THEN array_join(reverse(regexp_extract_all(hex({b}), "
            f"'(..)', 1)), '') ELSE hex({b}) END)")


def register(reg: FunctionRegistry) -> None:
    add(reg, "TO_BYTES", lambda cs: _by_encoding(cs[0], cs[1], to_binary, t.BYTES), lo=2, hi=2, category="STRING",
        description="Encodes a string as bytes (hex, utf8, ascii or base64).", accepts=sig("str", "str"))
    add(reg, "FROM_BYTES", lambda cs: _by_encoding(cs[0], cs[1], lambda b, e: from_binary(b, e, upper_hex=True),
                                                   t.STRING), lo=2, hi=2,
        category="STRING", description="Decodes bytes into a string (hex, utf8, ascii or base64).",
        accepts=sig("bytes", "str"))

    def from_bytes(size: int, result: t.SqlType):
        def compile_(cs: list[Compiled]) -> Compiled:
            b = cs[0].sql
            h = _swap(b, cs[1] if len(cs) > 1 else None)
            signed = f"CAST(conv({h}, 16, -10) AS BIGINT)"
            if result == t.INTEGER:
                value = f"CAST(CAST(conv({h}, 16, 10) AS BIGINT) AS INT)"
            elif result == t.BIGINT:
                value = signed
            else:
                value = f"CAST(java_method('java.lang.Double', 'longBitsToDouble', {signed}) AS DOUBLE)"
            return c(f"(CASE WHEN length({b}) = {size} THEN {value} END)", result)

        return compile_

    for name, size, ty in (("INT_FROM_BYTES", 4, t.INTEGER), ("BIGINT_FROM_BYTES", 8, t.BIGINT),
                           ("DOUBLE_FROM_BYTES", 8, t.DOUBLE)):
        add(reg, name, from_bytes(size, ty), lo=1, hi=2, category="CONVERSIONS",
            description=f"Reads a {ty} from {size} bytes (BIG_ENDIAN default, or LITTLE_ENDIAN).",
            accepts=any_sig(sig("bytes"), sig("bytes", "str")))
    add(reg, "INT_FROM_BOOLEAN", lambda cs: c(f"CAST({cs[0].sql} AS INT)", t.INTEGER), lo=1, hi=1,
        category="CONVERSIONS", description="Converts a boolean to an integer: 1 for true, 0 for false.",
        accepts=sig("bool"))
