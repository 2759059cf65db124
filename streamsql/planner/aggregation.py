"""Plan GROUP BY queries: stream aggregations, windowed or not, into Spark streaming aggregations.

ksqlDB's shape is ``SELECT <keys and expressions over aggregates> FROM s [WINDOW w] [WHERE p]
GROUP BY k1, k2 [HAVING h]``. The plan splits it into three stages, each Spark SQL text:

1. pre-aggregation, over the source's columns: the WHERE filter and the grouping expressions
   (``__K0, __K1, ...``), rows with a null grouping value dropped (ksqlDB drops them too);
2. the aggregation: ``groupBy([window], __K...)`` with one Spark aggregate per distinct aggregate
   call (``__A0, __A1, ...``) plus ``max(ROWTIME)``: an aggregate's output record carries the
   largest timestamp of its inputs, as in Kafka Streams;
3. post-aggregation, over ``__K*``, ``__A*``, WINDOWSTART/WINDOWEND: the projection and HAVING.

Windows map onto Spark's ``window``/``session_window`` over the event time, with a watermark of
the GRACE PERIOD (ksqlDB's default grace when none is given: 24 hours). EMIT CHANGES runs in
update mode, EMIT FINAL in append mode (one row per window once the watermark passes it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlglot import exp

from streamsql import types as t
from streamsql.catalog import Source
from streamsql.errors import AnalysisError
from streamsql.planner.expressions import ExpressionCompiler, Scope, ScopeColumn, quote
from streamsql.planner.functions import REGISTRY
from streamsql.sql import ast

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: ksqlDB's grace period when a window declares none (ksql 0.x: 24 hours).
DEFAULT_GRACE_MS = 24 * 60 * 60 * 1000
EVENT_TIME = "__EVENT_TIME"
WINDOW_COL = "__WINDOW"


@dataclass
class AggregateColumn:
    name: str
    sql: str  # over the post-aggregation scope
    type: t.SqlType | None
    is_key: bool


@dataclass
class AggregatePlan:
    source: Source
    alias: str
    where: str | None
    keys: list[tuple[str, str, t.SqlType | None]]  # (internal name, pre-agg SQL, type)
    aggregates: list[tuple[str, str]]  # (internal name, Spark aggregate SQL over the source)
    columns: list[AggregateColumn]
    having: str | None
    window: ast.WindowSpec | None
    emit: str | None
    limit: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def key_columns(self) -> list[AggregateColumn]:
        return [c for c in self.columns if c.is_key]

    @property
    def value_columns(self) -> list[AggregateColumn]:
        return [c for c in self.columns if not c.is_key]

    @property
    def output_mode(self) -> str:
        return "append" if self.emit == "FINAL" else "update"

    @property
    def grace_ms(self) -> int:
        if self.window is None:
            return 0
        return self.window.grace_ms if self.window.grace_ms is not None else DEFAULT_GRACE_MS

    def explain(self) -> str:
        lines = [f"SOURCE {self.source.kind} {self.source.name} (topic {self.source.topic})"]
        if self.where:
            lines.append(f"  FILTER {self.where}")
        lines.append("  GROUP BY " + ", ".join(f"{sql} AS {name}" for name, sql, _ in self.keys))
        if self.window:
            w = self.window
            lines.append(f"  WINDOW {w.type} size={w.size_ms}ms advance={w.advance_ms} grace={self.grace_ms}ms")
        lines.append("  AGGREGATE " + ", ".join(f"{sql} AS {name}" for name, sql in self.aggregates))
        if self.having:
            lines.append(f"  HAVING {self.having}")
        lines.append("  PROJECT " + ", ".join(f"{c.sql} AS {c.name}{' KEY' if c.is_key else ''}" for c in self.columns))
        lines.append(f"  EMIT {self.emit or 'CHANGES'} ({self.output_mode} mode)")
        return "\n".join(lines)


def _replace(node: exp.Expression, fn) -> exp.Expression:  # type: ignore[no-untyped-def]
    """Pre-order replacement: ``fn`` returns a replacement (not descended into) or None."""
    replacement = fn(node)
    if replacement is not None:
        return replacement
    node = node.copy()
    for key, value in list(node.args.items()):
        if isinstance(value, exp.Expression):
            node.set(key, _replace(value, fn))
        elif isinstance(value, list):
            node.set(key, [_replace(v, fn) if isinstance(v, exp.Expression) else v for v in value])
    return node


def _ident(name: str) -> exp.Column:
    return exp.Column(this=exp.Identifier(this=name, quoted=True))


class AggregationPlanner:
    def __init__(self, source: Source, alias: str, scope: Scope) -> None:
        self.source = source
        self.alias = alias
        self.scope = scope
        self.compiler = ExpressionCompiler(scope)
        self.key_exprs: list[exp.Expression] = []
        self.keys: list[tuple[str, str, t.SqlType | None]] = []
        self.aggregates: list[tuple[str, str]] = []
        self._agg_types: dict[str, t.SqlType | None] = {}
        self._agg_index: dict[str, str] = {}

    def plan(self, query: ast.Query, persistent: bool, sink_name: str | None) -> AggregatePlan:
        where = None
        if query.where is not None:
            where = ExpressionCompiler(self.scope.with_clause("WHERE")).compile(query.where).sql
        for i, expr in enumerate(query.group_by):
            compiled = ExpressionCompiler(self.scope.with_clause("GROUP BY")).compile(expr)
            self.key_exprs.append(expr)
            self.keys.append((f"__K{i}", compiled.sql, compiled.type))
        columns: list[AggregateColumn] = []
        generated = 0
        non_aggregate: list[str] = []
        for item in query.select:
            if item.star:
                raise AnalysisError("SELECT * is not supported with GROUP BY: list the grouping columns and aggregates")
            assert item.expression is not None
            post = self._post_expression(item.expression, non_aggregate)
            compiled = ExpressionCompiler(self._post_scope()).compile(post)
            key_index = self._key_index(item.expression)
            name = item.alias or _implicit_name(item.expression)
            if name is None:
                name = f"KSQL_COL_{generated}"
                generated += 1
            columns.append(AggregateColumn(name, compiled.sql, compiled.type, key_index is not None))
        if non_aggregate:
            raise AnalysisError("Non-aggregate SELECT expression(s) not part of GROUP BY: " + ", ".join(non_aggregate))
        if not self.aggregates and not columns:
            raise AnalysisError("GROUP BY requires aggregate functions in the SELECT list or HAVING")
        having = None
        if query.having is not None:
            bad: list[str] = []
            post = self._post_expression(query.having, bad)
            if bad:
                raise AnalysisError("Non-aggregate HAVING expression not part of GROUP BY: " + ", ".join(bad))
            having = ExpressionCompiler(self._post_scope().with_clause("HAVING")).compile(post).sql
        if persistent:
            self._require_keys(columns, query, sink_name)
        key_cols = sorted([c for c in columns if c.is_key],
                          key=lambda c: self._key_position(c, query))
        value_cols = [c for c in columns if not c.is_key]
        if persistent and not value_cols:
            raise AnalysisError("The projection contains no value columns.")
        return AggregatePlan(self.source, self.alias, where, self.keys, self.aggregates, key_cols + value_cols,
                             having, query.window, query.emit, query.limit)

    def _key_position(self, column: AggregateColumn, query: ast.Query) -> int:
        for i, (name, _, _) in enumerate(self.keys):
            if column.sql == quote(name):
                return i
        return len(self.keys)

    def _key_index(self, expr: exp.Expression) -> int | None:
        for i, k in enumerate(self.key_exprs):
            if expr == k:
                return i
        return None

    def _post_scope(self) -> Scope:
        cols = [ScopeColumn(name, ty, quote(name)) for name, _, ty in self.keys]
        cols += [ScopeColumn(name, self._agg_types.get(name), quote(name)) for name, _ in self.aggregates]
        cols += [ScopeColumn(t.WINDOWSTART, t.BIGINT, quote(t.WINDOWSTART)),
                 ScopeColumn(t.WINDOWEND, t.BIGINT, quote(t.WINDOWEND))]
        return Scope(cols, set())

    def _post_expression(self, expr: exp.Expression, non_aggregate: list[str]) -> exp.Expression:
        """Rewrite ``expr`` over the post-aggregation scope: grouping expressions become ``__Ki``,
        aggregate calls ``__Ai``; any other column reference is an error (collected)."""

        def fn(node: exp.Expression) -> exp.Expression | None:
            idx = self._key_index(node)
            if idx is not None:
                return _ident(f"__K{idx}")
            if isinstance(node, exp.Anonymous) and REGISTRY.is_aggregate(str(node.this)):
                return _ident(self._aggregate(node))
            if isinstance(node, exp.Column) and node.name in (t.WINDOWSTART, t.WINDOWEND) and not node.table:
                return _ident(node.name)
            if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
                non_aggregate.append(node.sql())
                return node
            return None

        return _replace(expr, fn)

    def _aggregate(self, call: exp.Anonymous) -> str:
        compiled = self.compiler.compile(call)
        if compiled.sql in self._agg_index:
            return self._agg_index[compiled.sql]
        name = f"__A{len(self.aggregates)}"
        self.aggregates.append((name, compiled.sql))
        self._agg_types[name] = compiled.type
        self._agg_index[compiled.sql] = name
        return name

    def _require_keys(self, columns: list[AggregateColumn], query: ast.Query, sink_name: str | None) -> None:
        projected = {c.sql for c in columns if c.is_key}
        for (name, _, _), expr in zip(self.keys, self.key_exprs):
            if quote(name) not in projected:
                shown = expr.sql()
                raise AnalysisError(f"The query used to build `{sink_name}` must include the grouping expression "
                                    f"{shown} in its projection (eg, SELECT {shown}...).")


def _implicit_name(node: exp.Expression) -> str | None:
    if isinstance(node, exp.Column):
        return node.name
    if isinstance(node, exp.Dot):
        return node.expression.name
    return None


def build_dataframe(plan: AggregatePlan, source_df: "DataFrame") -> "DataFrame":
    """Stages 1–3 on the source's streaming DataFrame. Output: the plan's columns, then ROWTIME,
    WINDOWSTART/WINDOWEND (windowed plans) and ``__HAVING`` (false: the row must be removed)."""
    from pyspark.sql import functions as F

    df = source_df.where("NOT __TOMBSTONE")
    if plan.where:
        df = df.where(plan.where)
    pre = [f"{sql} AS {quote(name)}" for name, sql, _ in plan.keys]
    pre += ["*"]
    df = df.selectExpr(*pre)
    for name, _, _ in plan.keys:
        df = df.where(F.col(quote(name)).isNotNull())
    group_cols = [F.col(quote(name)) for name, _, _ in plan.keys]
    if plan.window is not None:
        df = df.withColumn(EVENT_TIME, F.expr(f"timestamp_millis({t.ROWTIME})"))
        df = df.withWatermark(EVENT_TIME, f"{plan.grace_ms} milliseconds")
        w = plan.window
        if w.type == "SESSION":
            window = F.session_window(EVENT_TIME, f"{w.size_ms} milliseconds")
        elif w.type == "HOPPING":
            window = F.window(EVENT_TIME, f"{w.size_ms} milliseconds", f"{w.advance_ms} milliseconds")
        else:
            window = F.window(EVENT_TIME, f"{w.size_ms} milliseconds")
        group_cols = [window.alias(WINDOW_COL)] + group_cols
    aggs = [F.expr(sql).alias(name) for name, sql in plan.aggregates]
    aggs.append(F.max(t.ROWTIME).alias("__MAX_ROWTIME"))
    df = df.groupBy(*group_cols).agg(*aggs)
    if plan.window is not None:
        df = (df.withColumn(t.WINDOWSTART, F.expr(f"unix_millis({WINDOW_COL}.start)"))
                .withColumn(t.WINDOWEND, F.expr(f"unix_millis({WINDOW_COL}.end)")))
    else:
        df = df.withColumn(t.WINDOWSTART, F.lit(None).cast("bigint")).withColumn(t.WINDOWEND, F.lit(None).cast("bigint"))
    out = [f"{c.sql} AS {quote(c.name)}" for c in plan.columns]
    out += [f"__MAX_ROWTIME AS {t.ROWTIME}", f"{t.WINDOWSTART} AS __WINDOWSTART", f"{t.WINDOWEND} AS __WINDOWEND"]
    out.append(f"coalesce({plan.having}, false) AS __HAVING" if plan.having else "true AS __HAVING")
    return df.selectExpr(*out)
