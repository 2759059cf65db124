"""The console's browser rules and sessions (``server/web_console.py``), without a server."""

from __future__ import annotations

import pytest

from streamsql.server import web_console as wc
from streamsql.runtime.vocabulary import KEYWORDS, Vocabulary, from_json, to_json


@pytest.mark.parametrize("headers", [
    {},  # a client that is not a browser (the shell, curl, ksqlDB's clients)
    {"origin": "http://127.0.0.1:8088", "host": "127.0.0.1:8088", "sec-fetch-site": "same-origin"},
    {"sec-fetch-site": "none"},  # a person typed the address
])
def test_own_and_non_browser_requests_pass(headers: dict[str, str]) -> None:
    assert wc.cross_origin(headers, "http") is None


@pytest.mark.parametrize("headers", [
    {"origin": "http://127.0.0.1:9999", "host": "127.0.0.1:8088"},  # another port: the same site, not the same origin
    {"origin": "https://127.0.0.1:8088", "host": "127.0.0.1:8088"},
    {"origin": "null", "host": "127.0.0.1:8088"},
    {"sec-fetch-site": "same-site"},
    {"sec-fetch-site": "cross-site", "host": "127.0.0.1:8088"},
])
def test_other_origins_are_named(headers: dict[str, str]) -> None:
    assert wc.cross_origin(headers, "http")


def test_the_cookie_is_http_only_and_strict_and_its_token_is_read_back() -> None:
    cookie = wc.set_cookie("abc", secure=True, max_age_s=60)
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Secure" in cookie
    assert "Secure" not in wc.set_cookie("abc", secure=False, max_age_s=60)
    assert wc.cookie_token({"cookie": f"other=1; {wc.COOKIE}=tok-1"}) == "tok-1"
    assert wc.cookie_token({"cookie": "other=1"}) is None


def test_sessions_end_at_logout_at_their_lifetime_and_are_bounded() -> None:
    sessions = wc.ConsoleSessions(lifetime_s=3600, max_sessions=2)
    first = sessions.open("ana")
    assert sessions.user(first) == "ana" and sessions.user("forged") is None
    sessions.close(first)
    assert sessions.user(first) is None
    a, b, c = sessions.open("a"), sessions.open("b"), sessions.open("c")
    assert len(sessions) == 2 and sessions.user(a) is None and sessions.user(c) == "c" and sessions.user(b) == "b"
    expired = wc.ConsoleSessions(lifetime_s=-1)
    assert expired.user(expired.open("x")) is None


@pytest.mark.parametrize("name", ["../app.py", "", ".hidden", "sub/index.html", "nothing.html", "web_console.py"])
def test_only_the_console_directorys_files_are_served(name: str) -> None:
    assert wc.asset(name) is None


def test_the_page_and_its_script_are_in_the_package() -> None:
    page = wc.asset("index.html")
    script = wc.asset("console.js")
    assert page is not None and page[1].startswith("text/html") and b"console.js" in page[0]
    assert script is not None and script[1].startswith("text/javascript")
    assert b"<script>" not in page[0]  # the CSP allows no inline script
    assert b"innerHTML" not in script[0]  # text from data is set as text, never parsed as HTML


def test_the_vocabulary_travels_as_json_with_the_dialects_words() -> None:
    vocab = Vocabulary({"S": "STREAM"}, {"S": ["A"]}, ["Q1"], ["ABS"], ["auto.offset.reset"], [], ["t"])
    body = to_json(vocab)
    assert body["keywords"] == KEYWORDS and "STREAMS" in body["showTargets"]
    assert from_json(body) == vocab
    assert from_json({"sources": [1], "queries": "x"}) == Vocabulary()
