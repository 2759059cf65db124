"""JSON functions (category JSON)."""

from __future__ import annotations

from streamsql import types as t
from streamsql.planner.builtins.base import K, add, c, sig
from streamsql.planner.expressions import Compiled
from streamsql.planner.functions import FunctionRegistry

CAT = "JSON"
_JSON_OPTS = "map('timestampFormat', 'yyyy-MM-dd''T''HH:mm:ss.SSS', 'ignoreNullFields', 'false')"


def to_json_sql(x: Compiled) -> str:
    """ksqlDB's JSON text of any value (``null`` for null)."""
    k = x.type.kind if x.type is not None else None
    v = x.sql
    if k == K.TIME:
        v = f"date_format(timestamp_millis(CAST({x.sql} AS BIGINT)), 'HH:mm:ss')"
    if k == K.TIMESTAMP:
        v = f"date_format({x.sql}, 'yyyy-MM-dd''T''HH:mm:ss.SSS')"
    body = f"to_json(named_struct('v', {v}), {_JSON_OPTS})"
    return f"(CASE WHEN {x.sql} IS NULL THEN 'null' ELSE substring({body}, 6, char_length({body}) - 6) END)"


def register(reg: FunctionRegistry) -> None:
    add(reg, "EXTRACTJSONFIELD", lambda cs: c(f"get_json_object({cs[0].sql}, {cs[1].sql})", t.STRING),
        lo=2, hi=2, category=CAT, description="The value at a JSONPath in JSON text, as a string.",
        accepts=sig("str", "str"))
    add(reg, "TO_JSON_STRING", lambda cs: c(to_json_sql(cs[0]), t.STRING), lo=1, hi=1, category=CAT,
        description="Serializes any value as JSON text.")
    add(reg, "IS_JSON_STRING", lambda cs: c(f"coalesce(try_parse_json({cs[0].sql}) IS NOT NULL, FALSE)", t.BOOLEAN),
        lo=1, hi=1, category=CAT, description="Whether a string is valid JSON.", accepts=sig("str"))
    add(reg, "JSON_ARRAY_LENGTH", lambda cs: c(f"json_array_length({cs[0].sql})", t.INTEGER), lo=1, hi=1,
        category=CAT, description="Number of elements of a JSON array (null if not an array).", accepts=sig("str"))
    add(reg, "JSON_KEYS", lambda cs: c(f"json_object_keys({cs[0].sql})", t.Array(t.STRING)), lo=1, hi=1,
        category=CAT, description="The keys of a JSON object (null if not an object).", accepts=sig("str"))
