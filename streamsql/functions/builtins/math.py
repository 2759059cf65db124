"""Mathematical functions (category MATHEMATICAL).

Spark returns NULL where Java's Math returns NaN/±Infinity (ln, log of 0 or negatives); ksqlDB
follows Java, so those edges are written out.
"""

from __future__ import annotations

from streamsql import types as t
from streamsql.functions.builtins.base import (
    INF,
    NAN,
    NEG_INF,
    K,
    add,
    any_sig,
    args_sql,
    c,
    int_literal,
    kind,
    sig,
    spark_type,
)
from streamsql.functions.compiled import Compiled
from streamsql.functions.registry import FunctionRegistry

CAT = "MATHEMATICAL"


def _d(x: Compiled) -> str:
    return f"CAST({x.sql} AS DOUBLE)"


def java_ln(x: str) -> str:
    # Java's Math.log (ksqlDB's) can differ in the last bit from Spark's StrictMath.log
    # java_method fails on a null argument, so nulls are answered before the call
    return (f"(CASE WHEN {x} IS NULL THEN CAST(NULL AS DOUBLE) WHEN {x} < 0 THEN {NAN} WHEN {x} = 0 THEN {NEG_INF} "
            f"ELSE CAST(java_method('java.lang.Math', 'log', {x}) AS DOUBLE) END)")


def _same_type(spark: str, double_result: t.SqlType | None = t.DOUBLE):
    """ABS/CEIL/FLOOR-like: INT → INT, BIGINT → BIGINT, DOUBLE → DOUBLE, DECIMAL(p, s) →
    DECIMAL(p, s): ksqlDB's CEIL and FLOOR keep a decimal's type and scale (``FLOOR(1.5)`` is
    ``1.0``), where Spark's give scale 0."""

    def compile_(cs: list[Compiled]) -> Compiled:
        x = cs[0]
        k = kind(x)
        if k in (K.INTEGER, K.BIGINT):
            return c(f"CAST({spark}({x.sql}) AS {'INT' if k == K.INTEGER else 'BIGINT'})", x.type)
        if k == K.DOUBLE:
            return c(f"CAST({spark}({x.sql}) AS DOUBLE)", double_result)
        if isinstance(x.type, t.Decimal):
            return c(f"CAST({spark}({x.sql}) AS DECIMAL({x.type.precision}, {x.type.scale}))", x.type)
        return c(f"{spark}({x.sql})", None)

    return compile_


def register(reg: FunctionRegistry) -> None:
    num1 = sig("num")
    for name, spark, desc in (("ABS", "abs", "Absolute value."),
                              ("CEIL", "ceil", "Smallest integral value not below the argument."),
                              ("FLOOR", "floor", "Largest integral value not above the argument.")):
        add(reg, name, _same_type(spark), lo=1, hi=1, category=CAT, description=desc, accepts=num1)

    doubles = {
        "SQRT": ("sqrt", "Square root."), "CBRT": ("cbrt", "Cube root."), "EXP": ("exp", "e raised to a power."),
        "SIN": ("sin", "Sine (radians)."), "COS": ("cos", "Cosine (radians)."), "TAN": ("tan", "Tangent (radians)."),
        "COT": ("cot", "Cotangent (radians)."), "ASIN": ("asin", "Arc sine."), "ACOS": ("acos", "Arc cosine."),
        "ATAN": ("atan", "Arc tangent."), "SINH": ("sinh", "Hyperbolic sine."),
        "COSH": ("cosh", "Hyperbolic cosine."), "TANH": ("tanh", "Hyperbolic tangent."),
        "DEGREES": ("degrees", "Radians to degrees."), "RADIANS": ("radians", "Degrees to radians."),
    }
    for name, (spark, desc) in doubles.items():
        def double_of(cs: list[Compiled], spark: str = spark) -> Compiled:
            return c(f"{spark}({_d(cs[0])})", t.DOUBLE)

        add(reg, name, double_of, lo=1, hi=1, category=CAT, description=desc, accepts=num1)

    add(reg, "ATAN2", lambda cs: c(f"atan2({_d(cs[0])}, {_d(cs[1])})", t.DOUBLE), lo=2, hi=2, category=CAT,
        description="Arc tangent of y/x, using the signs of both for the quadrant.", accepts=sig("num", "num"))
    add(reg, "LN", lambda cs: c(java_ln(_d(cs[0])), t.DOUBLE), lo=1, hi=1, category=CAT,
        description="Natural logarithm.", accepts=num1)

    def log(cs: list[Compiled]) -> Compiled:
        if len(cs) == 1:
            x = _d(cs[0])
            return c(java_ln(x), t.DOUBLE)  # ksqlDB's one-argument LOG is the natural logarithm
        b, v = _d(cs[0]), _d(cs[1])
        # ksqlDB's LOG(base, value): NaN for a base that is not positive or is 1, or a negative
        # value; otherwise ln(value) / ln(base) with Java's infinities for a value of 0
        return c(f"(CASE WHEN {b} IS NULL OR {v} IS NULL THEN NULL WHEN {b} <= 0 OR {b} = 1 OR {v} < 0 THEN {NAN} "
                 f"WHEN {v} = 0 THEN (CASE WHEN {b} > 1 THEN {NEG_INF} ELSE {INF} END) "
                 f"ELSE ln({v}) / ln({b}) END)", t.DOUBLE)

    add(reg, "LOG", log, lo=1, hi=2, category=CAT, description="Natural logarithm, or LOG(base, value).",
        accepts=any_sig(num1, sig("num", "num")))
    add(reg, "POWER", lambda cs: c(f"power({_d(cs[0])}, {_d(cs[1])})", t.DOUBLE), lo=2, hi=2, category=CAT,
        description="A number raised to a power.", accepts=sig("num", "num"))
    add(reg, "PI", lambda cs: c("pi()", t.DOUBLE), lo=0, hi=0, category=CAT, description="The value of pi.")
    add(reg, "RANDOM", lambda cs: c("rand()", t.DOUBLE), lo=0, hi=0, category=CAT,
        description="A random DOUBLE in [0, 1).")
    add(reg, "SIGN", lambda cs: c(f"CAST(signum({cs[0].sql}) AS INT)", t.INTEGER), lo=1, hi=1, category=CAT,
        description="-1, 0 or 1 by the sign of the argument.", accepts=num1)

    def round_(cs: list[Compiled]) -> Compiled:
        # ksqlDB rounds half up (towards +infinity, like Java's Math.round); ROUND(DOUBLE) is a BIGINT.
        x = cs[0]
        k = kind(x)
        if len(cs) == 1:
            if k in (K.INTEGER, K.BIGINT):
                return c(x.sql, x.type)
            if k == K.DOUBLE:
                return c(f"CAST(floor({x.sql} + 0.5D) AS BIGINT)", t.BIGINT)
            if k == K.DECIMAL:
                p, sc = x.type.precision, x.type.scale  # type: ignore[union-attr]
                res = t.Decimal(max(p - sc + 1, 1), 0)
                return c(f"CAST(round({x.sql}, 0) AS DECIMAL({res.precision},0))", res)
            return c(f"round({x.sql})", None)
        n = cs[1]
        scale = int_literal(n)
        if k in (K.INTEGER, K.BIGINT):
            return c(f"CAST(round({x.sql}, {n.sql}) AS {'INT' if k == K.INTEGER else 'BIGINT'})"
                     if scale is not None else x.sql, x.type)
        if k == K.DECIMAL and scale is not None:
            return c(f"CAST(round({x.sql}, {scale}) AS DECIMAL({x.type.precision},{x.type.scale}))", x.type)  # type: ignore[union-attr]
        if scale is not None:
            return c(f"CAST(round({_d(x)}, {scale}) AS DOUBLE)", t.DOUBLE if k != K.DECIMAL else None)
        f = f"power(10, {n.sql})"
        return c(f"(floor({_d(x)} * {f} + 0.5D) / {f})", t.DOUBLE)

    add(reg, "ROUND", round_, lo=1, hi=2, category=CAT,
        description="Rounds half up; ROUND(DOUBLE) returns BIGINT, ROUND(x, scale) keeps the type.",
        accepts=any_sig(num1, sig("num", "int")))

    def trunc(cs: list[Compiled]) -> Compiled:
        x = cs[0]
        k = kind(x)
        if len(cs) == 1:
            if k in (K.INTEGER, K.BIGINT):
                return c(x.sql, x.type)
            if k == K.DOUBLE:
                return c(f"CAST({x.sql} AS BIGINT)", t.BIGINT)
            if k == K.DECIMAL:
                p, sc = x.type.precision, x.type.scale  # type: ignore[union-attr]
                # floor/ceil first: a CAST to scale 0 would round half up
                return c(f"CAST((CASE WHEN {x.sql} >= 0 THEN floor({x.sql}) ELSE ceil({x.sql}) END) "
                         f"AS DECIMAL({max(p - sc, 1)},0))", t.Decimal(max(p - sc, 1), 0))
            return c(f"CAST({x.sql} AS BIGINT)", None)
        n = cs[1]
        scale = int_literal(n)
        if k in (K.INTEGER, K.BIGINT):
            f = f"CAST(power(10, -({n.sql})) AS BIGINT)"
            return c(f"(CASE WHEN {n.sql} >= 0 THEN {x.sql} ELSE CAST(({x.sql} DIV {f}) * {f} AS "
                     f"{'INT' if k == K.INTEGER else 'BIGINT'}) END)", x.type)
        if scale is not None:
            body = f"(CASE WHEN {x.sql} >= 0 THEN floor({x.sql}, {scale}) ELSE ceil({x.sql}, {scale}) END)"
            if k == K.DECIMAL:
                return c(f"CAST({body} AS DECIMAL({x.type.precision},{x.type.scale}))", x.type)  # type: ignore[union-attr]
            return c(f"CAST({body} AS DOUBLE)", t.DOUBLE)
        f = f"power(10, {n.sql})"
        return c(f"(CASE WHEN {x.sql} >= 0 THEN floor({_d(x)} * {f}) ELSE ceil({_d(x)} * {f}) END / {f})", t.DOUBLE)

    add(reg, "TRUNC", trunc, lo=1, hi=2, category=CAT,
        description="Truncates towards zero; TRUNC(DOUBLE) returns BIGINT, TRUNC(x, scale) keeps the type.",
        accepts=any_sig(num1, sig("num", "int")))

    def extreme(spark: str):
        """GREATEST/LEAST: ksqlDB has one variadic variant per type (INT, BIGINT, DOUBLE, DECIMAL,
        STRING, BYTES, DATE, TIME, TIMESTAMP) and implicit widening, so INT with BIGINT matches
        several variants (ambiguous, rejected) while anything with a DOUBLE resolves to DOUBLE.
        String arguments next to dates/times are parsed into them."""

        def compile_(cs: list[Compiled]) -> Compiled:
            if any(x.sql == "*" for x in cs):
                raise _reject(spark, [])
            known = [x.type for x in cs if x.type is not None]
            if not known:
                raise _ambiguous(spark, cs)
            kinds = {ty.kind for ty in known}
            if kinds <= t.NUMERIC_KINDS:
                if K.DOUBLE in kinds:
                    return c(f"{spark}({', '.join(f'CAST({x.sql} AS DOUBLE)' for x in cs)})", t.DOUBLE)
                if len(kinds) > 1:
                    raise _ambiguous(spark, cs)
                return c(f"{spark}({args_sql(cs)})", known[0] if kinds != {K.DECIMAL} else widest_decimal(known))
            temporal = kinds & {K.DATE, K.TIME, K.TIMESTAMP}
            if len(kinds) == 1 or (len(temporal) == 1 and kinds == temporal | {K.STRING}):
                target = next(ty for ty in known if ty.kind != K.STRING) if temporal else known[0]
                return c(f"{spark}({', '.join(_as_temporal(x, target) for x in cs)})", target)
            raise _reject(spark, cs)

        return compile_

    add(reg, "GREATEST", extreme("greatest"), lo=1, hi=None, category=CAT,
        description="The largest of the non-null arguments.")
    add(reg, "LEAST", extreme("least"), lo=1, hi=None, category=CAT,
        description="The smallest of the non-null arguments.")

    def geo(cs: list[Compiled]) -> Compiled:
        """ksqlDB's GeoDistance: a null or blank unit is kilometres, an unknown unit and latitudes or
        longitudes out of range are errors (null here, as every function error)."""
        degrees = [_d(x) for x in cs[:4]]
        lat1, lon1, lat2, lon2 = (f"radians({x})" for x in degrees)
        radius = "6371.0D"
        if len(cs) == 5:
            unit = f"lower(trim({cs[4].sql}))"
            radius = (f"(CASE WHEN {unit} IS NULL OR {unit} = '' THEN 6371.0D "
                      f"WHEN {unit} IN ('mi', 'mile', 'miles') THEN 3959.0D "
                      f"WHEN {unit} IN ('km', 'kilometer', 'kilometers', 'kilometre', 'kilometres') "
                      f"THEN 6371.0D END)")
        valid = (f"abs({degrees[0]}) <= 90 AND abs({degrees[2]}) <= 90 AND abs({degrees[1]}) <= 180 "
                 f"AND abs({degrees[3]}) <= 180")
        a = (f"pow(sin(({lat2} - {lat1}) / 2), 2) + cos({lat1}) * cos({lat2}) * pow(sin(({lon2} - {lon1}) / 2), 2)")
        return c(f"(CASE WHEN {valid} THEN {radius} * 2 * asin(sqrt({a})) END)", t.DOUBLE)

    add(reg, "GEO_DISTANCE", geo, lo=4, hi=5, category="OTHER",
        description="Great-circle distance between two lat/lon points, in km (default) or miles.",
        accepts=any_sig(sig("num", "num", "num", "num"), sig("num", "num", "num", "num", "str")))


def widest_decimal(types: list[t.SqlType]) -> t.SqlType:
    """The DECIMAL holding every given DECIMAL (integer digits and scale of the widest)."""
    scale = max(ty.scale for ty in types)  # type: ignore[union-attr]
    digits = max(ty.precision - ty.scale for ty in types)  # type: ignore[union-attr]
    return t.Decimal(min(digits + scale, 38), scale)


def _as_temporal(x: Compiled, target: t.SqlType) -> str:
    """An argument of GREATEST/LEAST as ``target``; strings are parsed (TIME: ms of the day)."""
    if x.type is not None and x.type.kind == target.kind:
        return x.sql
    if target.kind == K.TIME:
        return f"CAST(unix_millis(to_timestamp(concat('1970-01-01 ', {x.sql}))) AS INT)"
    return f"CAST({x.sql} AS {spark_type(target)})"


def _ambiguous(spark: str, cs: list[Compiled]):
    from streamsql.errors import AnalysisError

    shown = ", ".join("null" if x.type is None else str(x.type) for x in cs)
    return AnalysisError(f"Function '{spark}' cannot be resolved due to ambiguous method parameters ({shown}).")


def _reject(spark: str, cs: list[Compiled]):
    from streamsql.functions.registry import rejected

    return rejected(spark, cs)
