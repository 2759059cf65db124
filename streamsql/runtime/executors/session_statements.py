"""SET / UNSET (a session's property overrides) and DEFINE / UNDEFINE (its variables).

They change the session the statement runs under (the engine's own, a shell's, a REST
request's), never the engine's configuration. A property whose value streamsql checks is checked
when it is SET, so a bad value is refused with the property's name instead of failing the next
query.
"""

from __future__ import annotations

from collections.abc import Mapping

from streamsql.errors import ConfigError
from streamsql.kafka import transactions
from streamsql.kafka.transactions import GUARANTEE_PROPERTY
from streamsql.runtime import query_settings as qs
from streamsql.runtime import results as r
from streamsql.runtime.config import (
    COMMIT_INTERVAL_PROPERTY,
    VALID_OFFSET_RESETS,
    commit_interval_ms,
    property_names,
    same_property,
)
from streamsql.runtime.executors import Handler, StatementExecutor
from streamsql.runtime.property_policy import PropertyPolicy
from streamsql.sql import ast


class SessionStatements(StatementExecutor):
    def handlers(self) -> Mapping[type[ast.Statement], Handler]:
        return {ast.SetProperty: self.set_property, ast.UnsetProperty: self.unset_property,
                ast.DefineVariable: self.define_variable, ast.UndefineVariable: self.undefine_variable}

    def set_property(self, stmt: ast.SetProperty) -> r.Result:
        config = self.engine.config
        if config.untrusted_clients:
            PropertyPolicy.from_properties(config.properties).check([stmt.name])
        if same_property(stmt.name, "auto.offset.reset") and stmt.value.lower() not in VALID_OFFSET_RESETS:
            raise ConfigError(f"Invalid value {stmt.value} for configuration auto.offset.reset: "
                              f"String must be one of: earliest, latest")
        if same_property(stmt.name, qs.CACHE_PROPERTY):
            qs.cache_bytes(stmt.value)
        if stmt.name == qs.BUCKETS_PROPERTY:
            qs.bucket_count(stmt.value)
        if stmt.name == qs.OPERATOR_PROPERTY:
            qs.operator_choice(stmt.value)
        if same_property(stmt.name, GUARANTEE_PROPERTY):
            transactions.guarantee(stmt.value)
        if same_property(stmt.name, COMMIT_INTERVAL_PROPERTY):
            commit_interval_ms(stmt.value)
        properties = self.engine.active_session.properties
        for spelling in property_names(stmt.name):  # one setting, whichever spelling set it last
            properties.pop(spelling, None)
        properties[stmt.name] = stmt.value
        return r.CommandStatus(stmt.text, f"Successfully changed local property '{stmt.name}' to '{stmt.value}'.")

    def unset_property(self, stmt: ast.UnsetProperty) -> r.Result:
        for spelling in property_names(stmt.name):
            self.engine.active_session.properties.pop(spelling, None)
        return r.CommandStatus(stmt.text, f"Successfully unset local property '{stmt.name}'.")

    def define_variable(self, stmt: ast.DefineVariable) -> r.Result:
        self.engine.active_session.variables[stmt.name] = stmt.value
        return r.CommandStatus(stmt.text, f"Defined variable {stmt.name}")

    def undefine_variable(self, stmt: ast.UndefineVariable) -> r.Result:
        if self.engine.active_session.variables.pop(stmt.name, None) is None:
            return r.Warning_(stmt.text, f"Cannot undefine variable '{stmt.name}' which was never defined")
        return r.CommandStatus(stmt.text, f"Undefined variable {stmt.name}")
