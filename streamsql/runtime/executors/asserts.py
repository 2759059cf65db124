"""ASSERT [NOT EXISTS] TOPIC and ASSERT [NOT EXISTS] SCHEMA: wait until a topic or a registry
schema exists (or does not), up to a timeout — what ksqlDB's migrations tool puts before the
statements that need them. ksqlDB's rules and messages (its ``AssertTopicExecutor``,
``AssertSchemaExecutor``): the check is retried every 100 ms until the statement's ``TIMEOUT`` or
``ksql.assert.{topic,schema}.default.timeout.ms`` (1 s) passes; a topic's ``PARTITIONS`` and
``REPLICAS`` must match; a NOT EXISTS assertion ignores them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from streamsql.errors import AssertionFailed, ConfigError, KafkaError
from streamsql.formats import schema_registry
from streamsql.runtime import results as r
from streamsql.runtime.executors import Handler, StatementExecutor
from streamsql.sql import ast

RETRY_S = 0.1


def _retry(check: Callable[[], None], timeout_ms: int) -> None:
    """Run ``check`` until it stops raising :class:`AssertionFailed` or the timeout passes."""
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        try:
            check()
            return
        except AssertionFailed:
            if time.monotonic() + RETRY_S > deadline:
                raise
            time.sleep(RETRY_S)


class AssertStatements(StatementExecutor):
    def handlers(self) -> Mapping[type[ast.Statement], Handler]:
        return {ast.AssertTopic: self.assert_topic, ast.AssertSchema: self.assert_schema}

    def _timeout(self, stmt_timeout: int | None, prop: str) -> int:
        if stmt_timeout is not None:
            return stmt_timeout
        try:
            return int(self.engine.prop(prop))
        except ValueError:
            raise ConfigError(f"Invalid value {self.engine.prop(prop)!r} for configuration {prop}: "
                              f"not a number of milliseconds") from None

    def assert_topic(self, stmt: ast.AssertTopic) -> r.Result:
        admin = self.engine.admin
        topic = stmt.topic

        def check() -> None:
            try:
                exists = admin.topic_exists(topic)
            except KafkaError as e:
                raise AssertionFailed(f"Cannot check topic existence: {e}") from None
            if not stmt.exists:
                if exists:
                    raise AssertionFailed(f"Topic {topic} exists")
                return
            if not exists:
                raise AssertionFailed(f"Topic {topic} does not exist")
            problems = self._config_problems(topic, stmt.properties)
            if problems:
                raise AssertionFailed("\n".join(problems))

        _retry(check, self._timeout(stmt.timeout_ms, "ksql.assert.topic.default.timeout.ms"))
        return r.Asserted(stmt.text, "TOPIC", f"Topic {topic}", stmt.exists, topic=topic)

    def _config_problems(self, topic: str, properties: Mapping[str, Any]) -> list[str]:
        problems = []
        actual = {"partitions": lambda: self.engine.admin.partitions(topic),
                  "replicas": lambda: self.engine.admin.replicas(topic)}
        for key, expected in properties.items():
            name = key.lower()
            if name not in actual:
                problems.append(f"Cannot assert unknown topic property: {key}")
                continue
            got = actual[name]()
            if isinstance(expected, bool) or expected != got:
                problems.append(f"Mismatched configuration for topic {topic}: For config {name}, expected "
                                f"{_java_literal(expected)} got {got}")
        return problems

    def assert_schema(self, stmt: ast.AssertSchema) -> r.Result:
        url = self.engine.prop(schema_registry.URL_PROPERTY)
        subject = f" subject name {stmt.subject}" if stmt.subject is not None else ""
        schema_id = f" id {stmt.schema_id}" if stmt.schema_id is not None else ""

        def check() -> None:
            if not url:
                raise AssertionFailed(f"Cannot check schema existence: no Schema Registry is configured "
                                      f"('{schema_registry.URL_PROPERTY}')")
            exists = self._schema_exists(url, stmt.subject, stmt.schema_id)
            if stmt.exists and not exists:
                raise AssertionFailed(f"Schema with{subject}{schema_id} does not exist")
            if not stmt.exists and exists:
                raise AssertionFailed(f"Schema with{subject}{schema_id} exists")

        _retry(check, self._timeout(stmt.timeout_ms, "ksql.assert.schema.default.timeout.ms"))
        shown = (f" subject {stmt.subject}" if stmt.subject is not None else "") + schema_id
        return r.Asserted(stmt.text, "SCHEMA", f"Schema with{shown}", stmt.exists, subject=stmt.subject,
                          schema_id=stmt.schema_id)

    @staticmethod
    def _schema_exists(url: str, subject: str | None, schema_id: int | None) -> bool:
        try:
            if subject is not None and schema_id is not None:
                return schema_id in schema_registry.versions(url, subject)
            if subject is not None:
                return schema_registry.latest(url, subject) is not None
            assert schema_id is not None  # the parser requires a subject or an id
            try:
                schema_registry.by_id(url, schema_id)
            except ConfigError as e:
                if "404" in str(e) or f"no schema with id {schema_id}" in str(e):
                    return False
                raise
            return True
        except ConfigError as e:
            raise AssertionFailed(f"Cannot check schema existence: {e}") from None


def _java_literal(value: Any) -> str:
    """A WITH value as ksqlDB prints it in the mismatch message (strings unquoted)."""
    return str(value).lower() if isinstance(value, bool) else str(value)
