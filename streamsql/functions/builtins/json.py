"""JSON functions (category JSON)."""

from __future__ import annotations

from streamsql import types as t
from streamsql.functions.builtins.base import K, add, c, sig
from streamsql.functions.builtins.lambdas import fresh
from streamsql.functions.compiled import Compiled
from streamsql.functions.registry import FunctionRegistry

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


def numbers_as_strings(json_sql: str) -> str:
    """JSON text with every number outside string tokens quoted, so a JSONPath lookup returns
    the number's text as written ('1.23450'); Spark's parser would re-render it ('1.2345')."""
    tokens = f"regexp_extract_all({json_sql}, '(\"(?:[^\"\\\\\\\\]|\\\\\\\\.)*\"|[^\"]+)', 1)"
    x = fresh("x")
    quoted = (f"transform({tokens}, {x} -> CASE WHEN startswith({x}, '\"') THEN {x} "
              f"ELSE regexp_replace({x}, '(-?[0-9][0-9.eE+-]*)', '\"$1\"') END)")
    return f"array_join({quoted}, '')"


def extract_json_field(cs: list[Compiled]) -> Compiled:
    """EXTRACTJSONFIELD: objects and arrays as JSON text, scalars as their text in the source."""
    plain = f"get_json_object({cs[0].sql}, {cs[1].sql})"
    exact = f"get_json_object({numbers_as_strings(cs[0].sql)}, {cs[1].sql})"
    return c(f"(CASE WHEN substring({plain}, 1, 1) IN ('{{', '[') THEN {plain} ELSE {exact} END)", t.STRING)


def register(reg: FunctionRegistry) -> None:
    add(reg, "EXTRACTJSONFIELD", extract_json_field,
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
    register_documents(reg)


def _valid_json(x: str) -> str:
    return f"({x} IS NOT NULL AND (trim({x}) = 'null' OR try_parse_json({x}) IS NOT NULL))"


def _as_array(x: str) -> str:
    """A JSON document as an array of its items (a non-array is one item)."""
    return (f"(CASE WHEN startswith(ltrim({x}), '[') THEN from_json({x}, 'array<variant>') "
            f"ELSE array(parse_json({x})) END)")


def json_concat(cs: list[Compiled]) -> Compiled:
    """JSON_CONCAT: objects merge (later keys win); otherwise items are concatenated into one
    array, a non-array document counting as one item. Any null or invalid document: null."""
    xs = [x.sql for x in cs]
    valid = " AND ".join(_valid_json(x) for x in xs)
    objects = " AND ".join(f"startswith(ltrim({x}), '{{')" for x in xs)
    merged = f"to_json(map_concat({', '.join(f'from_json({x}, {chr(39)}map<string,variant>{chr(39)})' for x in xs)}))"
    joined = f"to_json(concat({', '.join(_as_array(x) for x in xs)}))"
    return c(f"(CASE WHEN NOT ({valid}) THEN NULL WHEN {objects} THEN {merged} ELSE {joined} END)", t.STRING)


def json_array_contains(cs: list[Compiled]) -> Compiled:
    items = f"from_json({cs[0].sql}, 'array<variant>')"
    x = fresh("x")
    return c(f"(CASE WHEN {cs[0].sql} IS NULL OR NOT startswith(ltrim({cs[0].sql}), '[') THEN FALSE "
             f"ELSE coalesce(exists({items}, {x} -> to_json({x}) = {to_json_sql(cs[1])}), FALSE) END)", t.BOOLEAN)


def register_documents(reg: FunctionRegistry) -> None:
    """JSON_ITEMS, JSON_RECORDS, JSON_CONCAT, JSON_ARRAY_CONTAINS: on Spark's VARIANT parser, so
    nested values come back as JSON text."""
    x, k, v = fresh("x"), fresh("k"), fresh("v")
    add(reg, "JSON_ITEMS",
        lambda cs: c(f"transform(from_json({cs[0].sql}, 'array<variant>'), {x} -> to_json({x}))", t.Array(t.STRING)),
        lo=1, hi=1, category=CAT, description="The items of a JSON array, each as JSON text.", accepts=sig("str"))
    add(reg, "JSON_RECORDS",
        lambda cs: c(f"transform_values(from_json({cs[0].sql}, 'map<string,variant>'), ({k}, {v}) -> to_json({v}))",
                     t.Map(t.STRING, t.STRING)),
        lo=1, hi=1, category=CAT, description="The fields of a JSON object, values as JSON text.", accepts=sig("str"))
    add(reg, "JSON_CONCAT", json_concat, lo=2, hi=None, category=CAT,
        description="Merges JSON objects, or concatenates JSON arrays (other documents as one item).",
        accepts=sig("str", "str", "..."))
    add(reg, "JSON_ARRAY_CONTAINS", json_array_contains, lo=2, hi=2, category=CAT,
        description="Whether a JSON array contains a value.", accepts=sig("str", "any"))
