"""The engine's parse cache: the same text parses once, each caller gets its own statements, and
everything the parse depends on is in the key."""

from __future__ import annotations

from streamsql import types as t
from streamsql.runtime.engine import ParseCache
from streamsql.sql import ast


def test_a_repeated_text_is_parsed_once_and_copied() -> None:
    cache = ParseCache()
    sql = "SELECT * FROM t WHERE k = 'a' EMIT CHANGES;"
    first = cache.get(sql, {}, {}, None)
    second = cache.get(sql, {}, {}, None)
    assert first[0].text == second[0].text and first[0] is not second[0]
    assert isinstance(first[0], ast.SelectStatement)
    assert first[0].query.where is not second[0].query.where  # type: ignore[attr-defined]
    assert len(cache._entries) == 1


def test_a_pull_query_is_shared_not_copied_and_its_list_is_the_callers() -> None:
    """The pull query executor plans from its own copy (``TransientQueries.select``): the
    cache's statement is handed out as is; the list around it is the caller's own."""
    cache = ParseCache()
    sql = "SELECT * FROM t WHERE k = 'a';"
    first = cache.get(sql, {}, {}, None)
    second = cache.get(sql, {}, {}, None)
    assert first[0] is second[0] and first is not second
    mixed = "SELECT * FROM t WHERE k = 'a'; SELECT * FROM t WHERE k = 'b' EMIT CHANGES;"
    a, b = cache.get(mixed, {}, {}, None), cache.get(mixed, {}, {}, None)
    assert a[0] is not b[0] and a[1] is not b[1]  # a script with anything else is copied whole


def test_variables_types_and_limits_are_part_of_the_key() -> None:
    cache = ParseCache()
    sql = "SELECT * FROM t WHERE k = '${v}';"
    a = cache.get(sql, {"v": "a"}, {}, None)
    b = cache.get(sql, {"v": "b"}, {}, None)
    assert "'a'" in a[0].query.where.sql() and "'b'" in b[0].query.where.sql()  # type: ignore[attr-defined]
    cache.get("CREATE STREAM s (x MYTYPE) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON');", {}, {"MYTYPE": t.INTEGER}, None)
    cache.get("CREATE STREAM s (x MYTYPE) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON');", {}, {"MYTYPE": t.STRING}, None)
    assert len(cache._entries) == 4


def test_the_cache_is_bounded() -> None:
    cache = ParseCache()
    for i in range(ParseCache.SIZE + 20):
        cache.get(f"SELECT * FROM t WHERE k = {i};", {}, {}, None)
    assert len(cache._entries) == ParseCache.SIZE
