"""String functions (category STRING)."""

from __future__ import annotations

from streamsql import types as t
from streamsql.functions.builtins.base import (
    K,
    add,
    any_sig,
    args_sql,
    c,
    kind,
    literal_text,
    sig,
    simple,
)
from streamsql.functions.builtins.lambdas import fresh
from streamsql.functions.compiled import Compiled
from streamsql.functions.registry import FunctionRegistry

CAT = "STRING"


def _is_bytes(cs: list[Compiled]) -> bool:
    return any(kind(x) == K.BYTES for x in cs)


def quote_regex(delim_sql: str) -> str:
    """Spark SQL text of a Java regex matching ``delim_sql``'s value literally."""
    return f"concat('\\\\Q', replace({delim_sql}, '\\\\E', '\\\\E\\\\\\\\E\\\\Q'), '\\\\E')"


def split_literal(s: str, d: str) -> str:
    """ksqlDB SPLIT: the delimiter is text, not a regex; '' splits into characters."""
    return (f"(CASE WHEN {d} = '' THEN split({s}, '', -1) "
            f"ELSE split({s}, {quote_regex(d)}, -1) END)")


def register(reg: FunctionRegistry) -> None:
    s = t.STRING
    simple(reg, "UCASE", "upper", s, lo=1, hi=1, category=CAT, description="Converts a string to upper case.",
           accepts=sig("str"))
    simple(reg, "LCASE", "lower", s, lo=1, hi=1, category=CAT, description="Converts a string to lower case.",
           accepts=sig("str"))
    # Java's String.trim(): every character up to U+0020 (tabs, newlines, ...), not only spaces
    add(reg, "TRIM", lambda cs: c(f"regexp_replace({cs[0].sql}, '^[\\\\x00-\\\\x20]+|[\\\\x00-\\\\x20]+$', '')", s),
        lo=1, hi=1, category=CAT, description="Removes leading and trailing whitespace.", accepts=sig("str"))
    simple(reg, "INITCAP", "initcap", s, lo=1, hi=1, category=CAT,
           description="Capitalizes the first letter of each word, lower-casing the rest.", accepts=sig("str"))
    simple(reg, "MD5", "md5", s, lo=1, hi=1, category=CAT,
           description="The hex-encoded MD5 hash of a string.", accepts=sig("str"))
    simple(reg, "REPLACE", "replace", s, lo=3, hi=3, category=CAT,
           description="Replaces every occurrence of a substring with another.", accepts=sig("str", "str", "str"))

    add(reg, "LEN", lambda cs: c(f"length({cs[0].sql})", t.INTEGER), lo=1, hi=1, category=CAT,
        description="Length of a string (characters) or of bytes.", accepts=sig("strbytes"))

    def concat(cs: list[Compiled]) -> Compiled:
        # ksqlDB skips null arguments (Spark's concat would return null).
        if _is_bytes(cs):
            return c("concat(" + ", ".join(f"coalesce({x.sql}, X'')" for x in cs) + ")", t.BYTES)
        return c(f"concat_ws('', {args_sql(cs)})", s)

    add(reg, "CONCAT", concat, lo=1, hi=None, category=CAT,
        description="Concatenates strings or bytes, skipping nulls.",
        accepts=any_sig(sig("str", "..."), sig("bytes", "...")))

    def concat_ws(cs: list[Compiled]) -> Compiled:
        sep, rest = cs[0], cs[1:]
        if _is_bytes(cs):
            items = ", ".join(f"CAST({x.sql} AS BINARY)" for x in rest)
            return c(f"(CASE WHEN {sep.sql} IS NULL THEN NULL ELSE coalesce(aggregate(filter(array({items}), "
                     f"`__x` -> `__x` IS NOT NULL), CAST(NULL AS BINARY), (`__a`, `__x`) -> CASE WHEN `__a` IS NULL "
                     f"THEN `__x` ELSE concat(`__a`, {sep.sql}, `__x`) END), X'') END)", t.BYTES)
        return c(f"concat_ws({args_sql(cs)})", s)

    add(reg, "CONCAT_WS", concat_ws, lo=2, hi=None, category=CAT,
        description="Concatenates values with a separator, skipping nulls.",
        accepts=any_sig(sig("str", "..."), sig("bytes", "...")))

    def substring(cs: list[Compiled]) -> Compiled:
        # ksqlDB: 1-based, negative counts from the end and is clamped at the start (Spark is not).
        src, pos = cs[0], cs[1]
        ty = t.BYTES if kind(src) == K.BYTES else s
        p = f"(CASE WHEN {pos.sql} < 0 AND -{pos.sql} > length({src.sql}) THEN 1 ELSE {pos.sql} END)"
        if len(cs) == 2:
            return c(f"(CASE WHEN {pos.sql} IS NULL THEN NULL ELSE substring({src.sql}, {p}) END)", ty)
        return c(f"(CASE WHEN {pos.sql} IS NULL OR {cs[2].sql} IS NULL THEN NULL "
                 f"ELSE substring({src.sql}, {p}, {cs[2].sql}) END)", ty)

    add(reg, "SUBSTRING", substring, lo=2, hi=3, category=CAT,
        description="Substring from a 1-based position (negative: from the end), optionally of a length.",
        accepts=any_sig(sig("strbytes", "int"), sig("strbytes", "int", "int")))

    def split(cs: list[Compiled]) -> Compiled:
        if _is_bytes(cs):
            # bytes split as ISO-8859-1 text: one character per byte, so the split is byte-exact
            x = fresh("x")
            text = split_literal(f"decode({cs[0].sql}, 'ISO-8859-1')", f"decode({cs[1].sql}, 'ISO-8859-1')")
            return c(f"transform({text}, {x} -> encode({x}, 'ISO-8859-1'))", t.Array(t.BYTES))
        return c(split_literal(cs[0].sql, cs[1].sql), t.Array(t.STRING))

    add(reg, "SPLIT", split, lo=2, hi=2, category=CAT,
        description="Splits a string (or bytes) on a literal delimiter ('' splits into characters).",
        accepts=any_sig(sig("str", "str"), sig("bytes", "bytes")))

    def instr(cs: list[Compiled]) -> Compiled:
        st, sub = cs[0].sql, cs[1].sql
        pos = cs[2].sql if len(cs) > 2 else "1"
        occ = cs[3].sql if len(cs) > 3 else "1"
        # forward: repeatedly locate from just after the previous hit (state -1: not found)
        fwd = (f"greatest(aggregate(sequence(1, {occ}), {pos} - 1, (`__a`, `__i`) -> CASE WHEN `__a` < 0 THEN -1 "
               f"ELSE (CASE WHEN locate({sub}, {st}, `__a` + 1) = 0 THEN -1 "
               f"ELSE locate({sub}, {st}, `__a` + 1) END) END), 0)")
        # backward (negative position): Java lastIndexOf, via locate on the reversed strings
        L, m = f"char_length({st})", f"char_length({sub})"
        rstart = f"greatest({L} - (`__a` - 2) - {m} + 1, 1)"
        hit = f"locate(reverse({sub}), reverse({st}), {rstart})"
        bwd = (f"greatest(aggregate(sequence(1, {occ}), {L} + {pos} + 2, (`__a`, `__i`) -> CASE WHEN `__a` - 2 < 0 "
               f"THEN -1 ELSE (CASE WHEN {hit} = 0 THEN -1 ELSE {L} - {hit} - {m} + 2 END) END), 0)")
        return c(f"(CASE WHEN {st} IS NULL OR {sub} IS NULL OR {pos} IS NULL OR {occ} IS NULL THEN NULL "
                 f"WHEN {occ} < 1 THEN 0 WHEN {pos} < 0 THEN {bwd} ELSE {fwd} END)", t.INTEGER)

    add(reg, "INSTR", instr, lo=2, hi=4, category=CAT,
        description="1-based position of the n-th occurrence of a substring from a position (0: none).",
        accepts=any_sig(sig("str", "str"), sig("str", "str", "int"), sig("str", "str", "int", "int")))

    for name, fn in (("LPAD", "lpad"), ("RPAD", "rpad")):
        def pad(cs: list[Compiled], fn: str = fn) -> Compiled:
            ty = t.BYTES if _is_bytes(cs) else s
            return c(f"(CASE WHEN length({cs[2].sql}) = 0 OR {cs[1].sql} < 0 THEN NULL "
                     f"ELSE {fn}({args_sql(cs)}) END)", ty)

        add(reg, name, pad, lo=3, hi=3, category=CAT,
            description=f"Pads a string or bytes on the {'left' if name == 'LPAD' else 'right'} to a length.",
            accepts=any_sig(sig("str", "int", "str"), sig("bytes", "int", "bytes")))

    def chr_(cs: list[Compiled]) -> Compiled:
        x = cs[0].sql
        if kind(cs[0]) == K.STRING:
            return c(f"(CASE WHEN {x} RLIKE '^(\\\\\\\\u[0-9a-fA-F]{{4}})+$' THEN "
                     f"decode(unhex(concat_ws('', split(substring({x}, 3), '\\\\\\\\u'))), 'UTF-16BE') END)", s)
        return c(f"(CASE WHEN {x} BETWEEN 0 AND 1114111 AND NOT ({x} BETWEEN 55296 AND 57343) THEN "
                 f"decode(unhex(lpad(hex(CAST({x} AS INT)), 8, '0')), 'UTF-32') END)", s)

    add(reg, "CHR", chr_, lo=1, hi=1, category=CAT,
        description="The character of a Unicode code point (INT) or of '\\uXXXX' escapes (STRING).",
        accepts=any_sig(sig("int"), sig("str")))

    def encode(cs: list[Compiled]) -> Compiled:
        from streamsql.functions.builtins.conversion import from_binary, to_binary

        src, inp, out = cs
        ins, outs = literal_text(inp), literal_text(out)
        encs = ("hex", "utf8", "ascii", "base64")
        if ins is not None and outs is not None:
            ins, outs = ins.lower(), outs.lower()
            if ins not in encs or outs not in encs:
                return c("CAST(NULL AS STRING)", s)
            return c(from_binary(to_binary(src.sql, ins), outs), s)
        branches = " ".join(f"WHEN lower({inp.sql}) = '{i}' AND lower({out.sql}) = '{o}' THEN "
                            f"{from_binary(to_binary(src.sql, i), o)}" for i in encs for o in encs)
        return c(f"(CASE {branches} END)", s)

    add(reg, "ENCODE", encode, lo=3, hi=3, category=CAT,
        description="Re-encodes a string between hex, utf8, ascii and base64.", accepts=sig("str", "str", "str"))

    def mask_sql(x: str, cs: list[Compiled], first: int) -> str:
        defaults = ["'X'", "'x'", "'n'", "'-'"]
        chars = [cs[first + i].sql if len(cs) > first + i else defaults[i] for i in range(4)]
        return f"mask({x}, {', '.join(chars)})"

    add(reg, "MASK", lambda cs: c(mask_sql(cs[0].sql, cs, 1), s), lo=1, hi=5, category=CAT,
        description="Masks letters (X/x), digits (n) and other characters (-).", accepts=sig("str", "str", "..."))
    def masker(which: str):
        def compile_(cs: list[Compiled]) -> Compiled:
            x, n = cs[0].sql, cs[1].sql
            left = f"substring({x}, 1, {n})"
            right_from = f"substring({x}, greatest(char_length({x}) - {n}, 0) + 1)"
            right_rest = f"substring({x}, 1, greatest(char_length({x}) - {n}, 0))"
            tail = f"substring({x}, {n} + 1)"
            body = {
                "MASK_LEFT": f"concat({mask_sql(left, cs, 2)}, {tail})",
                "MASK_KEEP_LEFT": f"concat({left}, {mask_sql(tail, cs, 2)})",
                "MASK_RIGHT": f"concat({right_rest}, {mask_sql(right_from, cs, 2)})",
                "MASK_KEEP_RIGHT": f"concat({mask_sql(right_rest, cs, 2)}, {right_from})",
            }[which]
            return c(f"(CASE WHEN {n} < 0 THEN NULL ELSE {body} END)", s)

        return compile_

    for which in ("MASK_LEFT", "MASK_KEEP_LEFT", "MASK_RIGHT", "MASK_KEEP_RIGHT"):
        add(reg, which, masker(which), lo=2, hi=6, category=CAT,
            description=f"{which.replace('_', ' ').title()}: masks part of a string by a character count.",
            accepts=sig("str", "int", "str", "..."))

    def uuid(cs: list[Compiled]) -> Compiled:
        if not cs:
            return c("uuid()", s)
        h = f"lower(hex({cs[0].sql}))"
        return c(f"(CASE WHEN length({cs[0].sql}) = 16 THEN concat_ws('-', substring({h}, 1, 8), substring({h}, 9, 4), "
                 f"substring({h}, 13, 4), substring({h}, 17, 4), substring({h}, 21, 12)) END)", s)

    add(reg, "UUID", uuid, lo=0, hi=1, category=CAT, description="A random UUID, or the UUID held in 16 bytes.",
        accepts=any_sig(sig(), sig("bytes")))

    def elt(cs: list[Compiled]) -> Compiled:
        return c(f"elt({args_sql(cs)})", s)

    add(reg, "ELT", elt, lo=1, hi=None, category=CAT,
        description="The n-th (1-based) of the following strings; null when out of range.",
        accepts=sig("int", "str", "..."))

    def field_(cs: list[Compiled]) -> Compiled:
        if len(cs) == 1:
            return c("0", t.INTEGER)
        return c(f"(CASE WHEN {cs[0].sql} IS NULL THEN 0 ELSE "
                 f"coalesce(array_position(array({args_sql(cs[1:])}), {cs[0].sql}), 0) END)", t.INTEGER)

    add(reg, "FIELD", field_, lo=1, hi=None, category=CAT,
        description="1-based position of a string among the following ones (0: absent).",
        accepts=sig("str", "..."))
