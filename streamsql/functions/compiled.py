"""Compiled SQL: a piece of Spark SQL text with its ksqlDB type, and the literals every compiler
of calls writes (quoted names, strings, numbers, a string literal read as another type).

The expression compiler (``streamsql.planner.expressions``) and the function catalog both build
these, so they live below both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal as PyDecimal
from decimal import InvalidOperation

from streamsql import types as t
from streamsql.errors import AnalysisError

K = t.Kind
_TRUE = ("true", "yes")
_FALSE = ("false", "no")


@dataclass(frozen=True)
class Compiled:
    sql: str
    type: t.SqlType | None


def quote(name: str) -> str:
    """A Spark SQL identifier for ``name``."""
    return "`" + name.replace("`", "``") + "`"


def string_literal(value: str) -> str:
    """A Spark SQL string literal. Spark reads backslash escapes; ksqlDB text has none."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def literal_number(text: str) -> Compiled:
    """Type a numeric literal the way ksqlDB does: 1 → INTEGER (BIGINT past int32), 1.5 → DECIMAL,
    1.5E3 → DOUBLE."""
    if re.fullmatch(r"\d+", text):
        value = int(text)
        if value <= 2**31 - 1:
            return Compiled(text, t.INTEGER)
        return Compiled(f"{text}L", t.BIGINT)
    if "e" in text.lower():
        return Compiled(f"CAST({text} AS DOUBLE)", t.DOUBLE)
    whole, _, frac = text.partition(".")
    whole = whole.lstrip("0")
    scale = len(frac)
    precision = max(len(whole) + scale, scale, 1)
    return Compiled(f"CAST({text if text[0] != '.' else '0' + text} AS DECIMAL({precision},{scale}))",
                    t.Decimal(precision, scale))


def _type_name(ty: t.SqlType) -> str:
    return "DECIMAL" if ty.kind == K.DECIMAL else str(ty)


def _invalid(text: str, ty: t.SqlType) -> AnalysisError:
    return AnalysisError(f'invalid input syntax for type {_type_name(ty)}: "{text}".')


def literal_as(text: str, target: t.SqlType) -> Compiled:
    """A string literal converted to ``target`` at statement time (ksqlDB's implicit cast)."""
    k = target.kind
    if k == K.STRING:
        return Compiled(string_literal(text), t.STRING)
    s = text.strip()
    if k == K.BOOLEAN:
        low = s.lower()
        if low and any(w.startswith(low) for w in _TRUE):
            return Compiled("TRUE", t.BOOLEAN)
        if low and any(w.startswith(low) for w in _FALSE):
            return Compiled("FALSE", t.BOOLEAN)
        raise _invalid(text, target)
    if k in (K.INTEGER, K.BIGINT):
        try:
            return literal_number(str(int(s)))
        except ValueError:
            pass
        try:
            number = PyDecimal(s)  # '2e1' is 20
        except InvalidOperation:
            raise _invalid(text, target) from None
        if not number.is_finite() or number != number.to_integral_value():
            raise _invalid(text, target)
        value = int(number)
        return Compiled(f"{value}L", t.BIGINT) if k == K.BIGINT else literal_number(str(value))
    if k in (K.DOUBLE, K.DECIMAL):
        try:
            number = PyDecimal(s)
        except InvalidOperation:
            raise _invalid(text, target) from None
        if not number.is_finite():
            raise _invalid(text, target)
        return Compiled(f"CAST({string_literal(s)} AS DOUBLE)", t.DOUBLE) if k == K.DOUBLE else \
            Compiled(f"CAST({string_literal(s)} AS {t.to_spark(target).simpleString()})", target)
    return Compiled(f"CAST({string_literal(s)} AS {t.to_spark(target).simpleString()})", target)
