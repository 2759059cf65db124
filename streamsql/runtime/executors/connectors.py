"""The connector statements of one engine: CREATE SINK CONNECTOR, DROP CONNECTOR, SHOW
CONNECTORS, DESCRIBE CONNECTOR.

ksqlDB forwards these to a Kafka Connect cluster; streamsql runs each sink connector itself as a
persistent Spark query (``streamsql.connectors``; physical plan ``TopicScan`` → ``ConnectorSink``),
with its own checkpoint, so a restart resumes at the last batch every record of which was
written. The statement is durable in the command log like a query's, and replayed on start.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Iterable, Mapping
from pathlib import Path

from streamsql.catalog import ConnectorInfo, QueryInfo
from streamsql.connectors.classes import parse_sink
from streamsql.connectors.config import ConnectorError, shown_config, shown_statement
from streamsql.connectors.policy import ConnectorPolicy
from streamsql.errors import CatalogError, StreamsqlError
from streamsql.functions.python.loader import EXTENSION_DIR_PROPERTY
from streamsql.physical.builder import SparkBuilder
from streamsql.physical.steps import ConnectorSink, connector_plan
from streamsql.runtime import internal_topics, paths
from streamsql.runtime import results as r
from streamsql.runtime.executors import Deferred, Handler, StatementExecutor
from streamsql.sql import ast

#: Connect's connector states as DESCRIBE / SHOW CONNECTORS report them
RUNNING, FAILED, UNASSIGNED = "RUNNING", "FAILED", "UNASSIGNED"


def query_id(name: str) -> str:
    """The id of a connector's Spark query: ``CONNECTOR_`` and the name as it is, so distinct
    connectors have distinct ids (and checkpoints: ``paths.checkpoint_dir`` encodes the id)."""
    return "CONNECTOR_" + name


def _former_query_id(name: str) -> str:
    """The id an earlier streamsql gave a connector: every character but ``[A-Za-z0-9_]`` as
    ``_`` (``a.b`` and ``a_b`` shared one)."""
    return "CONNECTOR_" + re.sub(r"[^A-Za-z0-9_]", "_", name)


def adopt_former_checkpoint(data_dir: Path, name: str, connectors: Iterable[str]) -> None:
    """Move connector ``name``'s checkpoint from its former id's directory to its id's, so it
    resumes where it was: only when the two ids differ, the new directory does not exist yet,
    and no connector of ``connectors`` (the catalog's) owns the former id as its own id."""
    former = _former_query_id(name)
    if former == query_id(name) or any(query_id(c) == former for c in connectors):
        return
    new = paths.checkpoint_dir(data_dir, query_id(name))
    old = paths.checkpoint_dir(data_dir, former)
    if not new.exists() and old.is_dir() and not old.is_symlink():
        os.rename(old, new)


class ConnectorStatements(StatementExecutor):
    def handlers(self) -> Mapping[type[ast.Statement], Handler]:
        return {ast.CreateConnector: self.create, ast.DropConnector: self.drop}

    def create(self, stmt: ast.CreateConnector, replay_seq: int | None = None,
               deferred: Deferred | None = None) -> r.Result:
        engine = self.engine
        catalog = engine.catalog
        existing = catalog.connectors.get(stmt.name)
        if existing is not None:
            if stmt.if_not_exists:
                return r.Warning_(stmt.text, f"Connector {stmt.name} already exists")
            raise CatalogError(f"Failed to create connector: Connector {stmt.name} already exists")
        if stmt.kind == "SOURCE":
            raise ConnectorError("streamsql runs sink connectors only: load data into Kafka with your producers, "
                                 "or INSERT INTO … VALUES")
        cls, config = parse_sink(stmt.name, stmt.kind, stmt.config)
        internal_topics.check_connector(config.topics)
        self.policy().apply(config)
        info = ConnectorInfo(stmt.name, stmt.kind, cls.name, dict(stmt.config), stmt.text, list(config.topics))
        if replay_seq is None:  # Connect waits for a missing topic; a typo is likelier here
            existing_topics = engine.admin.topics()
            for topic in config.topics:
                if topic not in existing_topics:
                    raise ConnectorError(f"Connector {stmt.name}: topic '{topic}' does not exist")
        catalog.add_connector(info)
        try:
            self.start(info)
        except StreamsqlError:
            catalog.remove_connector(stmt.name)
            raise
        engine.log_command(stmt, replay_seq)
        return r.ConnectorCreated(stmt.text, stmt.name, stmt.kind, shown_config(stmt.config))

    def start(self, info: ConnectorInfo) -> None:
        """Start (or restart, on its checkpoint) the connector's query."""
        engine = self.engine
        cls, config = parse_sink(info.name, info.kind, info.config)
        config = self.policy().apply(config)  # a command logged by an earlier version is held to it too
        qid = query_id(info.name)
        adopt_former_checkpoint(engine.data_dir, info.name, engine.catalog.connectors)
        checkpoint = paths.checkpoint_dir(engine.data_dir, qid)
        plan = connector_plan(ConnectorSink(info.name, cls.name, config), tuple(config.topics))
        engine.queries.plans[qid] = plan
        if engine.planning_only:
            return
        handle = SparkBuilder(engine.build_context(qid)).start(plan, checkpoint, qid)
        # SHOW QUERIES and EXPLAIN show the statement with its secrets hidden, as Connect shows a config
        shown = QueryInfo(qid, shown_statement(info.statement), info.name, list(info.topics), "CONNECTOR")
        engine.queries.started(shown, handle, checkpoint, restart=lambda: self.start(info))

    def policy(self) -> ConnectorPolicy:
        """Where this engine's connectors may write (the operator's configuration, never a
        session's)."""
        config = self.engine.config
        return ConnectorPolicy.from_properties(config.properties, self.engine.data_dir,
                                               config.property(EXTENSION_DIR_PROPERTY) or None)

    def drop(self, stmt: ast.DropConnector, replay_seq: int | None = None,
             deferred: Deferred | None = None) -> r.Result:
        engine = self.engine
        info = engine.catalog.remove_connector(stmt.name)
        if info is None:
            if stmt.if_exists:
                return r.Warning_(stmt.text, f"Connector {stmt.name} does not exist.")
            raise CatalogError(f"Connector {stmt.name} does not exist.")
        qid = query_id(stmt.name)
        engine.queries.stop(qid)
        # a connector created again under this name starts afresh (its documents are rewritten
        # with the same ids, so nothing is duplicated); a checkpoint under its former id too
        adopt_former_checkpoint(engine.data_dir, stmt.name, engine.catalog.connectors)
        paths.remove_tree(engine.data_dir, paths.checkpoint_dir(engine.data_dir, qid))
        engine.log_command(stmt, replay_seq)
        return r.ConnectorDropped(stmt.text, stmt.name)

    def show(self, stmt: ast.Show) -> r.ConnectorList:
        infos = sorted(self.engine.catalog.connectors.values(), key=lambda i: i.name)
        return r.ConnectorList(stmt.text, [self._summary(i) for i in infos
                                           if stmt.connector_kind in (None, i.kind)])

    def describe(self, stmt: ast.Describe) -> r.ConnectorDescription:
        info = self.engine.catalog.connectors.get(stmt.name or "")
        if info is None:
            raise CatalogError(f"Could not find connector '{stmt.name}'")
        summary = self._summary(info)
        _cls, config = parse_sink(info.name, info.kind, info.config)
        writes = config.describe_writes()
        return r.ConnectorDescription(stmt.text, summary, list(info.topics), _worker_id(), self._trace(info), writes)

    def _summary(self, info: ConnectorInfo) -> r.ConnectorSummary:
        return r.ConnectorSummary(info.name, info.kind, info.class_name, self._state(info))

    def _state(self, info: ConnectorInfo) -> str:
        running = self.engine.queries.get(query_id(info.name))
        if running is None:
            return UNASSIGNED
        try:
            if running.handle.isActive:
                return RUNNING
            return FAILED if running.handle.exception() is not None else UNASSIGNED
        except Exception:  # noqa: BLE001 - a handle whose JVM side is gone
            return FAILED

    def _trace(self, info: ConnectorInfo) -> str | None:
        running = self.engine.queries.get(query_id(info.name))
        if running is None:
            return None
        try:
            exc = running.handle.exception()
        except Exception as e:  # noqa: BLE001
            return str(e)
        if exc is None:
            return None
        from streamsql.errors import spark_message

        return spark_message(exc)


def _worker_id() -> str:
    """Connect's ``worker_id`` (host:port of the worker): here the host streamsql runs on."""
    return f"{socket.gethostname()}:streamsql"
