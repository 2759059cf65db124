"""Array and map functions (categories ARRAY, MAP) and the ARRAY[...] / MAP(k := v) /
STRUCT(f := v) constructors (syntax in ksqlDB; registered unlisted so calls compile here)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import Decimal as PyDecimal
from decimal import InvalidOperation
from typing import TYPE_CHECKING

from sqlglot import exp

from streamsql import types as t
from streamsql.errors import AnalysisError
from streamsql.functions.builtins.base import (
    K,
    add,
    add_raw,
    any_sig,
    args_sql,
    c,
    kind,
    lit,
    literal_text,
    sig,
    spark_type,
)
from streamsql.functions.builtins.lambdas import fresh
from streamsql.functions.builtins.string import quote_regex
from streamsql.functions.compiled import Compiled, literal_as, quote
from streamsql.functions.registry import FunctionRegistry

if TYPE_CHECKING:
    from streamsql.planner.expressions import ExpressionCompiler

ARR, MAP = "ARRAY", "MAP"


def _elem(x: Compiled) -> t.SqlType | None:
    return x.type.element if isinstance(x.type, t.Array) else None


def comparable(sql: str, ty: t.SqlType) -> str:
    """``sql`` as a value Spark can compare for equality, equal where Java's ``equals`` is: a
    value holding a map becomes JSON text, a map's entries sorted by key first (a Java map equals
    another with the same entries in any order); other values are themselves."""
    if isinstance(ty, t.Map):
        a, b = fresh("a"), fresh("b")
        return (f"to_json(array_sort(map_entries({sql}), ({a}, {b}) -> CASE WHEN {a}.key < {b}.key THEN -1 "
                f"WHEN {a}.key > {b}.key THEN 1 ELSE 0 END))")
    return f"to_json({sql})" if t.holds_map(ty) else sql


def common_type(types: Sequence[t.SqlType | None]) -> t.SqlType | None:
    known = [ty for ty in types if ty is not None]
    if not known:
        return None
    if all(t.is_numeric(ty) for ty in known):
        kinds = {ty.kind for ty in known}
        if K.DOUBLE in kinds:
            return t.DOUBLE
        if K.DECIMAL in kinds:
            return decimal_union(known)
        return t.BIGINT if K.BIGINT in kinds else t.INTEGER
    if all(isinstance(ty, t.Struct) for ty in known):
        return struct_union(known)  # type: ignore[arg-type]
    non_string = [ty for ty in known if ty.kind != K.STRING]
    return non_string[0] if non_string else known[0]


#: the DECIMAL an integer type widens to (ksqlDB's DecimalUtil.toSqlDecimal)
_INTEGER_DIGITS = {K.INTEGER: 10, K.BIGINT: 19}


def decimal_union(types: Sequence[t.SqlType]) -> t.SqlType:
    """The DECIMAL holding every value of ``types`` (DECIMALs and integer types): the most
    integer digits and the largest scale (capped at 38 digits)."""
    digits, scale = 0, 0
    for ty in types:
        if isinstance(ty, t.Decimal):
            digits, scale = max(digits, ty.precision - ty.scale), max(scale, ty.scale)
        else:
            digits = max(digits, _INTEGER_DIGITS.get(ty.kind, 0))
    return t.Decimal(min(38, digits + scale), scale)


def _number_literal_type(text: str) -> t.SqlType | None:
    """A string literal that spells a non-integer number ('2e1', '1.5') is a DECIMAL of its value
    when it meets other numbers in a constructor (ksqlDB); plain integers adapt to the others."""
    s = text.strip()
    if re.fullmatch(r"[+-]?\d+", s):
        return None
    try:
        value = PyDecimal(s)
    except InvalidOperation:
        return None
    if not value.is_finite():
        return None
    sign, digits, exponent = value.as_tuple()
    scale = max(0, -int(exponent))
    precision = max(len(digits) + max(0, int(exponent)), scale, 1)
    return t.Decimal(precision, scale)


def struct_union(types: Sequence[t.Struct]) -> t.Struct:
    """ksqlDB's common type of STRUCTs: every field of any of them, in order of appearance."""
    fields: list[t.StructField] = []
    for ty in types:
        for f in ty.fields:
            mine = next((i for i, g in enumerate(fields) if g.name == f.name), None)
            if mine is None:
                fields.append(f)
            elif fields[mine].type != f.type and t.is_numeric(fields[mine].type) and t.is_numeric(f.type):
                fields[mine] = t.StructField(f.name, common_type([fields[mine].type, f.type]) or f.type)
    return t.Struct(tuple(fields))


def _struct_as(x: Compiled, target: t.Struct) -> str:
    """A struct value re-shaped to ``target`` by field name (absent fields null)."""
    assert isinstance(x.type, t.Struct)
    parts = []
    for f in target.fields:
        mine = x.type.field(f.name)
        value = f"({x.sql}).{quote(mine.name)}" if mine is not None else "NULL"
        parts.append(f"{lit(f.name)}, CAST({value} AS {spark_type(f.type)})")
    return f"(CASE WHEN {x.sql} IS NULL THEN NULL ELSE named_struct({', '.join(parts)}) END)"


def common_with_literals(items: Sequence[Compiled]) -> t.SqlType | None:
    """The common type of constructor items; string literals adapt to the others (ksqlDB)."""
    typed = [x.type for x in items if literal_text(x) is None]
    ty = common_type(typed)
    if ty is not None and t.is_numeric(ty) and ty.kind != K.DOUBLE:
        numbers = [n for n in (_number_literal_type(literal_text(x) or "") for x in items
                               if literal_text(x) is not None) if n is not None]
        if numbers:
            ty = common_type([ty, *numbers])
    return ty if ty is not None else common_type([x.type for x in items])


def coerce(items: list[Compiled], ty: t.SqlType | None) -> list[str]:
    if ty is None:
        return [x.sql for x in items]
    out = []
    for x in items:
        text = literal_text(x)
        if x.type == ty:
            out.append(x.sql)
        elif text is not None and ty.kind not in (K.STRING, K.ARRAY, K.MAP, K.STRUCT):
            out.append(literal_as(text, ty).sql)
        elif isinstance(ty, t.Struct) and isinstance(x.type, t.Struct):
            out.append(_struct_as(x, ty))
        else:
            out.append(f"CAST({x.sql} AS {spark_type(ty)})")
    return out


def register(reg: FunctionRegistry) -> None:
    # --- constructors ------------------------------------------------------------------------
    def array_(cs: list[Compiled]) -> Compiled:
        if not cs:
            return c("array()", None)
        if all(x.sql == "NULL" for x in cs):
            raise AnalysisError("Cannot construct an array with all NULL elements "
                                "(see https://github.com/confluentinc/ksql/issues/4239). "
                                "As a workaround, you may cast a NULL value to the desired type.")
        ty = common_with_literals(cs)
        return c(f"array({', '.join(coerce(cs, ty))})", t.Array(ty) if ty else None)

    add(reg, "ARRAY", array_, lo=0, hi=None, category=ARR, listed=False,
        description="ARRAY[a, b, ...]: an array of the values.")

    def _pairs(args: Sequence[exp.Expr], name: str) -> list[tuple[exp.Expr, exp.Expr]]:
        pairs = []
        for a in args:
            if not isinstance(a, exp.PropertyEQ):
                raise AnalysisError(f"{name} expects 'name := value' arguments, got: {a.sql()}")
            pairs.append((a.this, a.expression))
        return pairs

    def map_(args: Sequence[exp.Expr], compiler: ExpressionCompiler) -> Compiled:
        pairs = _pairs(args, "MAP")
        if not pairs:
            return c("map()", None)
        keys = [compiler.compile(k) for k, _ in pairs]
        vals = [compiler.compile(v) for _, v in pairs]
        if all(isinstance(v, exp.Null) for _, v in pairs):
            raise AnalysisError("Cannot construct a map with all NULL values")
        vt = common_with_literals(vals)
        # keys that are all non-string, non-literal expressions keep their type (MAP<INTEGER, ...>:
        # a sink's format then rejects it, as ksqlDB's); otherwise keys are strings
        typed = all(k.type is not None and k.type.kind != K.STRING and not isinstance(node, exp.Literal)
                    for k, (node, _v) in zip(keys, pairs))
        kt = common_type([k.type for k in keys]) if typed else None
        if kt is not None and kt.kind != K.STRING:
            key_sql = coerce(keys, kt)
        else:
            kt, key_sql = t.STRING, [f"coalesce(CAST({k.sql} AS STRING), 'null')" for k in keys]
        body = ", ".join(f"{k}, {v}" for k, v in zip(key_sql, coerce(vals, vt)))
        return c(f"map({body})", t.Map(kt, vt) if vt else None)

    add_raw(reg, "MAP", map_, lo=0, hi=None, category=MAP, listed=False,
            description="MAP(k := v, ...): a map of the pairs (keys as strings).")

    def struct_(args: Sequence[exp.Expr], compiler: ExpressionCompiler) -> Compiled:
        pairs = _pairs(args, "STRUCT")
        if not pairs:
            return c("named_struct()", t.Struct(()))  # fixed below if Spark rejects it
        names: list[str] = []
        parts, fields = [], []
        for k, v in pairs:
            name = k.name if isinstance(k, (exp.Column, exp.Identifier)) else k.sql()
            if name in names:
                raise AnalysisError("Duplicate field names found in STRUCT")
            names.append(name)
            val = compiler.compile(v)
            parts.append(f"{lit(name)}, {val.sql}")
            fields.append(t.StructField(name, val.type) if val.type else None)
        ty = t.Struct(tuple(fields)) if all(fields) else None  # type: ignore[arg-type]
        return c(f"named_struct({', '.join(parts)})", ty)

    add_raw(reg, "STRUCT", struct_, lo=0, hi=None, category="OTHER", listed=False,
            description="STRUCT(name := value, ...): a struct of the fields.")

    # --- arrays --------------------------------------------------------------------------------
    add(reg, "ARRAY_LENGTH", lambda cs: c(f"(CASE WHEN {cs[0].sql} IS NULL THEN NULL ELSE size({cs[0].sql}) END)",
                                          t.INTEGER), lo=1, hi=1, category=ARR,
        description="Number of elements of an array.", accepts=sig("array"))

    def contains(cs: list[Compiled]) -> Compiled:
        x = fresh("x")
        return c(f"coalesce(exists({cs[0].sql}, {x} -> {x} <=> {cs[1].sql}), FALSE)", t.BOOLEAN)

    add(reg, "ARRAY_CONTAINS", contains, lo=2, hi=2, category=ARR,
        description="Whether an array contains a value (false for a null array).", accepts=sig("array", "any"))
    def distinct(cs: list[Compiled]) -> Compiled:
        element = _elem(cs[0])
        if element is None or not t.holds_map(element):
            return c(f"array_distinct({cs[0].sql})", cs[0].type)
        # Spark's array_distinct cannot compare maps; ksqlDB keeps each element not equal to
        # an earlier one (Java's equals: a map as its set of entries)
        x, i, y = fresh("x"), fresh("i"), fresh("y")
        arr = cs[0].sql
        return c(f"filter({arr}, ({x}, {i}) -> NOT exists(slice({arr}, 1, {i}), "
                 f"{y} -> {comparable(y, element)} <=> {comparable(x, element)}))", cs[0].type)

    add(reg, "ARRAY_DISTINCT", distinct, lo=1, hi=1, category=ARR, description="The distinct elements, in order.",
        accepts=sig("array"))
    for name, spark, desc in (("ARRAY_MAX", "array_max", "The largest non-null element."),
                              ("ARRAY_MIN", "array_min", "The smallest non-null element.")):
        def array_fn(cs: list[Compiled], spark: str = spark) -> Compiled:
            return c(f"{spark}({cs[0].sql})", _elem(cs[0]))

        add(reg, name, array_fn, lo=1, hi=1, category=ARR, description=desc, accepts=sig("array"))
    for name, spark, desc in (("ARRAY_EXCEPT", "array_except",
                               "Distinct elements of the first array not in the second."),
                              ("ARRAY_INTERSECT", "array_intersect", "Distinct elements in both arrays."),
                              ("ARRAY_UNION", "array_union", "Distinct elements in either array.")):
        def set_fn(cs: list[Compiled], spark: str = spark) -> Compiled:
            return c(f"{spark}({cs[0].sql}, {cs[1].sql})", cs[0].type or cs[1].type)

        add(reg, name, set_fn, lo=2, hi=2, category=ARR, description=desc, accepts=sig("array", "array"))

    def concat(cs: list[Compiled]) -> Compiled:
        a, b = cs[0].sql, cs[1].sql
        return c(f"(CASE WHEN {a} IS NULL THEN {b} WHEN {b} IS NULL THEN {a} ELSE concat({a}, {b}) END)",
                 cs[0].type or cs[1].type)

    add(reg, "ARRAY_CONCAT", concat, lo=2, hi=2, category=ARR,
        description="The elements of both arrays (a null array counts as empty).", accepts=sig("array", "array"))

    def join(cs: list[Compiled]) -> Compiled:
        d = cs[1].sql if len(cs) > 1 else "','"
        x = fresh("x")
        items = cs[0].sql if _elem(cs[0]) == t.STRING else f"transform({cs[0].sql}, {x} -> CAST({x} AS STRING))"
        return c(f"array_join({items}, coalesce({d}, ''), 'null')", t.STRING)

    add(reg, "ARRAY_JOIN", join, lo=1, hi=2, category=ARR,
        description="Joins the elements as text with a delimiter (default ',').",
        accepts=any_sig(sig("array"), sig("array", "str")))

    def remove(cs: list[Compiled]) -> Compiled:
        x = fresh("x")
        return c(f"filter({cs[0].sql}, {x} -> NOT ({x} <=> {cs[1].sql}))", cs[0].type)

    add(reg, "ARRAY_REMOVE", remove, lo=2, hi=2, category=ARR,
        description="The array without the elements equal to a value.", accepts=sig("array", "any"))

    def sort(cs: list[Compiled]) -> Compiled:
        a = cs[0].sql
        x, y = fresh("x"), fresh("y")
        asc = cs[1].sql if len(cs) > 1 else "'ASC'"
        nonnull = f"filter({a}, {x} -> {x} IS NOT NULL)"
        nulls = f"filter({a}, {y} -> {y} IS NULL)"
        return c(f"(CASE WHEN upper({asc}) = 'ASC' THEN concat(sort_array({nonnull}, TRUE), {nulls}) "
                 f"WHEN upper({asc}) = 'DESC' THEN concat(sort_array({nonnull}, FALSE), {nulls}) END)", cs[0].type)

    add(reg, "ARRAY_SORT", sort, lo=1, hi=2, category=ARR,
        description="Sorts an array ('ASC' default or 'DESC'), nulls last.",
        accepts=any_sig(sig("array"), sig("array", "str")))

    def slice_(cs: list[Compiled]) -> Compiled:
        a, f, to = cs[0].sql, cs[1].sql, cs[2].sql
        start = f"greatest(coalesce({f}, 1), 1)"
        end = f"least(coalesce({to}, size({a})), size({a}))"
        return c(f"(CASE WHEN {a} IS NULL THEN NULL WHEN {end} < {start} THEN slice({a}, 1, 0) "
                 f"ELSE slice({a}, {start}, {end} - {start} + 1) END)", cs[0].type)

    add(reg, "SLICE", slice_, lo=3, hi=3, category=ARR,
        description="Elements from a 1-based index to another, inclusive.", accepts=sig("array", "int", "int"))

    def series(cs: list[Compiled]) -> Compiled:
        ty = t.BIGINT if any(kind(x) == K.BIGINT for x in cs) else t.INTEGER
        step = cs[2].sql if len(cs) > 2 else "1"
        return c(f"sequence({cs[0].sql}, {cs[1].sql}, {step})", t.Array(ty))

    add(reg, "GENERATE_SERIES", series, lo=2, hi=3, category=ARR,
        description="The integers from start to end (inclusive) by a step.",
        accepts=any_sig(sig("long", "long"), sig("long", "long", "long")))

    # --- maps ------------------------------------------------------------------------------------
    def as_map(cs: list[Compiled]) -> Compiled:
        k, v = cs[0].sql, cs[1].sql
        n = f"least(size({k}), size({v}))"
        vt = _elem(cs[1])
        return c(f"(CASE WHEN {k} IS NULL OR {v} IS NULL THEN NULL ELSE map_from_arrays(slice({k}, 1, {n}), "
                 f"slice({v}, 1, {n})) END)", t.Map(t.STRING, vt) if vt else None)

    add(reg, "AS_MAP", as_map, lo=2, hi=2, category=MAP, description="A map from an array of keys and one of values.",
        accepts=sig("array", "array"))
    add(reg, "MAP_KEYS",
        lambda cs: c(f"map_keys({cs[0].sql})", t.Array(cs[0].type.key) if isinstance(cs[0].type, t.Map) else None),
        lo=1, hi=1, category=MAP, description="The keys of a map.", accepts=sig("map"))
    add(reg, "MAP_VALUES",
        lambda cs: c(f"map_values({cs[0].sql})",
                     t.Array(cs[0].type.value) if isinstance(cs[0].type, t.Map) else None),
        lo=1, hi=1, category=MAP, description="The values of a map.", accepts=sig("map"))

    def union(cs: list[Compiled]) -> Compiled:
        a, b = cs[0].sql, cs[1].sql
        k, v = fresh("k"), fresh("v")
        return c(f"(CASE WHEN {a} IS NULL THEN {b} WHEN {b} IS NULL THEN {a} ELSE "
                 f"map_concat(map_filter({a}, ({k}, {v}) -> NOT array_contains(map_keys({b}), {k})), {b}) END)",
                 cs[0].type or cs[1].type)

    add(reg, "MAP_UNION", union, lo=2, hi=2, category=MAP,
        description="The entries of both maps; the second wins on equal keys.", accepts=sig("map", "map"))

    def entries(cs: list[Compiled]) -> Compiled:
        m = cs[0].sql
        e, a, b = fresh(), fresh("a"), fresh("b")
        es = f"map_entries({m})"
        sorted_es = (f"array_sort({es}, ({a}, {b}) -> "
                     f"CASE WHEN {a}.key < {b}.key THEN -1 WHEN {a}.key > {b}.key THEN 1 ELSE 0 END)")
        src = f"(CASE WHEN {cs[1].sql} THEN {sorted_es} ELSE {es} END)"
        ty = (t.Array(t.Struct((t.StructField("K", cs[0].type.key), t.StructField("V", cs[0].type.value))))
              if isinstance(cs[0].type, t.Map) else None)
        return c(f"transform({src}, {e} -> named_struct('K', {e}.key, 'V', {e}.value))", ty)

    add(reg, "ENTRIES", entries, lo=2, hi=2, category=MAP,
        description="The entries of a map as an array of STRUCT<K, V>, optionally sorted by key.",
        accepts=sig("map", "bool"))

    def split_to_map(cs: list[Compiled]) -> Compiled:
        s, ed, kd = (x.sql for x in cs)
        e, x = fresh(), fresh("x")
        parts = f"filter(split({s}, {quote_regex(ed)}, -1), {e} -> {e} <> '' AND locate({kd}, {e}) > 0)"
        pairs = (f"transform({parts}, {x} -> struct(substring_index({x}, {kd}, 1) AS key, "
                 f"substring({x}, char_length(substring_index({x}, {kd}, 1)) + char_length({kd}) + 1) AS value))")
        return c(f"(CASE WHEN {s} IS NULL OR {ed} IS NULL OR {kd} IS NULL OR {ed} = '' OR {kd} = '' OR {ed} = {kd} "
                 f"THEN NULL ELSE map_from_entries({pairs}) END)", t.Map(t.STRING, t.STRING))

    add(reg, "SPLIT_TO_MAP", split_to_map, lo=3, hi=3, category="STRING",
        description="Splits 'k1=v1;k2=v2' text into a map by an entry and a key-value delimiter.",
        accepts=sig("str", "str", "str"))
    _ = args_sql
