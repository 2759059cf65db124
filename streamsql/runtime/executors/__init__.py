"""One executor per kind of statement: what a parsed statement does to the engine.

The engine (``runtime/engine.py``) parses, holds the session and dispatches; each executor here
owns its statements' rules and effects:

- ``sources.py``: CREATE STREAM/TABLE (declared sources), DROP, CREATE/DROP TYPE;
- ``persistent.py``: CREATE … AS SELECT, INSERT INTO … SELECT, TERMINATE, and starting a
  persistent query (also on replay and on the supervisor's restart);
- ``transient.py``: SELECT — push queries and pull queries;
- ``session_statements.py``: SET, UNSET, DEFINE, UNDEFINE;
- ``connectors.py``: CREATE/DROP CONNECTOR, SHOW CONNECTORS, DESCRIBE CONNECTOR;
- ``inspection.py``: SHOW, DESCRIBE, EXPLAIN, PRINT;
- ``inserts.py``: INSERT INTO … VALUES.

ksqlDB has the same split (a ``DdlCommandExec`` for DDL, an executor per meta statement in
``CustomExecutors``, the engine for queries). An executor reaches the engine's shared parts —
catalog, planner, query registry, admin client, properties — through the engine it was built
with; it keeps no copy of the session.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from streamsql.planner.aggregation import AggregatePlan
from streamsql.planner.planner import QueryPlan
from streamsql.sql import ast

if TYPE_CHECKING:
    from streamsql.runtime import results as r
    from streamsql.runtime.engine import Engine

#: a statement's executor method: ``(statement) -> result``, and for a logged statement also
#: ``replay_seq=`` / ``deferred=`` (see :data:`LOGGED_STATEMENTS`)
Handler = Callable[..., "r.Result"]

#: the statements the command log keeps and a replay (or ``plan_only``) executes again: their
#: handlers take ``replay_seq`` (the command's sequence number) and ``deferred`` (where a
#: persistent query waits to start until the whole log is replayed)
LOGGED_STATEMENTS: tuple[type[ast.Statement], ...] = (
    ast.CreateSource, ast.CreateAsSelect, ast.InsertInto, ast.DropSource, ast.Terminate, ast.CreateType,
    ast.DropType, ast.CreateConnector, ast.DropConnector, ast.AlterSource,
    ast.PauseQuery, ast.ResumeQuery)


#: the statements that only read the catalog (or change the caller's own session): they run
#: side by side, never waiting for another client's statement. Everything else — every logged
#: statement, and whatever kind is added later until it is listed here — runs one at a time.
READ_STATEMENTS: tuple[type[ast.Statement], ...] = (
    ast.SelectStatement, ast.Print, ast.Show, ast.Describe, ast.InsertValues, ast.AssertTopic,
    ast.AssertSchema, ast.SetProperty, ast.UnsetProperty, ast.DefineVariable, ast.UndefineVariable)


def changes_catalog(stmt: ast.Statement) -> bool:
    """Whether ``stmt`` must wait for the statements that change the catalog before it (the
    engine's command lock, ksqlDB's command topic order). EXPLAIN of a running query or of a
    SELECT reads; EXPLAIN of a CREATE … AS SELECT plans it as its statement would."""
    if isinstance(stmt, ast.Explain):
        return stmt.statement is not None and changes_catalog(stmt.statement)
    return not isinstance(stmt, READ_STATEMENTS)


#: persistent queries whose start waits for the end of a replay: (id, plan, statement, sink name)
Deferred = list[tuple[str, QueryPlan | AggregatePlan, ast.Statement, str]]


class StatementExecutor:
    """The base of every executor: built by the engine with the engine itself."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def handlers(self) -> Mapping[type[ast.Statement], Handler]:
        """The statements this executor runs, each with its method."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what the executor holds for the engine's life (the engine is closing)."""


def dispatch_table(executors: list[StatementExecutor]) -> dict[type[ast.Statement], Handler]:
    """Statement type → handler over all ``executors``; a statement type claimed twice is a
    wiring error."""
    table: dict[type[ast.Statement], Handler] = {}
    for executor in executors:
        for kind, handler in executor.handlers().items():
            if kind in table:
                raise RuntimeError(f"{kind.__name__} has two executors")
            table[kind] = handler
    return table


def same_statement(a: str, b: str) -> bool:
    """Whether two statements' texts differ in whitespace, case or the final ``;`` only (the
    same statement submitted again is accepted as a no-op, not refused as a duplicate)."""
    return _normalize(a) == _normalize(b)


def _normalize(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip().rstrip(";")).strip().upper()
