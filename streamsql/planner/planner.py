"""Plan a query: resolve it against the catalog into a :class:`QueryPlan`.

The plan is the analysed form (what ksqlDB calls the logical plan): where rows come from, the
filter, the key and value columns produced, each as Spark SQL text over the source's columns.
Building the DataFrame from it is mechanical (``physical/``: its steps, and the one builder that
applies them to Spark), so EXPLAIN can show the plan and tests can check it without a
SparkSession.

Every source row carries, besides its declared columns, ROWTIME/ROWPARTITION/ROWOFFSET and two
internal columns: ``__HEADERS`` (the record's headers, propagated to the output record) and
``__TOMBSTONE`` (the value was null). ksqlDB passes a null-valued stream record through a
projection as a null value; a WHERE clause drops it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlglot import exp

from streamsql import types as t
from streamsql.catalog import Catalog, Source
from streamsql.errors import AnalysisError
from streamsql.functions import table_functions as tf
from streamsql.functions.registry import FunctionRegistry
from streamsql.planner import pushdown
from streamsql.planner.aggregation import NON_AGGREGATE_HINT, AggregatePlan, AggregationPlanner
from streamsql.planner.expressions import (
    Compiled,
    ExpressionCompiler,
    FieldAliases,
    Scope,
    ScopeColumn,
    generated_name,
    quote,
)
from streamsql.planner.joins import JoinedSource, plan_join, side_source_columns
from streamsql.sql import ast

if TYPE_CHECKING:
    pass

RESERVED_OUTPUT_NAMES = {t.ROWTIME, t.ROWPARTITION, t.ROWOFFSET, t.WINDOWSTART, t.WINDOWEND}


@dataclass
class OutputColumn:
    name: str
    sql: str
    type: t.SqlType | None
    is_key: bool = False


@dataclass
class QueryPlan:
    """An analysed, stateless stream query (filter / projection / re-key)."""

    source: Source
    alias: str
    where: str | None
    columns: list[OutputColumn]
    rowtime_sql: str = t.ROWTIME
    repartitioned: bool = False
    limit: int | None = None
    emit: str | None = "CHANGES"
    notes: list[str] = field(default_factory=list)
    #: arrays of the SELECT's table functions (EXPLODE ...), see functions/table_functions.py
    table_functions: list[str] = field(default_factory=list)
    #: the new key columns (by their Spark SQL) whose PARTITION BY expression reads more than the
    #: old key (a value column, ROWTIME): ksqlDB evaluates those on the record's value, so a
    #: null-valued record gets null there (one of key columns only is evaluated on the key)
    keys_from_value: frozenset[str] = frozenset()
    #: the WHERE conjuncts the source's reader applies to each decoded batch before Spark
    #: (``planner/pushdown.py``; JSON), None when nothing is pushed
    source_filter: str | None = None
    #: the whole WHERE as that JSON tree when the reader evaluates all of it exactly as Spark
    #: (``pushdown.exact_filter``), None otherwise or without a WHERE
    exact_filter: str | None = None
    #: the WHERE as the statement wrote it, for EXPLAIN and the topology (``where`` is Spark's)
    where_text: str | None = None

    @property
    def key_columns(self) -> list[OutputColumn]:
        return [c for c in self.columns if c.is_key]

    @property
    def value_columns(self) -> list[OutputColumn]:
        return [c for c in self.columns if not c.is_key]

    def explain(self) -> str:
        lines = [f"SOURCE {self.source.kind} {self.source.name} (topic {self.source.topic}, "
                 f"key {self.source.key_format}, value {self.source.value_format})"]
        if isinstance(self.source, JoinedSource) and self.source.join is not None:
            lines[0] = f"SOURCE {self.source.join.describe()}"
        if self.where:
            lines.append(f"  FILTER {self.where}")
        if self.table_functions:
            lines.append("  FLATMAP " + ", ".join(self.table_functions))
        if self.repartitioned:
            lines.append("  REPARTITION BY " + ", ".join(c.sql for c in self.key_columns))
        lines.append("  PROJECT " + ", ".join(
            f"{c.sql} AS {c.name}{' KEY' if c.is_key else ''}" for c in self.columns))
        lines.append(f"  ROWTIME {self.rowtime_sql}")
        if self.limit is not None:
            lines.append(f"  LIMIT {self.limit}")
        return "\n".join(lines)


def source_columns(source: Source) -> list[t.Column]:
    """Declared columns, with WINDOWSTART/WINDOWEND after the key of a windowed source (ksqlDB
    shows window bounds as key columns)."""
    if not source.window_type:
        return list(source.columns)
    keys = [c for c in source.columns if c.is_key]
    bounds = [t.Column(t.WINDOWSTART, t.BIGINT, "key"), t.Column(t.WINDOWEND, t.BIGINT, "key")]
    return keys + bounds + [c for c in source.columns if not c.is_key]


def source_scope(source: Source, alias: str) -> Scope:
    """The columns a query over ``source`` can reference: declared columns and pseudo columns."""
    cols = [ScopeColumn(c.name, c.type, quote(c.name), alias) for c in source_columns(source)]
    cols += [ScopeColumn(name, ty, quote(name), alias) for name, ty in t.PSEUDO_COLUMNS.items()]
    return Scope(cols, {alias, source.name})


class Planner:
    """A query's analysis against ``catalog``'s sources and ``functions``, the registry of the
    engine whose statements it plans (built-in and that engine's Python functions)."""

    def __init__(self, catalog: Catalog, functions: FunctionRegistry) -> None:
        self.catalog = catalog
        self.functions = functions

    # --- analysis ------------------------------------------------------------------------------

    def plan_query(self, query: ast.Query, persistent: bool, sink_name: str | None = None) -> QueryPlan | AggregatePlan:
        source: Source | JoinedSource
        if query.joins:
            source, scope = plan_join(self.catalog, query, self.functions)
            alias = source.name
        else:
            source = self.catalog.get(query.source.name)
            alias = query.source.alias or source.name
            scope = source_scope(source, alias)
        self._reject_unsupported(query, source)
        _reject_reserved_aliases(query)
        if query.group_by or self._has_aggregates(query):
            if tf.uses_table_functions(query, self.functions):
                raise AnalysisError(tf.WITH_AGGREGATION)
            if not query.group_by:
                bare = [e.sql() for item in query.select if item.expression is not None
                        for e in [item.expression] if isinstance(e, exp.Column)]
                if bare:
                    raise AnalysisError("Non-aggregate SELECT expression(s) not part of GROUP BY: " + ", ".join(bare)
                                      + NON_AGGREGATE_HINT)
                if persistent:
                    raise AnalysisError("Not supported yet: aggregate functions without GROUP BY "
                                        "in a persistent query (GROUP BY a column)")
                # a push query folds the whole stream into one group (ksqlDB), keyed by a constant
                # that is not in the projection
                query = dataclasses.replace(query, group_by=[exp.Literal.number(1)])
            return AggregationPlanner(source, alias, scope, self.functions).plan(query, persistent, sink_name)
        if query.window is not None:
            raise AnalysisError("WINDOW clause requires a GROUP BY clause.")
        if query.having is not None:
            raise AnalysisError("HAVING clause requires a GROUP BY clause.")

        where = None
        if query.where is not None:
            compiled = ExpressionCompiler(scope.with_clause("WHERE"), self.functions).compile(query.where)
            if compiled.type is not None and compiled.type != t.BOOLEAN:
                raise AnalysisError(f"Type error in WHERE expression: Should evaluate to boolean but is "
                                    f"{query.where.sql()} ({compiled.type}) instead.")
            where = compiled.sql

        generators = tf.TableFunctionCollector(tf.WITH_TABLE_SOURCE if source.is_table else None)
        columns = self._projection(query, source, alias, scope.with_clause("SELECT"), generators, persistent)
        repartitioned = False
        if isinstance(source, JoinedSource) and source.join is not None and not query.partition_by:
            columns = self._join_key(source, columns, persistent, sink_name)
        elif query.partition_by:
            columns = self._apply_partition_by(query, columns, scope, sink_name)
            repartitioned = True
        elif persistent:
            self._require_keys_projected(source, query, columns, sink_name)

        if persistent:
            computed = {item.alias for item in query.select
                        if item.alias and not isinstance(item.expression, exp.Column)}
            self._check_key_projected_once(columns, computed)
            for c in columns:
                if c.name in RESERVED_OUTPUT_NAMES and not (repartitioned and c.is_key and c.sql == quote(c.name)):
                    raise AnalysisError(f"Reserved column name in select: `{c.name}`. "
                                        f"Please remove or alias the column.")
            if not any(not c.is_key for c in columns):
                raise AnalysisError("The projection contains no value columns.")
        self._check_duplicates(columns)
        return QueryPlan(source, alias, where, columns, repartitioned=repartitioned,
                         limit=query.limit, emit=query.emit, table_functions=generators.arrays,
                         keys_from_value=self._keys_from_value(query, source, scope) if repartitioned else frozenset(),
                         source_filter=self._source_filter(query, source, scope),
                         exact_filter=self._source_filter(query, source, scope, exact=True),
                         where_text=query.where.sql() if query.where is not None else None)

    @staticmethod
    def _source_filter(query: ast.Query, source: Source | JoinedSource, scope: Scope, exact: bool = False
                       ) -> str | None:
        """What of the WHERE a stream's reader can apply (``planner/pushdown.py``): streams read
        alone only (a table's reader must pass every change; a join filters after it), and not
        over a text TIMESTAMP column, whose rows get their time in Spark after the reader.
        ``exact``: all of the WHERE, or None (``pushdown.exact_filter``)."""
        if isinstance(source, JoinedSource) or source.is_table:
            return None
        time_column = source.column(source.timestamp_column or "")
        if time_column is not None and time_column.type.kind is t.Kind.STRING:
            return None
        pushed = pushdown.exact_filter if exact else pushdown.source_filter
        return pushed(query.where, scope.with_clause("WHERE"), list(source.columns))

    @staticmethod
    def _reject_unsupported(query: ast.Query, source: Source) -> None:
        if query.partition_by and source.is_table:
            raise AnalysisError(f"Cannot repartition a TABLE source. If this is a join, make sure that the "
                                f"criteria uses the TABLE's key column "
                                f"{', '.join(c.name for c in source.key_columns)} instead "
                                f"of {', '.join(e.sql() for e in query.partition_by)}")

    def _has_aggregates(self, query: ast.Query) -> bool:
        for item in query.select:
            if item.expression is not None:
                for call in item.expression.find_all(exp.Anonymous):
                    if self.functions.is_aggregate(str(call.this)):
                        return True
        return False

    def _projection(self, query: ast.Query, source: Source, alias: str, scope: Scope,
                    table_functions: tf.TableFunctionCollector | None = None,
                    persistent: bool = False) -> list[OutputColumn]:
        compiler = ExpressionCompiler(scope, self.functions)
        compiler.table_functions = table_functions
        out: list[OutputColumn] = []
        generated = 0
        key_refs = {quote(c.name) for c in source.key_columns}
        fields = FieldAliases(c.name for c in source.columns)
        for item in query.select:
            if item.star:
                out.extend(self._expand_star(item, source, alias, compiler, persistent))
                continue
            assert item.expression is not None
            self._reject_aggregates(item.expression)
            if isinstance(item.expression, exp.Null):
                raise AnalysisError("Can't infer a type of null. Please explicitly cast it to a required type, "
                                    "e.g. CAST(null AS VARCHAR).")
            compiled = compiler.compile(item.expression)
            name = item.alias or (fields.name(item.expression.expression.name) if isinstance(item.expression, exp.Dot)
                                  else self._implicit_name(item.expression))
            if (item.alias is None and isinstance(source, JoinedSource) and source.join is not None
                    and isinstance(item.expression, exp.Column) and item.expression.table):
                name = source.join.output_name(item.expression.table.upper(), item.expression.name)
            if name is None:
                name, generated = generated_name(generated, {c.name for c in source.columns})
            is_key = (isinstance(item.expression, exp.Column) and compiled.sql in key_refs
                      and not isinstance(item.expression.this, exp.Star))
            out.append(OutputColumn(name, compiled.sql, compiled.type, is_key))
        return out

    @staticmethod
    def _implicit_name(node: exp.Expr) -> str | None:
        if isinstance(node, exp.Column):
            return node.name
        if isinstance(node, exp.Dot):
            return node.expression.name
        return None

    def _expand_star(self, item: ast.SelectItem, source: Source, alias: str,
                     compiler: ExpressionCompiler, persistent: bool = False) -> list[OutputColumn]:
        node = item.expression
        if node is None or (isinstance(node, exp.Column) and isinstance(node.this, exp.Star)):
            qualifier = node.table if node is not None else None
            if isinstance(source, JoinedSource) and source.join is not None:
                return self._expand_join_star(source, qualifier.upper() if qualifier else None)
            if qualifier and qualifier not in (alias, source.name):
                raise AnalysisError(f"'{qualifier}' is not a valid stream/table name or alias.")
            columns = source_columns(source)
            if persistent:  # a persistent query's sink is windowed itself: the bounds stay in its key
                columns = [c for c in columns if c.name not in (t.WINDOWSTART, t.WINDOWEND)]
            return [OutputColumn(c.name, quote(c.name), c.type, c.is_key) for c in columns]
        struct = compiler.compile(node)  # col->*
        if not isinstance(struct.type, t.Struct):
            raise AnalysisError(f"Expected STRUCT type for '{node.sql()}->*', got {struct.type}")
        return [OutputColumn(f.name, f"({struct.sql}).{quote(f.name)}", f.type) for f in struct.type.fields]

    @staticmethod
    def _expand_join_star(source: JoinedSource, qualifier: str | None) -> list[OutputColumn]:
        """``*`` over a join: every column of both sides (key first); ``alias.*``: one side's."""
        assert source.join is not None
        sides = source.join.leaves()
        if qualifier is not None:
            sides = [s for s in sides if qualifier in (s.alias, s.source.name)]
            if not sides:
                raise AnalysisError(f"'{qualifier}' is not a valid stream/table name or alias.")
        names = {s.column_name(c.name) for s in sides for c in side_source_columns(s.source)}
        if qualifier is None and source.join.synthetic_key is not None:
            names.add(source.join.synthetic_name)
        return [OutputColumn(c.name, quote(c.name), c.type, c.is_key) for c in source.columns if c.name in names]

    def _reject_aggregates(self, node: exp.Expr) -> None:
        for call in node.find_all(exp.Anonymous):
            if self.functions.is_aggregate(str(call.this)):
                raise AnalysisError(f"Use of aggregate function {str(call.this).upper()} requires a GROUP BY clause.")

    def _apply_partition_by(self, query: ast.Query, columns: list[OutputColumn], scope: Scope,
                            sink_name: str | None) -> list[OutputColumn]:
        """PARTITION BY makes its expressions the key; the projection must include them."""
        if len(query.partition_by) == 1 and isinstance(query.partition_by[0], exp.Null):
            return [OutputColumn(c.name, c.sql, c.type, False) for c in columns]
        compiler = ExpressionCompiler(scope.with_clause("PARTITION BY"), self.functions)
        keys = [compiler.compile(e) for e in query.partition_by]
        key_sql = {k.sql for k in keys}
        if len(query.select) == 1 and query.select[0].star and query.select[0].expression is None:
            return self._repartitioned_star(query, columns, keys)
        result = [OutputColumn(c.name, c.sql, c.type, c.sql in key_sql) for c in columns]
        projected = {c.sql for c in result if c.is_key}
        missing = [e.sql() for e, k in zip(query.partition_by, keys) if k.sql not in projected]
        if missing and sink_name is not None:
            raise AnalysisError(f"The query used to build `{sink_name}` must include the partitioning "
                                f"expression {', '.join(missing)} in its projection (eg, SELECT {missing[0]}...).")
        order = {k.sql: i for i, k in enumerate(keys)}
        result.sort(key=lambda c: (not c.is_key, order.get(c.sql, 0) if c.is_key else 0))
        return result

    def _keys_from_value(self, query: ast.Query, source: Source, scope: Scope) -> frozenset[str]:
        """The Spark SQL of the PARTITION BY expressions that read a column besides the key."""
        key_names = {c.name for c in source.key_columns}
        compiler = ExpressionCompiler(scope.with_clause("PARTITION BY"), self.functions)
        return frozenset(compiler.compile(e).sql for e in query.partition_by
                         if any(col.name not in key_names for col in e.find_all(exp.Column)))

    @staticmethod
    def _repartitioned_star(query: ast.Query, columns: list[OutputColumn],
                            keys: list[Compiled]) -> list[OutputColumn]:
        """``SELECT * … PARTITION BY``: the columns of the repartitioned stream, as ksqlDB's
        PARTITION BY step builds them: the new key columns (a column keeps its name, a struct
        field takes the field's, any other expression a ``KSQL_COL_<n>`` name), then the value
        columns, then the old key columns, each once (a column that became the key is not
        repeated in the value)."""
        key_sql = {k.sql for k in keys}
        taken = {c.name for c in columns}
        generated = 0
        out: list[OutputColumn] = []
        for node, key in zip(query.partition_by, keys):
            name = Planner._implicit_name(node)
            if name is None:
                name, generated = generated_name(generated, taken)
            out.append(OutputColumn(name, key.sql, key.type, True))
        out += [OutputColumn(c.name, c.sql, c.type, False) for c in columns if not c.is_key and c.sql not in key_sql]
        out += [OutputColumn(c.name, c.sql, c.type, False) for c in columns if c.is_key and c.sql not in key_sql]
        return out

    @staticmethod
    def _join_key(source: JoinedSource, columns: list[OutputColumn], persistent: bool,
                  sink_name: str | None) -> list[OutputColumn]:
        """A join's key is the join column plan_join chose (ksqlDB's first viable key column in the
        projection), moved first; a persistent query must project one (ksqlDB's message names every
        viable one)."""
        assert source.join is not None
        if source.join.foreign_key:
            return Planner._foreign_key(source, columns, persistent)
        key = next((c for name in source.join.key_candidates for c in columns if c.sql == quote(name)), None)
        if key is None:
            exprs = source.join.key_expressions
            if persistent and exprs:
                listed = exprs[0] if len(exprs) == 1 else ", ".join(exprs[:-1]) + " or " + exprs[-1]
                noun = "expressions" if len(exprs) > 1 else "expression"
                note = ""
                if source.join.synthetic_key is not None:
                    note = (f"\n{exprs[0]} was added as a synthetic key column because the join criteria did "
                            f"not match any source column.")
                raise AnalysisError(f"The query used to build `{sink_name}` must include the join {noun} {listed} "
                                    f"in its projection (eg, SELECT {exprs[0]}...).{note}")
            return [OutputColumn(c.name, c.sql, c.type, False) for c in columns]
        return [OutputColumn(key.name, key.sql, key.type, True)] + [
            OutputColumn(c.name, c.sql, c.type, False) for c in columns if c is not key]

    @staticmethod
    def _foreign_key(source: JoinedSource, columns: list[OutputColumn], persistent: bool) -> list[OutputColumn]:
        """A foreign-key join's result is keyed by the left table's primary key: a persistent
        query must project every key column (ksqlDB's rule and message); they move first."""
        assert source.join is not None
        left = source.join.left
        names = source.join.foreign_key
        keys = [next((c for c in columns if c.sql == quote(n)), None) for n in names]
        if persistent and any(k is None for k in keys):
            missing = ", ".join(f"`{n[len(left.alias) + 1:]}`" for n, k in zip(names, keys) if k is None)
            raise AnalysisError(f"Primary key columns missing in projection. For foreign-key table-table joins, the "
                                f"projection must include all primary key columns from the left input table "
                                f"(`{left.source.name}`). Missing columns: {missing}.")
        present = [k for k in keys if k is not None]
        return [OutputColumn(k.name, k.sql, k.type, True) for k in present] + [
            OutputColumn(c.name, c.sql, c.type, False) for c in columns if all(c is not k for k in present)]

    @staticmethod
    def _require_keys_projected(source: Source, query: ast.Query, columns: list[OutputColumn],
                                sink_name: str | None) -> None:
        projected = {c.sql for c in columns if c.is_key}
        for key in source.key_columns:
            if quote(key.name) not in projected:
                raise AnalysisError(f"The query used to build `{sink_name}` must include the key column "
                                    f"{key.name} in its projection (eg, SELECT {key.name}...).")

    @staticmethod
    def _check_key_projected_once(columns: list[OutputColumn], computed: set[str]) -> None:
        """A sink's key column is one column: referencing it twice (``ID, ID AS ID2``) would make
        a second key column (ksqlDB's message lists the aliases, sorted). A computed copy
        (``AS_VALUE(ID) AS ID2``, named in ``computed``) is a value."""
        for key in (c for c in columns if c.is_key):
            same = sorted(c.name for c in columns if c.sql == key.sql and (c is key or c.name not in computed))
            if len(same) > 1:
                name = key.sql[1:-1].replace("``", "`") if key.sql.startswith("`") else key.name
                raise AnalysisError(f"The projection contains a key column (`{name}`) more than once, aliased as: "
                                    + ", ".join(same[:-1]) + " and " + same[-1] + ".")

    @staticmethod
    def _check_duplicates(columns: list[OutputColumn]) -> None:
        """Two output columns of one name: ksqlDB's LogicalSchema builder refuses the schema,
        naming the column as its schema prints it."""
        seen: set[str] = set()
        for c in columns:
            if c.name in seen:
                namespace, suffix = ("key", " KEY") if c.is_key else ("value", "")
                typed = f" {c.type}" if c.type is not None else ""
                raise AnalysisError(f"Duplicate {namespace} columns found in schema: `{c.name}`{typed}{suffix}")
            seen.add(c.name)


def compile_constant(node: exp.Expr, functions: FunctionRegistry) -> Compiled:
    """Compile an expression with no columns in scope (INSERT VALUES)."""
    return ExpressionCompiler(Scope([], set(), "VALUES"), functions).compile(node)


def _reject_reserved_aliases(query: ast.Query) -> None:
    """An alias may not be a system column's name (ROWTIME, WINDOWSTART, ...) unless it names
    that column itself (``ROWTIME AS ROWTIME``), as ksqlDB's rule."""
    for item in query.select:
        alias = (item.alias or "").upper()
        if alias in RESERVED_OUTPUT_NAMES and not (
                isinstance(item.expression, exp.Column) and item.expression.name.upper() == alias):
            raise AnalysisError(f"`{alias}` is a reserved column name. You cannot use it as an alias for a column.")
