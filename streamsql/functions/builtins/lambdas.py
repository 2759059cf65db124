"""Higher-order functions (category LAMBDA): TRANSFORM, FILTER, REDUCE over arrays and maps.

Lambdas are compiled here (not by the expression compiler) so their parameters get the element,
key and value types of the collection, and so map lambdas can read an entry struct's fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sqlglot import exp

from streamsql import types as t
from streamsql.errors import AnalysisError
from streamsql.functions.builtins.base import K, add_raw, c, spark_type
from streamsql.functions.compiled import Compiled, quote
from streamsql.functions.registry import FunctionRegistry, rejected

if TYPE_CHECKING:
    from streamsql.planner.expressions import ExpressionCompiler

CAT = "LAMBDA"
_depth = [0]


def fresh(prefix: str = "e") -> str:
    """A lambda variable name unique within the nesting of one call."""
    _depth[0] += 1
    return f"`__{prefix}{_depth[0]}`"


def lambda_body(node: exp.Expr, compiler: ExpressionCompiler, refs: Sequence[tuple[str, t.SqlType | None]],
                name: str, arity: int) -> Compiled:
    """Compile the body of lambda ``node`` with its parameters bound to the given Spark refs."""
    if not isinstance(node, exp.Lambda) or len(node.expressions) != arity:
        raise AnalysisError(f"Function '{name.lower()}' expects a lambda with {arity} argument(s) "
                            f"but got: {node.sql()}")
    params = [p.name for p in node.expressions]
    return compiler.in_lambda([(p, ty, ref) for p, (ref, ty) in zip(params, refs)]).compile(node.this)


def register(reg: FunctionRegistry) -> None:
    def transform(args: Sequence[exp.Expr], compiler: ExpressionCompiler) -> Compiled:
        coll = compiler.compile(args[0])
        if isinstance(coll.type, t.Map) or (coll.type is None and len(args) == 3):
            if len(args) != 3:
                raise rejected("TRANSFORM", [coll])
            key_t = coll.type.key if isinstance(coll.type, t.Map) else None
            val_t = coll.type.value if isinstance(coll.type, t.Map) else None
            e = fresh()
            refs = [(f"{e}.key", key_t), (f"{e}.value", val_t)]
            kb = lambda_body(args[1], compiler, refs, "TRANSFORM", 2)
            vb = lambda_body(args[2], compiler, refs, "TRANSFORM", 2)
            entries = f"transform(map_entries({coll.sql}), {e} -> struct({kb.sql} AS k, {vb.sql} AS v))"
            # Java's Collectors.toMap fails on null values and duplicate keys: ksqlDB yields null.
            x = fresh("x")
            return c(f"(CASE WHEN {coll.sql} IS NULL OR exists({entries}, {x} -> {x}.v IS NULL) "
                     f"OR size(array_distinct(transform({entries}, {x} -> {x}.k))) <> size({entries}) THEN NULL "
                     f"ELSE map_from_entries({entries}) END)",
                     t.Map(kb.type, vb.type) if kb.type is not None and vb.type is not None else None)
        if len(args) != 2:
            raise rejected("TRANSFORM", [coll])
        elem_t = coll.type.element if isinstance(coll.type, t.Array) else None
        x = fresh("x")
        body = lambda_body(args[1], compiler, [(x, elem_t)], "TRANSFORM", 1)
        return c(f"transform({coll.sql}, {x} -> {body.sql})", t.Array(body.type) if body.type else None)

    add_raw(reg, "TRANSFORM", transform, lo=2, hi=3, category=CAT,
            description="Applies a lambda to each array element, or key and value lambdas to each map entry.")

    def filter_(args: Sequence[exp.Expr], compiler: ExpressionCompiler) -> Compiled:
        coll = compiler.compile(args[0])
        if isinstance(coll.type, t.Map) or (coll.type is None and isinstance(args[1], exp.Lambda)
                                            and len(args[1].expressions) == 2):
            k, v = fresh("k"), fresh("v")
            kt = coll.type.key if isinstance(coll.type, t.Map) else None
            vt = coll.type.value if isinstance(coll.type, t.Map) else None
            body = lambda_body(args[1], compiler, [(k, kt), (v, vt)], "FILTER", 2)
            return c(f"map_filter({coll.sql}, ({k}, {v}) -> coalesce({body.sql}, FALSE))", coll.type)
        x = fresh("x")
        elem_t = coll.type.element if isinstance(coll.type, t.Array) else None
        body = lambda_body(args[1], compiler, [(x, elem_t)], "FILTER", 1)
        return c(f"filter({coll.sql}, {x} -> coalesce({body.sql}, FALSE))", coll.type)

    add_raw(reg, "FILTER", filter_, lo=2, hi=2, category=CAT,
            description="Keeps the array elements, or map entries, for which a lambda is true.")

    def reduce_(args: Sequence[exp.Expr], compiler: ExpressionCompiler) -> Compiled:
        coll = compiler.compile(args[0])
        init = compiler.compile(args[1])
        s = fresh("s")
        if isinstance(coll.type, t.Map) or (coll.type is None and isinstance(args[2], exp.Lambda)
                                            and len(args[2].expressions) == 3):
            e = fresh()
            kt = coll.type.key if isinstance(coll.type, t.Map) else None
            vt = coll.type.value if isinstance(coll.type, t.Map) else None
            body = lambda_body(args[2], compiler, [(s, init.type), (f"{e}.key", kt), (f"{e}.value", vt)], "REDUCE", 3)
            source, params = f"map_entries({coll.sql})", f"({s}, {e})"
        else:
            x = fresh("x")
            et = coll.type.element if isinstance(coll.type, t.Array) else None
            body = lambda_body(args[2], compiler, [(s, init.type), (x, et)], "REDUCE", 2)
            source, params = coll.sql, f"({s}, {x})"
        state_t = init.type
        if state_t is None:
            # a NULL initial state: ksqlDB returns null
            return c("NULL", body.type)
        sb = body.sql if body.type == state_t else f"CAST({body.sql} AS {spark_type(state_t)})"
        return c(f"(CASE WHEN {init.sql} IS NULL THEN NULL WHEN {coll.sql} IS NULL THEN {init.sql} "
                 f"ELSE aggregate({source}, {init.sql}, {params} -> {sb}) END)", state_t)

    add_raw(reg, "REDUCE", reduce_, lo=3, hi=3, category=CAT,
            description="Folds an array (or map) into a value from an initial state with a lambda.")
    _ = K, quote
