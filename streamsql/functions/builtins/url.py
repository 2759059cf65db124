"""URL functions (category URL), on Spark's parse_url / url_encode / url_decode."""

from __future__ import annotations

from streamsql import types as t
from streamsql.functions.builtins.base import add, c, sig
from streamsql.functions.registry import FunctionRegistry

CAT = "URL"


def register(reg: FunctionRegistry) -> None:
    for name, part, desc in (("URL_EXTRACT_HOST", "HOST", "The host of a URL."),
                             ("URL_EXTRACT_PATH", "PATH", "The path of a URL."),
                             ("URL_EXTRACT_QUERY", "QUERY", "The query string of a URL."),
                             ("URL_EXTRACT_FRAGMENT", "REF", "The fragment of a URL."),
                             ("URL_EXTRACT_PROTOCOL", "PROTOCOL", "The scheme of a URL.")):
        if part == "PATH":
            sql = lambda cs, p=part: c(f"try_url_decode(parse_url({cs[0].sql}, '{p}'))", t.STRING)  # noqa: E731
        elif part in ("QUERY", "REF"):
            sql = lambda cs, p=part: c(f"try_url_decode(parse_url({cs[0].sql}, '{p}'))", t.STRING)  # noqa: E731
        else:
            sql = lambda cs, p=part: c(f"parse_url({cs[0].sql}, '{p}')", t.STRING)  # noqa: E731
        add(reg, name, sql, lo=1, hi=1, category=CAT, description=desc, accepts=sig("str"))

    add(reg, "URL_EXTRACT_PORT",
        lambda cs: c(f"CAST(nullif(regexp_extract(parse_url({cs[0].sql}, 'AUTHORITY'), ':(\\\\d+)$', 1), '') AS INT)",
                     t.INTEGER),
        lo=1, hi=1, category=CAT, description="The port of a URL (null when absent).", accepts=sig("str"))
    add(reg, "URL_EXTRACT_PARAMETER",
        lambda cs: c(f"try_url_decode(parse_url({cs[0].sql}, 'QUERY', {cs[1].sql}))", t.STRING),
        lo=2, hi=2, category=CAT, description="The decoded value of a query parameter of a URL.",
        accepts=sig("str", "str"))
    add(reg, "URL_ENCODE_PARAM", lambda cs: c(f"url_encode({cs[0].sql})", t.STRING), lo=1, hi=1, category=CAT,
        description="application/x-www-form-urlencoded encoding of a string.", accepts=sig("str"))
    add(reg, "URL_DECODE_PARAM", lambda cs: c(f"try_url_decode({cs[0].sql})", t.STRING), lo=1, hi=1, category=CAT,
        description="Decodes application/x-www-form-urlencoded text.", accepts=sig("str"))
