"""INSERT INTO … VALUES: one row, its expressions evaluated as a query would evaluate them, written
to the target's topic with the target's key and value formats; and the row encoding it shares
with the REST server's ``/inserts-stream``.

ksqlDB produces the row with its own producer; so do we (the engine's Kafka admin client), with
the row's ROWTIME (or now) as the record's timestamp. INSERT VALUES is not put in the command log:
replaying it on restart would write the row again.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from streamsql import types as t
from streamsql.catalog import Source, source_formats
from streamsql.errors import PREPARE_FAILED, AnalysisError, CatalogError, spark_message
from streamsql.formats import FormatSpec, serde_for
from streamsql.functions.casts import cast_value, has_struct
from streamsql.planner.planner import compile_constant
from streamsql.runtime import internal_topics
from streamsql.runtime import results as r
from streamsql.runtime.executors import Handler, StatementExecutor
from streamsql.sql import ast


def encode_row(target: Source, values: dict[str, Any]) -> tuple[bytes | None, bytes | None]:
    """(key bytes, value bytes) of one row of Python values, keyed by column name (a column left
    out is null), with ``target``'s formats and the serdes queries write with. A value that does
    not fit its column raises Arrow's error (``pyarrow.ArrowInvalid``, ``ArrowTypeError``) or
    ``OverflowError``; callers say which row."""
    import pyarrow as pa

    def encode(spec: FormatSpec) -> bytes | None:
        if not spec.columns:
            return None
        arrays = [pa.array([values.get(c.name)], type=t.to_arrow(c.type)) for c in spec.columns]
        batch = pa.RecordBatch.from_arrays(arrays, names=[c.name for c in spec.columns])
        return serde_for(spec).encode(batch)[0]

    return encode(source_formats.key_spec(target)), encode(source_formats.value_spec(target))


class ValueInserts(StatementExecutor):
    """INSERT VALUES for one engine."""

    def handlers(self) -> Mapping[type[ast.Statement], Handler]:
        return {ast.InsertValues: self.insert}

    def insert(self, stmt: ast.InsertValues) -> r.Result:
        target = self.engine.catalog.find(stmt.target)
        if target is None:
            raise CatalogError(unknown_insert_target(stmt.target, list(self.engine.catalog.sources)))
        if target.is_source:
            raise AnalysisError(f"Cannot insert values into read-only {target.kind.lower()}: {target.name}")
        internal_topics.check_insert_values(target.topic)
        # without a column list, values go to the key columns first, then the value columns
        # (ksqlDB's logical schema order, whatever order the DDL declared them in)
        writable = [c for c in target.columns if c.role == "key"] + [c for c in target.columns if c.role == "value"]
        headers = [c.name for c in target.columns if c.role in ("headers", "header")]
        if not stmt.columns and headers:  # the implicit column list names them too
            raise AnalysisError(f"Cannot insert into HEADER columns: {', '.join(headers)}")
        names = stmt.columns or [c.name for c in writable]
        if len(names) != len(stmt.values):
            if stmt.columns:
                raise AnalysisError(f"{PREPARE_FAILED}Expected number columns and values to match: "
                                    f"{len(names)}, {len(stmt.values)}")
            raise AnalysisError(f"Expected a value for each column. Expected Columns: {names}. "
                                f"Got {[v.sql() for v in stmt.values]}")
        by_name = {c.name: c for c in target.columns}
        rowtime: int | None = None
        given: dict[str, str] = {}
        known: dict[str, Any] = {}  # plain literals of the column's own type: no Spark job
        for name, node in zip(names, stmt.values):
            if name == t.ROWTIME:
                rowtime_sql = compile_constant(node, self.engine.functions).sql
                rowtime = int(self._evaluate_constants([(rowtime_sql, t.BIGINT)])[0] or 0)
                continue
            if name in (t.ROWPARTITION, t.ROWOFFSET):
                raise AnalysisError(f"Inserting into column `{name}` is not allowed.")
            col = by_name.get(name)
            if col is None:
                raise AnalysisError(f"Column name {name} does not exist.")
            if col.role in ("headers", "header"):
                raise AnalysisError(f"Cannot insert into HEADER columns: {name}")
            plain = plain_literal(node, col.type)
            if plain is not _NOT_PLAIN:
                known[name] = plain
                continue
            value = compile_constant(node, self.engine.functions)
            # a STRUCT literal fills the column's struct by field name (absent fields null), as
            # ksqlDB, also inside an ARRAY or a MAP (Spark's CAST would match fields by position)
            given[name] = cast_value(value.sql, value.type, col.type) if has_struct(value.type) else value.sql
        evaluated = [c for c in writable if c.name not in known]
        values = self._evaluate_constants([(given.get(c.name, "NULL"), c.type) for c in evaluated]) if evaluated else []
        row = {**dict(zip([c.name for c in evaluated], values)), **known}
        key_bytes, value_bytes = encode_row(target, {c.name: row[c.name] for c in writable})
        self.engine.admin.produce(target.topic, key_bytes, value_bytes,
                           rowtime if rowtime is not None else int(time.time() * 1000))
        return r.CommandStatus(stmt.text, "Inserted 1 row")

    def _evaluate_constants(self, items: list[tuple[str, t.SqlType]]) -> list[Any]:
        """Evaluate constant expressions in Spark, cast to the column types (so INSERT VALUES
        accepts the same expressions and coercions as queries do)."""
        engine = self.engine
        engine.python_functions.install(engine.spark, engine.bootstrap_servers, engine.processing_log_topic)
        exprs = [f"CAST({sql} AS {t.to_spark(ty).simpleString()}) AS c{i}" for i, (sql, ty) in enumerate(items)]
        try:
            table = self.engine.spark.sql("SELECT " + ", ".join(exprs)).toArrow()
        except Exception as e:
            raise AnalysisError(f"Failed to evaluate values: {spark_message(e)}") from None
        return [table.column(i)[0].as_py() for i in range(len(items))]


_NOT_PLAIN = object()
_INT_RANGES = {t.Kind.INTEGER: (-(2**31), 2**31 - 1), t.Kind.BIGINT: (-(2**63), 2**63 - 1)}


def plain_literal(node: Any, column: t.SqlType) -> Any:
    """The value of a literal that needs no evaluation to fit ``column`` (a string into a
    STRING, an in-range integer into an INT or BIGINT, a boolean into a BOOLEAN, NULL into any),
    or ``_NOT_PLAIN``. What Spark's ``CAST`` would give for these is the literal itself; every
    other value (expressions, widening, decimals, overflow) is evaluated by Spark. A writer
    inserting rows one request at a time so costs no Spark job per row."""
    from sqlglot import exp

    kind = column.kind
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Boolean):
        return bool(node.this) if kind == t.Kind.BOOLEAN else _NOT_PLAIN
    negative = isinstance(node, exp.Neg)
    literal = node.this if negative else node
    if not isinstance(literal, exp.Literal):
        return _NOT_PLAIN
    if literal.is_string:
        return literal.this if kind == t.Kind.STRING and not negative else _NOT_PLAIN
    text = str(literal.this)
    if kind not in _INT_RANGES or not text.isdigit():
        return _NOT_PLAIN
    value = -int(text) if negative else int(text)
    low, high = _INT_RANGES[kind]
    return value if low <= value <= high else _NOT_PLAIN



def unknown_insert_target(name: str, known: list[str]) -> str:
    """ksqlDB's message for INSERT VALUES into a missing source, with a hint when only the case
    differs (a quoted name keeps its case, an unquoted one is upper-cased)."""
    message = f"Cannot insert values into an unknown stream/table: `{name}`"
    other = next((k for k in known if k.upper() == name.upper()), None)
    if other is None:
        return message
    if other == other.upper():
        return f"{message}\nDid you mean {other}? Hint: try removing double quotes from the source name."
    return f'{message}\nDid you mean "{other}"? Hint: wrap the source name in double quotes to make it case-sensitive.'
