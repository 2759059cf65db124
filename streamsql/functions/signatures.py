"""The variants of a function for ``DESCRIBE FUNCTION``: parameter types and return type.

Most built-ins declare their variants as parameter classes (``sig("str", "int")``); those are
expanded into concrete ksqlDB types here, and the return type is learned by compiling the
function on placeholder arguments of those types, so the listing cannot drift from what the
compiler does. Generic parameters show as ``T`` (an element/value type). Functions whose
arguments are syntax (lambdas, time units) or fully generic declare their variants as text
(``FunctionDef.signatures`` or :data:`DECLARED`).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from streamsql import types as t
from streamsql.functions.compiled import Compiled
from streamsql.functions.registry import FunctionDef

#: a type no real argument has, standing for "any type T"
_GENERIC = t.Decimal(37, 7)
_DECIMAL = t.Decimal(12, 4)

#: parameter class -> (shown name, placeholder type) options
_CLASSES: dict[str, list[tuple[str, t.SqlType]]] = {
    "any": [("T", _GENERIC)],
    "str": [("STRING", t.STRING)],
    "bytes": [("BYTES", t.BYTES)],
    "strbytes": [("STRING", t.STRING), ("BYTES", t.BYTES)],
    "bool": [("BOOLEAN", t.BOOLEAN)],
    "int": [("INTEGER", t.INTEGER)],
    "long": [("BIGINT", t.BIGINT)],
    "num": [("INTEGER", t.INTEGER), ("BIGINT", t.BIGINT), ("DOUBLE", t.DOUBLE), ("DECIMAL", _DECIMAL)],
    "date": [("DATE", t.DATE)],
    "time": [("TIME", t.TIME)],
    "ts": [("TIMESTAMP", t.TIMESTAMP)],
    "array": [("ARRAY<T>", t.Array(_GENERIC))],
    "map": [("MAP<STRING, T>", t.Map(t.STRING, _GENERIC))],
    "struct": [("STRUCT", t.Struct((t.StructField("F", _GENERIC),)))],
}

_ORDERED = "INTEGER | BIGINT | DOUBLE | DECIMAL | STRING | DATE | TIME | TIMESTAMP"

#: variants of functions without a declared parameter-class signature ("params -> returns")
DECLARED: dict[str, list[str]] = {
    "AS_VALUE": ["T -> T"],
    "COALESCE": ["T, T... -> T"],
    "IFNULL": ["T, T -> T"],
    "NULLIF": ["T, T -> T"],
    "GREATEST": [f"{_ORDERED}, same type... -> the argument type"],
    "LEAST": [f"{_ORDERED}, same type... -> the argument type"],
    "PI": [" -> DOUBLE"],
    "RANDOM": [" -> DOUBLE"],
    "TO_JSON_STRING": ["T -> STRING"],
    "TRANSFORM": ["ARRAY<T>, LAMBDA (T) => U -> ARRAY<U>",
                  "MAP<K, V>, LAMBDA (K, V) => K2, LAMBDA (K, V) => V2 -> MAP<K2, V2>"],
    "FILTER": ["ARRAY<T>, LAMBDA (T) => BOOLEAN -> ARRAY<T>",
               "MAP<K, V>, LAMBDA (K, V) => BOOLEAN -> MAP<K, V>"],
    "REDUCE": ["ARRAY<T>, S, LAMBDA (S, T) => S -> S", "MAP<K, V>, S, LAMBDA (S, K, V) => S -> S"],
    "TIMESTAMPADD": ["UNIT, INTEGER, TIMESTAMP -> TIMESTAMP"],
    "TIMESTAMPSUB": ["UNIT, INTEGER, TIMESTAMP -> TIMESTAMP"],
    "DATEADD": ["UNIT, INTEGER, DATE -> DATE"],
    "DATESUB": ["UNIT, INTEGER, DATE -> DATE"],
    "TIMEADD": ["UNIT, INTEGER, TIME -> TIME"],
    "TIMESUB": ["UNIT, INTEGER, TIME -> TIME"],
    "COUNT": [" -> BIGINT", "T -> BIGINT"],
    "SUM": ["INTEGER | BIGINT | DOUBLE | DECIMAL -> the argument type"],
    "MIN": ["INTEGER | BIGINT | DOUBLE | DECIMAL | STRING | DATE | TIME | TIMESTAMP -> the argument type"],
    "MAX": ["INTEGER | BIGINT | DOUBLE | DECIMAL | STRING | DATE | TIME | TIMESTAMP -> the argument type"],
    "AVG": ["INTEGER | BIGINT | DOUBLE | DECIMAL -> DOUBLE"],
}


@dataclass(frozen=True)
class Variant:
    params: tuple[str, ...]
    returns: str
    variadic: bool = False

    def text(self, name: str) -> str:
        shown = list(self.params)
        if self.variadic and shown:
            shown[-1] += "..."
        return f"{name}({', '.join(shown)})"


def _parse(text: str) -> Variant:
    """``"params -> returns"``, or ``"NAME(params) -> returns"`` as Python functions declare it."""
    params, _, returns = text.rpartition(" -> ")
    called = re.fullmatch(r"\s*\w+\((.*)\)\s*", params)
    if called:
        params = called.group(1)
    items = [p.strip() for p in params.split(", ")] if params.strip() else []
    variadic = bool(items) and items[-1].endswith("...")
    if variadic:
        items[-1] = items[-1][:-3]
    return Variant(tuple(items), returns.strip(), variadic)


def _shown(ty: t.SqlType | None) -> str:
    if ty is None:
        return "ANY"
    return str(ty).replace(str(_GENERIC), "T").replace(str(_DECIMAL), "DECIMAL")


def _signatures_of(accepts: object) -> list[object]:
    if hasattr(accepts, "options"):
        out: list[object] = []
        for option in accepts.options:
            out += _signatures_of(option)
        return out
    return [accepts] if hasattr(accepts, "params") else []


def _derived(fn: FunctionDef) -> list[Variant]:
    variants: list[Variant] = []
    for s in _signatures_of(fn.accepts):
        params: list[str] = s.params  # type: ignore[attr-defined]
        for combo in itertools.islice(itertools.product(*(_CLASSES[p] for p in params)), 16):
            args = [Compiled(f"`p{i}`", ty) for i, (_name, ty) in enumerate(combo)]
            try:
                result = fn.compile(args).type
            except Exception:  # noqa: BLE001 - a placeholder the compiler rejects: type unknown
                result = None
            returns = _shown(result)
            if any(ty == _DECIMAL for _n, ty in combo):  # the result's precision follows the argument's
                returns = "DECIMAL" if result is None else re.sub(r"DECIMAL\(\d+, \d+\)", "DECIMAL", returns)
            variants.append(Variant(tuple(n for n, _ty in combo), returns, s.variadic))  # type: ignore[attr-defined]
    return list(dict.fromkeys(variants))


def variants(fn: FunctionDef) -> list[Variant]:
    """Every variant of ``fn``, declared or derived from its parameter classes."""
    declared = fn.signatures or DECLARED.get(fn.name.upper(), [])
    if declared:
        return [_parse(text) for text in declared]
    return _derived(fn)
