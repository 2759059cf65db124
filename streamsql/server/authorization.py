"""Who may do what on the server: the users file's roles, applied to parsed statements and to
endpoints.

The users file (``--auth-file``) is read as Jetty's ``PropertyFileLoginModule`` (ksqlDB's JAAS
basic auth) reads it: ``user: password[,role...]`` per line. Three roles, each allowed what the one
before it is, plus more:

* ``reader``: pull and push queries, PRINT, SHOW/LIST, DESCRIBE, EXPLAIN, ASSERT, and the
  request-scoped session statements (SET/UNSET/DEFINE/UNDEFINE change only the request or the
  client's own session, never the server's), ``/info``, ``/status``, ``/metrics``,
  ``/close-query`` and the other read-only endpoints;
* ``developer``: also what changes the catalog or the running queries: CREATE/DROP/ALTER of
  streams, tables and types, CREATE ... AS SELECT, INSERT INTO (values, ``/inserts-stream`` and
  INSERT INTO ... SELECT), TERMINATE, PAUSE, RESUME;
* ``admin``: also CREATE/DROP CONNECTOR and TERMINATE CLUSTER (``/ksql/terminate``).

Roles are on when at least one user names one of them; a file without any of them (today's files,
and ksqlDB files whose roles are only for ``authentication.roles``) keeps the old meaning: every
user may do everything. When roles are on, a user with none of them gets the least privilege,
``reader``: being in the file already says the operator trusts them to log in, and reading is what
cannot change or break anything shared (an operator who wants a user refused removes the line).
Role names are matched case-insensitively; unknown ones are ignored (a ksqlDB file may name
``user`` or ``ksql-user`` for ``authentication.roles``); several roles give the highest.

Statements are classified by their parsed type (:mod:`streamsql.sql.ast`), every statement of a
request before any runs, so a request mixing a read and a write is refused whole. A type this
module does not know needs ``admin``: a new statement is refused until someone decides.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

from streamsql.errors import ConfigError
from streamsql.server.errors import ServerError
from streamsql.sql import ast

log = logging.getLogger("streamsql.server")

FORBIDDEN = 40300
READER, DEVELOPER, ADMIN = "reader", "developer", "admin"
#: the roles from least to most privileged
ROLES = (READER, DEVELOPER, ADMIN)


@dataclass(frozen=True)
class Account:
    password: str
    #: the roles the file lists for the user, lower-cased, streamsql's and others alike
    roles: tuple[str, ...] = ()

    @property
    def role(self) -> str | None:
        """The user's highest streamsql role, or None when the file names none of them."""
        known = [ROLES.index(name) for name in self.roles if name in ROLES]
        return ROLES[max(known)] if known else None


def load_users(path: str) -> dict[str, Account]:
    """A users file as Jetty's/ksqlDB's ``PropertyFileLoginModule`` reads it: ``user: password[,role…]``
    per line (``user=password`` also accepted; spaces around the commas ignored); ``#`` comments."""
    users: dict[str, Account] = {}
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, start=1):
            line = raw.strip()
            if not line or line.startswith(("#", "!")):
                continue
            m = re.match(r"([^:=\s]+)\s*[:=]\s*(.*)$", line)
            if m is None or not m.group(2).split(",")[0].strip():
                raise ConfigError(f"{path}:{number}: expected 'user: password[,role...]'")
            password, *roles = (part.strip() for part in m.group(2).split(","))
            users[m.group(1)] = Account(password, tuple(name.lower() for name in roles if name))
    return users


@dataclass(frozen=True)
class Principal:
    """An authenticated user and the role the policy gives them."""

    user: str
    role: str


@dataclass
class RolePolicy:
    """The users' roles as the server applies them (see the module docstring)."""

    users: dict[str, Account] = field(default_factory=dict)

    @property
    def enforced(self) -> bool:
        """Roles are on: some user names one of streamsql's roles."""
        return any(account.role is not None for account in self.users.values())

    def principal(self, user: str) -> Principal:
        if not self.enforced:
            return Principal(user, ADMIN)
        account = self.users.get(user)
        return Principal(user, (account.role if account is not None else None) or READER)

    def warnings(self) -> list[str]:
        """What an operator should know at start: users without a role when roles are on."""
        if not self.enforced:
            return []
        plain = sorted(user for user, account in self.users.items() if account.role is None)
        return [f"users file: {', '.join(plain)} name no role (admin, developer or reader) while others do; "
                f"they may only read (role reader)"] if plain else []


def statement_kind(stmt: ast.Statement) -> tuple[str, str]:
    """What a statement is, as a refusal names it, and the least role that may run it."""
    if isinstance(stmt, ast.SelectStatement):
        return ("pull query" if stmt.query.emit is None else "push query"), READER
    if isinstance(stmt, ast.Print):
        return "PRINT", READER
    if isinstance(stmt, ast.Show):
        return f"SHOW {stmt.what}", READER
    if isinstance(stmt, ast.Describe):
        return "DESCRIBE", READER
    if isinstance(stmt, ast.Explain):
        return "EXPLAIN", READER
    if isinstance(stmt, (ast.AssertTopic, ast.AssertSchema)):
        return "ASSERT", READER
    if isinstance(stmt, (ast.SetProperty, ast.UnsetProperty, ast.DefineVariable, ast.UndefineVariable)):
        return type(stmt).__name__, READER
    if isinstance(stmt, ast.CreateSource):
        return f"CREATE {'SOURCE ' if stmt.is_source else ''}{stmt.kind}", DEVELOPER
    if isinstance(stmt, ast.CreateAsSelect):
        return f"CREATE {stmt.kind} AS SELECT", DEVELOPER
    if isinstance(stmt, ast.DropSource):
        return f"DROP {stmt.kind}", DEVELOPER
    if isinstance(stmt, ast.AlterSource):
        return f"ALTER {stmt.kind}", DEVELOPER
    if isinstance(stmt, ast.CreateType):
        return "CREATE TYPE", DEVELOPER
    if isinstance(stmt, ast.DropType):
        return "DROP TYPE", DEVELOPER
    if isinstance(stmt, ast.InsertValues):
        return "INSERT VALUES", DEVELOPER
    if isinstance(stmt, ast.InsertInto):
        return "INSERT INTO ... SELECT", DEVELOPER
    if isinstance(stmt, ast.Terminate):
        return "TERMINATE", DEVELOPER
    if isinstance(stmt, ast.PauseQuery):
        return "PAUSE", DEVELOPER
    if isinstance(stmt, ast.ResumeQuery):
        return "RESUME", DEVELOPER
    if isinstance(stmt, ast.CreateConnector):
        return f"CREATE {stmt.kind} CONNECTOR", ADMIN
    if isinstance(stmt, ast.DropConnector):
        return "DROP CONNECTOR", ADMIN
    return type(stmt).__name__, ADMIN  # unknown: refused until classified


def allows(role: str, needed: str) -> bool:
    return ROLES.index(role) >= ROLES.index(needed)


def forbidden(principal: Principal, what: str, needed: str) -> ServerError:
    """ksqlDB's 403 envelope (``generic_error``, error code 40300) naming the user, their role,
    what they asked for and the role it needs."""
    return ServerError(FORBIDDEN, f"Forbidden: user '{principal.user}' has role '{principal.role}', which may not "
                                  f"run {what} (it needs role '{needed}'{' or admin' if needed != ADMIN else ''}). "
                                  "No statement of the request was executed.")


def check_statements(principal: Principal, statements: list[ast.Statement]) -> None:
    """Refuse the whole request at its first statement the principal's role may not run."""
    if principal.role == ADMIN:
        return
    for stmt in statements:
        kind, needed = statement_kind(stmt)
        if not allows(principal.role, needed):
            raise forbidden(principal, f"{kind} statements (line {stmt.line}: {_excerpt(stmt.text)})", needed)


def check_action(principal: Principal, what: str, needed: str) -> None:
    """Refuse an endpoint's action (``/inserts-stream``, ``/ksql/terminate``) the role may not do."""
    if not allows(principal.role, needed):
        raise forbidden(principal, what, needed)


def _excerpt(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
