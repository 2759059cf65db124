"""CREATE STREAM / CREATE TABLE (declared sources), DROP STREAM / DROP TABLE, CREATE TYPE and
DROP TYPE: what enters and leaves the catalog, and the topics that go with it.

A declared source needs its topic (created with ``PARTITIONS``, else it must exist, with the
partition count asked for). A source table is also materialized: a persistent query reads its
topic into the table's store (``PersistentQueries.materialize_source_table``). DROP refuses while
queries read or write the source, as ksqlDB does, and stops the source's own writer.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Mapping

from streamsql.errors import AnalysisError, CatalogError, KafkaError
from streamsql.planner import ddl
from streamsql.runtime import internal_topics, paths
from streamsql.runtime import results as r
from streamsql.runtime.executors import Deferred, Handler, StatementExecutor, same_statement
from streamsql.runtime.executors.persistent import source_changelog_topic
from streamsql.sql import ast

log = logging.getLogger("streamsql")

#: a source created by CREATE … AS SELECT (its query may have been terminated since)
_AS_SELECT = re.compile(r"\bAS\s+SELECT\b", re.IGNORECASE)


class SourceStatements(StatementExecutor):
    def handlers(self) -> Mapping[type[ast.Statement], Handler]:
        return {ast.CreateSource: self.create_source, ast.DropSource: self.drop_source,
                ast.AlterSource: self.alter_source, ast.CreateType: self.create_type, ast.DropType: self.drop_type}

    def create_source(self, stmt: ast.CreateSource, replay_seq: int | None = None,
                      deferred: Deferred | None = None) -> r.Result:
        engine = self.engine
        existing = engine.catalog.find(stmt.name)
        if stmt.or_replace and (stmt.is_source or (existing is not None and existing.is_source)):
            raise CatalogError(f"Cannot add {stmt.kind.lower()} '{stmt.name}': CREATE OR REPLACE is not supported on "
                               f"source {stmt.kind.lower()}s.")
        if existing is not None:
            if same_statement(existing.statement, stmt.text):
                return r.CommandStatus(stmt.text, f"{stmt.kind.title()} {stmt.name} already exists (unchanged)")
            if stmt.if_not_exists:
                return r.Warning_(stmt.text, f"Cannot add {stmt.kind.lower()} {stmt.name}: A {existing.kind.lower()} "
                                             f"with the same name already exists.")
            if not stmt.or_replace:
                raise CatalogError(f"Cannot add {stmt.kind.lower()} '{stmt.name}': A {existing.kind.lower()} "
                                   f"with the same name already exists")
        if replay_seq is None:  # a command an earlier version accepted replays as it ran then
            for column in stmt.columns:
                ddl.check_header_type(column)
        source = engine.definitions.source(stmt)
        if stmt.kind == "TABLE" and not source.key_columns:
            raise AnalysisError("Tables require a PRIMARY KEY. Please define the PRIMARY KEY.")
        if replay_seq is None:
            internal_topics.check_declare(source.topic, stmt.kind)
            partitions = stmt.properties.get("PARTITIONS")
            if engine.admin.topic_exists(source.topic):
                source.partitions = engine.admin.partitions(source.topic)
                if partitions is not None and int(partitions) != source.partitions:
                    raise KafkaError(f"A Kafka topic with the name '{source.topic}' already exists, with different "
                                     f"partition count. Existing: {source.partitions}, requested: {partitions}")
            elif partitions is not None:
                replicas = int(stmt.properties.get("REPLICAS", 1))
                engine.admin.create_topic(source.topic, int(partitions), replicas)
                source.partitions = int(partitions)
            else:
                raise KafkaError(f"Topic '{source.topic}' does not exist. Create the topic first or set the "
                                 f"PARTITIONS property in the WITH clause to have streamsql create it.")
        else:
            source.partitions = int(stmt.properties.get("PARTITIONS", 1))
        if existing is not None:
            engine.catalog.remove(existing.name)
        engine.catalog.add(source)
        seq = engine.log_command(stmt, replay_seq)
        if source.is_source and source.is_table:
            engine.persistent.materialize_source_table(source, seq, deferred)
        return r.CommandStatus(stmt.text, f"{stmt.kind.title()} created")

    def drop_source(self, stmt: ast.DropSource, replay_seq: int | None = None,
                    deferred: Deferred | None = None) -> r.Result:
        engine = self.engine
        source = engine.catalog.find(stmt.name)
        if source is None:
            if stmt.if_exists:
                return r.CommandStatus(stmt.text, f"Source {stmt.name} does not exist.")
            raise CatalogError(f"Source {stmt.name} does not exist.")
        if source.kind != stmt.kind:
            raise CatalogError(f"Incompatible data source type is {source.kind}, but statement was DROP {stmt.kind}")
        readers = [q.id for q in engine.catalog.queries_reading(stmt.name)]
        inserts = [q.id for q in engine.catalog.queries_writing(stmt.name) if q.id != source.writer_query]
        if readers or inserts:
            raise CatalogError(f"Cannot drop {stmt.name}.\nThe following queries read from this source: "
                               f"[{', '.join(readers)}].\nThe following queries write into this source: "
                               f"[{', '.join(inserts)}].\nYou need to terminate them before dropping {stmt.name}.")
        if stmt.delete_topic and source.is_source:
            raise CatalogError(f"Cannot delete topic for read-only source: {stmt.name}")
        if stmt.delete_topic and replay_seq is None:
            internal_topics.check_delete(source.topic)
        changelog = source_changelog_topic(source) if source.is_source and source.is_table else None
        store_name = source.writer_query or source.name  # terminating the writer forgets it
        if source.writer_query:
            engine.persistent.terminate(source.writer_query)
        if changelog is not None and replay_seq is None:
            self._delete_topic(changelog)
        engine.followed.pop(stmt.name, None)
        store = engine.stores.pop(stmt.name, None)
        if store is not None:
            store.close()
        paths.remove_table_store(engine.data_dir, store_name)
        engine.catalog.remove(stmt.name)
        if stmt.delete_topic and replay_seq is None:
            self._delete_topic(source.topic)
        engine.log_command(stmt, replay_seq)
        return r.CommandStatus(stmt.text, f"Source `{stmt.name}` (topic: {source.topic}) was dropped.")

    def alter_source(self, stmt: ast.AlterSource, replay_seq: int | None = None,
                     deferred: Deferred | None = None) -> r.Result:
        """ksqlDB's checks in its order (AlterSourceFactory, then DdlCommandExec); the new columns
        follow the value columns. Running queries keep the schema they were planned with."""
        engine = self.engine
        source = engine.catalog.find(stmt.name)
        kind = stmt.kind.lower()
        if source is not None and source.is_source:
            raise CatalogError(f"Cannot alter {kind} '{stmt.name}': ALTER operations are not supported on "
                               f"source {kind}s.")
        if source is None:
            raise CatalogError(f"Source {stmt.name} does not exist.")
        if source.kind != stmt.kind:
            raise CatalogError(f"Incompatible data source type is {source.kind}, but statement was ALTER {stmt.kind}")
        if source.writer_query is not None or _AS_SELECT.search(source.statement):
            raise CatalogError("ALTER command is not supported for CREATE ... AS statements.")
        names = {c.name for c in source.columns}
        for column in stmt.columns:
            if column.name in names:
                raise CatalogError(f"Cannot add column `{column.name}` to schema. A column with the same name "
                                   f"already exists.")
            names.add(column.name)
        altered = dataclasses.replace(source, columns=[*source.columns, *stmt.columns])
        engine.catalog.remove(source.name)
        engine.catalog.add(altered)
        engine.log_command(stmt, replay_seq)
        return r.CommandStatus(stmt.text, f"{source.kind.title()} {source.name} altered.")

    def _delete_topic(self, topic: str) -> None:
        try:
            self.engine.admin.delete_topic(topic)
        except KafkaError as e:
            log.warning("could not delete topic %s: %s", topic, e)

    def create_type(self, stmt: ast.CreateType, replay_seq: int | None = None,
                    deferred: Deferred | None = None) -> r.Result:
        types = self.engine.catalog.types
        if stmt.name in types:
            if stmt.if_not_exists:
                return r.Warning_(stmt.text, f"A type with the name '{stmt.name}' already exists")
            raise CatalogError(f"Cannot register custom type '{stmt.name}' since it is already registered "
                               f"with type: {types[stmt.name]}")
        self.engine.catalog.add_type(stmt.name, stmt.type)
        self.engine.log_command(stmt, replay_seq)
        return r.CommandStatus(stmt.text, f"Registered custom type with name '{stmt.name}' and SQL type {stmt.type}")

    def drop_type(self, stmt: ast.DropType, replay_seq: int | None = None,
                  deferred: Deferred | None = None) -> r.Result:
        types = self.engine.catalog.types
        if stmt.name not in types:
            if stmt.if_exists:
                return r.CommandStatus(stmt.text, f"Type '{stmt.name}' does not exist")
            raise CatalogError(f"Type {stmt.name} does not exist.")
        self.engine.catalog.remove_type(stmt.name)
        self.engine.log_command(stmt, replay_seq)
        return r.CommandStatus(stmt.text, f"Dropped type '{stmt.name}'")
