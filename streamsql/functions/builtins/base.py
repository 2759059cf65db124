"""Helpers shared by the built-in function modules: building Compiled results, registering
functions, and matching argument types against ksqlDB signatures."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from streamsql import types as t
from streamsql.functions.compiled import Compiled, string_literal
from streamsql.functions.registry import FunctionDef, FunctionRegistry

K = t.Kind
NULL_DOUBLE = "CAST(NULL AS DOUBLE)"
NAN = "CAST('NaN' AS DOUBLE)"
INF = "CAST('Infinity' AS DOUBLE)"
NEG_INF = "CAST('-Infinity' AS DOUBLE)"

#: parameter classes of signatures (ksqlDB widens INT → BIGINT → DECIMAL → DOUBLE for UDF params)
PARAMS: dict[str, frozenset[K] | None] = {
    "any": None,
    "str": frozenset({K.STRING}),
    "bytes": frozenset({K.BYTES}),
    "strbytes": frozenset({K.STRING, K.BYTES}),
    "bool": frozenset({K.BOOLEAN}),
    "int": frozenset({K.INTEGER}),
    "long": frozenset({K.INTEGER, K.BIGINT}),
    "num": frozenset({K.INTEGER, K.BIGINT, K.DOUBLE, K.DECIMAL}),
    "date": frozenset({K.DATE}),
    "time": frozenset({K.TIME}),
    "ts": frozenset({K.TIMESTAMP}),
    "array": frozenset({K.ARRAY}),
    "map": frozenset({K.MAP}),
    "struct": frozenset({K.STRUCT}),
}


def c(sql: str, ty: t.SqlType | None) -> Compiled:
    return Compiled(sql, ty)


def args_sql(cs: Sequence[Compiled]) -> str:
    return ", ".join(x.sql for x in cs)


def kind(x: Compiled) -> K | None:
    return x.type.kind if x.type is not None else None


class Signature:
    """One ksqlDB variant as parameter classes (keys of PARAMS); callable as the type check.
    DESCRIBE FUNCTION lists these (streamsql.functions.signatures)."""

    def __init__(self, params: Sequence[str]) -> None:
        self.variadic = bool(params) and params[-1] == "..."
        self.params = list(params[:-1] if self.variadic else params)

    def __call__(self, cs: list[Compiled]) -> bool:
        fixed = self.params
        if self.variadic:
            if len(cs) < len(fixed) - 1:
                return False
            kinds = fixed[:-1] + [fixed[-1]] * (len(cs) - len(fixed) + 1)
        else:
            if len(cs) != len(fixed):
                return False
            kinds = fixed
        for x, p in zip(cs, kinds):
            allowed = PARAMS[p]
            if allowed is not None and x.type is not None and x.type.kind not in allowed:
                return False
        return True


class AnySignature:
    """Several variants: accepts what any of them accepts."""

    def __init__(self, options: Sequence[Callable[[list[Compiled]], bool]]) -> None:
        self.options = list(options)

    def __call__(self, cs: list[Compiled]) -> bool:
        return any(s(cs) for s in self.options)


def sig(*params: str) -> Signature:
    """A signature predicate; a trailing ``"...""`` makes the parameter before it variadic."""
    return Signature(params)


def any_sig(*sigs: Callable[[list[Compiled]], bool]) -> AnySignature:
    return AnySignature(sigs)


def add(reg: FunctionRegistry, name: str, compile_: Callable[[list[Compiled]], Compiled], *, lo: int,
        hi: int | None, category: str, description: str, accepts: Callable[[list[Compiled]], bool] | None = None,
        signatures: Sequence[str] = (), listed: bool = True) -> None:
    reg.register(FunctionDef(name, "SCALAR", compile_, signatures=list(signatures), description=description,
                             category=category, min_args=lo, max_args=hi, accepts=accepts, listed=listed))


def add_raw(reg: FunctionRegistry, name: str, compile_nodes, *, lo: int, hi: int | None, category: str,
            description: str, signatures: Sequence[str] = (), listed: bool = True) -> None:
    def unsupported(_cs: list[Compiled]) -> Compiled:  # never called: compile_nodes takes over
        raise NotImplementedError(name)

    reg.register(FunctionDef(name, "SCALAR", unsupported, signatures=list(signatures), description=description,
                             category=category, min_args=lo, max_args=hi, compile_nodes=compile_nodes,
                             listed=listed))


def simple(reg: FunctionRegistry, name: str, spark: str,
           result: t.SqlType | None | Callable[[list[Compiled]], t.SqlType | None],
           *, lo: int, hi: int | None, category: str, description: str,
           accepts: Callable[[list[Compiled]], bool] | None = None) -> None:
    """A function equal to a Spark function of the same arguments."""

    def compile_(cs: list[Compiled]) -> Compiled:
        return c(f"{spark}({args_sql(cs)})", result(cs) if callable(result) else result)

    add(reg, name, compile_, lo=lo, hi=hi, category=category, description=description, accepts=accepts)


def first_type(cs: Sequence[Compiled]) -> t.SqlType | None:
    return next((x.type for x in cs if x.type is not None), None)


def literal_text(x: Compiled) -> str | None:
    """The value of a compiled string literal (``'abc'``), else None."""
    s = x.sql
    if x.type == t.STRING and len(s) >= 2 and s[0] == "'" and s[-1] == "'":
        body = s[1:-1]
        out, i = [], 0
        while i < len(body):
            ch = body[i]
            if ch == "\\" and i + 1 < len(body):
                out.append(body[i + 1])
                i += 2
                continue
            if ch == "'":
                return None  # not one literal
            out.append(ch)
            i += 1
        return "".join(out)
    return None


def int_literal(x: Compiled) -> int | None:
    s = x.sql.strip()
    if s.lstrip("-").isdigit():
        return int(s)
    if s.startswith("(-") and s.endswith(")") and s[2:-1].isdigit():
        return -int(s[2:-1])
    return None


def lit(value: str) -> str:
    return string_literal(value)


def widest_numeric(types: Sequence[t.SqlType | None]) -> t.SqlType | None:
    known = [x for x in types if x is not None]
    if not known:
        return None
    kinds = {x.kind for x in known}
    if not kinds <= t.NUMERIC_KINDS:
        return known[0]
    if K.DOUBLE in kinds:
        return t.DOUBLE
    if K.DECIMAL in kinds:
        return None  # Spark widens decimals; the planner learns the exact type
    if K.BIGINT in kinds:
        return t.BIGINT
    return t.INTEGER


def spark_type(ty: t.SqlType) -> str:
    return t.to_spark(ty).simpleString()
