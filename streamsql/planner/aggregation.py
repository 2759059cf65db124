"""Plan GROUP BY queries: stream and table aggregations, windowed or not.

ksqlDB's shape is ``SELECT <keys and expressions over aggregates> FROM s [WINDOW w] [WHERE p]
GROUP BY k1, k2 [HAVING h]``. The plan has three stages:

1. pre-aggregation, a stateless Spark stage over the source's columns: the WHERE filter, the
   grouping expressions (``__K0, __K1, ...``) and the aggregate calls' column arguments
   (``__A0_0, ...``), plus ROWTIME/ROWPARTITION/ROWOFFSET (and, over a table, its key columns and
   whether the row still matches, so the processor can retract the row's old value);
2. the aggregation itself, in one of two stateful operators the physical layer chooses
   (``streamsql.physical.steps.physical_plan``): Spark's own ``groupBy().agg()`` for the shapes
   it computes exactly as ksqlDB (``streamsql.physical.spark_aggregate``), else record by record
   in ``streamsql.physical.aggregator`` (run inside Spark's executors by
   ``streamsql.physical.aggregate``) with the accumulators of ``streamsql.functions.aggregates``
   (the one place aggregate functions live): one update per input record, retractions, windows
   against stream time, EMIT FINAL;
3. post-aggregation, over ``__K*``, ``__A*``, WINDOWSTART/WINDOWEND: the projection and HAVING
   (Spark SQL text, evaluated in the executors after the stateful step).

Why Spark's streaming aggregation is not enough for every shape: it cannot retract a table
row's old value, rejects EMIT CHANGES on session windows, has no tombstone for a row leaving
HAVING and no Python aggregate functions (docs/differences.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from streamsql import types as t
from streamsql.catalog import Source
from streamsql.errors import AnalysisError
from streamsql.formats.features import features
from streamsql.functions.aggregates import BoundAggregate
from streamsql.functions.registry import FunctionRegistry, rejected_types
from streamsql.planner.expressions import ExpressionCompiler, FieldAliases, Scope, ScopeColumn, generated_name, quote
from streamsql.sql import ast
from streamsql.sql.dialect import to_ksql

if TYPE_CHECKING:
    pass

#: ksqlDB's grace period when a window declares none (ksql 0.x: 24 hours).
DEFAULT_GRACE_MS = 24 * 60 * 60 * 1000
#: the second line of ksqlDB's message for a SELECT expression that is neither grouped nor aggregated
NON_AGGREGATE_HINT = "\nEither add the column(s) to the GROUP BY or remove them from the SELECT."
#: pre-aggregation columns the processor reads besides keys and arguments
MATCH_COL = "__MATCH"  # over a table: the row exists and passes WHERE (else only its old value is retracted)
SOURCE_KEY_PREFIX = "__SK"


@dataclass
class AggregateColumn:
    name: str
    sql: str  # over the post-aggregation scope
    type: t.SqlType | None
    is_key: bool


@dataclass
class AggregateCall:
    """One distinct aggregate call: ``name`` (``__Ai``) in the post scope, its bound function and
    the pre-aggregation columns holding its column arguments."""

    name: str
    function: BoundAggregate
    arg_columns: list[str]
    text: str
    #: the call as written (``SUM(VALUE)``), for error messages about the post-aggregation scope
    shown: str = ""


@dataclass
class AggregatePlan:
    source: Source
    alias: str
    where: str | None
    keys: list[tuple[str, str, t.SqlType | None]]  # (internal name, pre-agg SQL, type)
    calls: list[AggregateCall]
    arguments: list[tuple[str, str]]  # (pre-agg column, Spark SQL over the source)
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
    def over_table(self) -> bool:
        return self.source.is_table

    @property
    def source_key_columns(self) -> list[str]:
        return [f"{SOURCE_KEY_PREFIX}{i}" for i in range(len(self.source.key_columns))] if self.over_table else []

    @property
    def output_mode(self) -> str:
        return "append"  # the pre-aggregation stage is stateless; the processor emits the updates

    @property
    def grace_ms(self) -> int:
        if self.window is None:
            return 0
        if self.window.grace_ms is not None:
            return self.window.grace_ms
        # ksqlDB's EMIT FINAL (Kafka Streams' emit-on-window-close) closes a window at its end when
        # no grace is given; EMIT CHANGES keeps the 24-hour default
        return 0 if self.emit == "FINAL" else DEFAULT_GRACE_MS

    @property
    def retention_ms(self) -> int:
        """How long a window's state is kept after its start (Kafka Streams' window store):
        RETENTION if given, else size + grace."""
        if self.window is None:
            return 0
        if self.window.retention_ms is not None:
            return self.window.retention_ms
        return self.window.size_ms + self.grace_ms

    def explain(self) -> str:
        lines = [f"SOURCE {self.source.kind} {self.source.name} (topic {self.source.topic})"]
        if self.where:
            lines.append(f"  FILTER {self.where}")
        lines.append("  GROUP BY " + ", ".join(f"{sql} AS {name}" for name, sql, _ in self.keys))
        if self.window:
            w = self.window
            lines.append(f"  WINDOW {w.type} size={w.size_ms}ms advance={w.advance_ms} grace={self.grace_ms}ms")
        lines.append("  AGGREGATE " + ", ".join(f"{c.text} AS {c.name}" for c in self.calls))
        if self.over_table:
            lines.append("  RETRACT the old value of each changed source row")
        if self.having:
            lines.append(f"  HAVING {self.having}")
        lines.append("  PROJECT " + ", ".join(f"{c.sql} AS {c.name}{' KEY' if c.is_key else ''}" for c in self.columns))
        lines.append(f"  EMIT {self.emit or 'CHANGES'} (one update per input record)")
        return "\n".join(lines)


def _replace(node: exp.Expr, fn: Callable[[exp.Expr], exp.Expr | None]) -> exp.Expr:
    """Pre-order replacement: ``fn`` returns a replacement (not descended into) or None."""
    replacement = fn(node)
    if replacement is not None:
        return replacement
    # One copy, then a loop in the same pre-order: an ``a + b + ...`` chain is a tree as deep as
    # it is long, so neither a copy per level nor a frame per level (issue #52).
    root = node.copy()
    pending: list[tuple[exp.Expr, str, int | None, exp.Expr]] = []

    def push_children(parent: exp.Expr) -> None:
        children: list[tuple[exp.Expr, str, int | None, exp.Expr]] = []
        for key, value in parent.args.items():
            if isinstance(value, exp.Expression):
                children.append((parent, key, None, value))
            elif isinstance(value, list):
                children += [(parent, key, i, v) for i, v in enumerate(value) if isinstance(v, exp.Expression)]
        pending.extend(reversed(children))

    push_children(root)
    while pending:
        parent, key, index, child = pending.pop()
        replacement = fn(child)
        if replacement is None:
            push_children(child)
        elif replacement is not child:
            parent.set(key, replacement, index=index)
    return root


def _ident(name: str) -> exp.Column:
    return exp.Column(this=exp.Identifier(this=name, quoted=True))


def _literal_value(node: exp.Expr) -> Any:
    """The Python value of a literal aggregate parameter (TOPK's k, ignoreNulls, ...)."""
    if isinstance(node, exp.Paren):
        return _literal_value(node.this)
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Neg):
        return -_literal_value(node.this)
    if isinstance(node, exp.Literal) and not node.is_string:
        text = node.this
        return int(text) if text.lstrip("-").isdigit() else float(text)
    if isinstance(node, exp.Literal):
        return node.this
    raise AnalysisError(f"Aggregate parameter {node.sql()} must be a literal")


class AggregationPlanner:
    def __init__(self, source: Source, alias: str, scope: Scope, functions: FunctionRegistry) -> None:
        self.source = source
        self.alias = alias
        self.scope = scope
        self.functions = functions
        self.compiler = ExpressionCompiler(scope, functions)
        self.key_exprs: list[exp.Expr] = []
        self.keys: list[tuple[str, str, t.SqlType | None]] = []
        self.calls: list[AggregateCall] = []
        self.arguments: list[tuple[str, str]] = []
        self._call_index: dict[str, str] = {}

    def _is_aggregate_call(self, node: exp.Expr) -> bool:
        return isinstance(node, exp.Anonymous) and self.functions.aggregate(str(node.this)) is not None

    def plan(self, query: ast.Query, persistent: bool, sink_name: str | None) -> AggregatePlan:
        where = None
        if query.where is not None:
            where = ExpressionCompiler(self.scope.with_clause("WHERE"), self.functions).compile(query.where).sql
        if not features(self.source.value_format).joins_and_groups:
            raise AnalysisError(f"Source(s) {self.source.name} are using the '{self.source.value_format.upper()}' "
                                f"value format. This format does not yet support GROUP BY.")
        if query.window is not None and self.source.is_table:
            raise AnalysisError("Windowed aggregations are not supported on tables: use a stream as the source")
        if query.window is None:  # a non-windowed result has no window bounds to name a column after
            for item in query.select:
                if (item.alias is None and isinstance(item.expression, exp.Column)
                        and item.expression.name.upper() in (t.WINDOWSTART, t.WINDOWEND)):
                    raise AnalysisError(f"Reserved column name in select: `{item.expression.name.upper()}`. "
                                        f"Please remove or alias the column.")
        for expr in query.group_by:
            _reject_window_bounds(expr)
            for call in expr.find_all(exp.Anonymous):
                if self._is_aggregate_call(call):
                    raise AnalysisError(f"GROUP BY does not support aggregate functions: {str(call.this).upper()} "
                                        f"is an aggregate function.")
        if query.having is not None:
            _reject_window_bounds(query.having)
        for i, expr in enumerate(query.group_by):
            compiled = ExpressionCompiler(self.scope.with_clause("GROUP BY"), self.functions).compile(expr)
            if any(sql == compiled.sql for _name, sql, _ty in self.keys):
                raise AnalysisError(f"Duplicate GROUP BY expression: {to_ksql(expr).upper()}")
            self.key_exprs.append(expr)
            self.keys.append((f"__K{i}", compiled.sql, compiled.type))
        columns: list[AggregateColumn] = []
        generated = 0
        fields = FieldAliases(c.name for c in self.source.columns)
        non_aggregate: list[str] = []
        for item in self._expand_star(query.select):
            assert item.expression is not None
            missing: list[str] = []
            post = self._post_expression(item.expression, missing)
            if missing:  # ksqlDB names the whole SELECT expression (reported after the aggregate check)
                non_aggregate.append(_shown_expression(item.expression))
                continue
            compiled = ExpressionCompiler(self._post_scope(), self.functions).compile(post)
            key_index = self._key_index(item.expression)
            name = item.alias or (fields.name(item.expression.expression.name) if isinstance(item.expression, exp.Dot)
                                  else _implicit_name(item.expression))
            if name is None:
                name, generated = generated_name(generated, {c.name for c in self.source.columns})
            columns.append(AggregateColumn(name, compiled.sql, compiled.type, key_index is not None))
        having = None
        bad: list[str] = []
        if query.having is not None:
            post = self._post_expression(query.having, bad)
        if not self.calls:
            _reject_unknown_functions([i.expression for i in query.select] + [query.having], self.functions)
            raise AnalysisError("GROUP BY requires aggregate functions in either the SELECT or HAVING clause.")
        if non_aggregate:
            raise AnalysisError("Non-aggregate SELECT expression(s) not part of GROUP BY: " + ", ".join(non_aggregate)
                                + NON_AGGREGATE_HINT)
        if query.having is not None:
            if bad:
                raise AnalysisError("Non-aggregate HAVING expression not part of GROUP BY: " + ", ".join(bad))
            try:
                having = ExpressionCompiler(self._post_scope().with_clause("HAVING"), self.functions).compile(post).sql
            except AnalysisError as e:
                raise AnalysisError(self._unrewritten(str(e))) from None
        if self.source.is_table:
            names = list(dict.fromkeys(c.function.name for c in self.calls if not c.function.undoable))
            if names:
                shown = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
                raise AnalysisError(f"The aggregation function{'s' if len(names) > 1 else ''} {shown} cannot be "
                                    f"applied to a table source, only to a stream source.")
        if persistent:
            self._require_keys(columns, query, sink_name)
        key_cols = sorted([c for c in columns if c.is_key],
                          key=lambda c: self._key_position(c, query))
        value_cols = [c for c in columns if not c.is_key]
        if persistent and not value_cols:
            raise AnalysisError("The projection contains no value columns.")
        return AggregatePlan(self.source, self.alias, where, self.keys, self.calls, self.arguments,
                             key_cols + value_cols, having, query.window, query.emit, query.limit)

    def _expand_star(self, select: list[ast.SelectItem]) -> list[ast.SelectItem]:
        """``SELECT *, COUNT(*) ... GROUP BY <every column>``: the star stands for the source's
        columns (each must then be a grouping expression, as in ksqlDB)."""
        out: list[ast.SelectItem] = []
        for item in select:
            if not item.star:
                out.append(item)
                continue
            if item.expression is not None:
                raise AnalysisError("SELECT s.* / struct->* is not supported with GROUP BY: list the columns")
            for c in self.source.columns:
                if c.role in ("key", "value"):
                    out.append(ast.SelectItem(exp.Column(this=exp.Identifier(this=c.name, quoted=False))))
        return out

    def _key_position(self, column: AggregateColumn, query: ast.Query) -> int:
        for i, (name, _, _) in enumerate(self.keys):
            if column.sql == quote(name):
                return i
        return len(self.keys)

    def _key_index(self, expr: exp.Expr) -> int | None:
        for i, k in enumerate(self.key_exprs):
            if expr == k:
                return i
        return None

    def _post_scope(self) -> Scope:
        cols = [ScopeColumn(name, ty, quote(name)) for name, _, ty in self.keys]
        cols += [ScopeColumn(c.name, c.function.result_type, quote(c.name)) for c in self.calls]
        cols += [ScopeColumn(t.WINDOWSTART, t.BIGINT, quote(t.WINDOWSTART)),
                 ScopeColumn(t.WINDOWEND, t.BIGINT, quote(t.WINDOWEND))]
        return Scope(cols, set())

    def _post_expression(self, expr: exp.Expr, non_aggregate: list[str]) -> exp.Expr:
        """Rewrite ``expr`` over the post-aggregation scope: grouping expressions become ``__Ki``,
        aggregate calls ``__Ai``; any other column reference is an error (collected)."""

        def fn(node: exp.Expr) -> exp.Expr | None:
            idx = self._key_index(node)
            if idx is not None:
                return _ident(f"__K{idx}")
            if self._is_aggregate_call(node):
                return _ident(self._aggregate(node))  # type: ignore[arg-type]
            if isinstance(node, exp.Column) and node.name.upper() in (t.WINDOWSTART, t.WINDOWEND) \
                    and (not node.table or node.table.upper() in (self.alias.upper(), self.source.name.upper())):
                return _ident(node.name.upper())
            if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
                non_aggregate.append(node.sql())
                return node
            return None

        return _replace(expr, fn)

    def _aggregate(self, call: exp.Anonymous) -> str:
        """Bind one aggregate call (the single dispatch point: the registry's ``aggregate``)."""
        fn = self.functions.aggregate(str(call.this))
        assert fn is not None
        args = [a for a in call.expressions if not isinstance(a, exp.Star)]
        if len(args) < fn.min_args or len(args) > fn.max_args:
            raise rejected_types(fn.name, [self._shown(a) for a in args])
        n_columns = fn.columns(len(args))
        for a in args:
            _reject_window_bounds(a)
        compiled = []
        for a in args[:n_columns]:
            if self._is_aggregate_call(a):
                raise AnalysisError(f"Aggregate functions can not be nested: {call.sql()}")
            compiled.append(self.compiler.compile(a))
        params = []
        for position, a in enumerate(args[n_columns:], start=n_columns + 1):
            try:
                params.append(_literal_value(a))
            except AnalysisError:
                raise AnalysisError(f"Parameter {position} passed to function {fn.name.upper()} must be a literal "
                                    f"constant, but was expression: '{_shown_expression(a)}'") from None
        text = f"{fn.name}({', '.join(c.sql for c in compiled)}{''.join(', ' + repr(p) for p in params)})"
        if text in self._call_index:
            return self._call_index[text]
        bound = fn.bind([c.type for c in compiled], params)
        name = f"__A{len(self.calls)}"
        arg_columns = []
        for j, c in enumerate(compiled):
            col = f"{name}_{j}"
            self.arguments.append((col, c.sql))
            arg_columns.append(col)
        self.calls.append(AggregateCall(name, bound, arg_columns, text, call.sql()))
        self._call_index[text] = name
        return name

    def _unrewritten(self, message: str) -> str:
        """``message`` with the post-scope names of aggregate calls (``"__A0"``) replaced by the
        calls as written, as ksqlDB's HAVING errors show them (``SUM(VALUE)``)."""
        for call in reversed(self.calls):  # __A10 before __A1
            message = message.replace(f'"{call.name}"', call.shown).replace(f"`{call.name}`", call.shown)
            message = message.replace(call.name, call.shown)
        return message

    def _shown(self, node: exp.Expr) -> str:
        try:
            ty = self.compiler.compile(node).type
        except AnalysisError:
            return "null"
        return "null" if ty is None else str(ty)

    def _require_keys(self, columns: list[AggregateColumn], query: ast.Query, sink_name: str | None) -> None:
        projected = {c.sql for c in columns if c.is_key}
        for (name, _, _), expr in zip(self.keys, self.key_exprs):
            if quote(name) not in projected:
                shown = expr.sql()
                raise AnalysisError(f"The query used to build `{sink_name}` must include the grouping expression "
                                    f"{shown} in its projection (eg, SELECT {shown}...).")


def _shown_expression(node: exp.Expr) -> str:
    """An expression as ksqlDB prints it in errors: binary operations in parentheses."""
    text = node.sql()
    return f"({text})" if isinstance(node, exp.Binary) else text


def _reject_unknown_functions(expressions: list[exp.Expr | None], functions: FunctionRegistry) -> None:
    """An unknown function is the error to report (as ksqlDB does), not the absence of
    aggregates it leads to: ``SELECT WONT_FIND_ME(id) ... GROUP BY``."""
    from streamsql.functions.registry import unknown_function

    for expr in expressions:
        for node in expr.find_all(exp.Anonymous) if expr is not None else ():
            if functions.get(str(node.this)) is None:
                raise unknown_function(str(node.this).upper(), node)


def _reject_window_bounds(expr: exp.Expr) -> None:
    """ksqlDB allows WINDOWSTART/WINDOWEND only in the SELECT list, outside aggregate calls."""
    for col in expr.find_all(exp.Column):
        if col.name.upper() in (t.WINDOWSTART, t.WINDOWEND):
            raise AnalysisError(f"Window bounds column {col.name.upper()} can only be used in the SELECT clause of "
                                f"windowed aggregations and can not be passed to aggregate functions.")


def _implicit_name(node: exp.Expr) -> str | None:
    if isinstance(node, exp.Column):
        return node.name
    if isinstance(node, exp.Dot):
        return node.expression.name
    return None


def post_schema(plan: AggregatePlan) -> Any:
    """The Spark schema of the processor's output rows (the post-aggregation scope)."""
    from pyspark.sql import types as st

    fields = [st.StructField(name, t.to_spark(ty) if ty is not None else st.StringType()) for name, _, ty in plan.keys]
    fields += [st.StructField(c.name, t.to_spark(c.function.result_type) if c.function.result_type is not None
                              else st.StringType()) for c in plan.calls]
    fields += [st.StructField(t.WINDOWSTART, st.LongType()), st.StructField(t.WINDOWEND, st.LongType()),
               st.StructField(t.ROWTIME, st.LongType())]
    return st.StructType(fields)


def post_select(plan: AggregatePlan) -> list[str]:
    out = [f"{c.sql} AS {quote(c.name)}" for c in plan.columns]
    out += [t.ROWTIME, t.WINDOWSTART, t.WINDOWEND]
    out.append(f"coalesce({plan.having}, false) AS __HAVING" if plan.having else "true AS __HAVING")
    return out
