"""The web console's server side: its static page, its login sessions, and the browser rules
every request obeys.

The page (``server/console/``: HTML, CSS and one script, shipped in the wheel, nothing fetched
from elsewhere) talks to the same REST API as every client. A person logs in with a user of the
server's ``--auth-file``; the server answers a random session token in a cookie (``HttpOnly``: no
script reads it; ``SameSite=Strict``; ``Secure`` over TLS) that then authenticates the page's
requests as basic auth authenticates the others', with the same roles.

A browser sends its credentials (that cookie, or basic auth it remembers) with requests another
site's page makes, so a request a browser marks as coming from another origin (``Origin`` not
this server's, or ``Sec-Fetch-Site`` ``cross-site``/``same-site``) is refused before anything
runs. ``SameSite=Strict`` alone is not enough: another port of the same host is the same site.
Clients that are not browsers (the shell, ksqlDB's CLI and clients, curl) send neither header.
The page's ``Content-Security-Policy`` lets it run only its own script and connect only to this
server; the script writes every text from data with ``textContent``, never as HTML.
"""

from __future__ import annotations

import secrets
import threading
import time
from importlib import resources
from typing import Any

#: the cookie that carries a console session's token
COOKIE = "streamsql_console"
#: what the page may load and where it may connect: only this server, no inline script or style
CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                           "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
SECURITY_HEADERS = [("Content-Security-Policy", CONTENT_SECURITY_POLICY), ("X-Content-Type-Options", "nosniff"),
                    ("Referrer-Policy", "no-referrer"), ("X-Frame-Options", "DENY"), ("Cache-Control", "no-store")]
_CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
                  ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml", ".png": "image/png",
                  ".txt": "text/plain; charset=utf-8"}
#: ``Sec-Fetch-Site`` values of a request this server's own page made, or a person typed
_OWN_SITE = {"same-origin", "none"}


def asset(name: str) -> tuple[bytes, str] | None:
    """The console's file ``name`` (``index.html`` for the page itself) and its content type, or
    None: only files of the package's ``console`` directory, by plain name."""
    if not name or "/" in name or "\\" in name or name.startswith("."):
        return None
    suffix = name[name.rfind("."):] if "." in name else ""
    if suffix not in _CONTENT_TYPES:
        return None
    entry = resources.files("streamsql.server").joinpath("console", name)
    if not entry.is_file():
        return None
    return entry.read_bytes(), _CONTENT_TYPES[suffix]


def cross_origin(headers: dict[str, str], scheme: str) -> str | None:
    """Why a request is a browser's from another origin (None when it is not): its ``Origin``
    differs from ``scheme://Host``, or its ``Sec-Fetch-Site`` says another site made it."""
    site = headers.get("sec-fetch-site")
    if site is not None and site.lower() not in _OWN_SITE:
        return f"Sec-Fetch-Site: {site}"
    origin = headers.get("origin")
    if origin is not None:
        own = f"{scheme}://{headers.get('host', '')}".lower()
        if origin.lower() != own:
            return f"Origin {origin} is not {own}"
    return None


def cookie_token(headers: dict[str, str]) -> str | None:
    """The console session token the request's ``Cookie`` header carries."""
    for part in headers.get("cookie", "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE and value:
            return value
    return None


def set_cookie(token: str, secure: bool, max_age_s: int) -> str:
    return (f"{COOKIE}={token}; Path=/; Max-Age={max_age_s}; HttpOnly; SameSite=Strict"
            + ("; Secure" if secure else ""))


class ConsoleSessions:
    """Logged-in console sessions: a random token per login, kept in memory (a restart logs
    everyone out), ending at logout or ``lifetime_s`` after login; at most ``max_sessions`` (the
    oldest end first), so logins cannot fill the memory."""

    def __init__(self, lifetime_s: int = 12 * 3600, max_sessions: int = 10_000) -> None:
        self.lifetime_s = lifetime_s
        self.max_sessions = max_sessions
        self._sessions: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()

    def open(self, user: str) -> str:
        token = secrets.token_urlsafe(32)
        with self._lock:
            while len(self._sessions) >= self.max_sessions:
                self._sessions.pop(next(iter(self._sessions)))
            self._sessions[token] = (user, time.monotonic() + self.lifetime_s)
        return token

    def user(self, token: str) -> str | None:
        with self._lock:
            found = self._sessions.get(token)
            if found is None:
                return None
            if found[1] < time.monotonic():
                del self._sessions[token]
                return None
            return found[0]

    def close(self, token: str) -> None:
        with self._lock:
            self._sessions.pop(token, None)

    def __len__(self) -> int:
        return len(self._sessions)


def login_fields(data: Any) -> tuple[str, str] | None:
    """``{"user": …, "password": …}`` as the login form posts it."""
    if not isinstance(data, dict):
        return None
    user, password = data.get("user"), data.get("password")
    if not isinstance(user, str) or not isinstance(password, str):
        return None
    return user, password
