"""JOIN analysis: two sources and an ON condition become one *joined source*.

A query with ``FROM a [alias] [INNER|LEFT] JOIN b [alias] [WITHIN n] ON a.x = b.y`` is planned as
a query over a :class:`JoinedSource`: a synthetic stream whose columns are every column of both
sides, named ``<ALIAS>_<COLUMN>`` as in ksqlDB (``SELECT *`` over a join shows ``I1_K, I1_ID,
I2_K, I2_ID``). The rest of the planner (WHERE, projection, GROUP BY, sinks) then runs unchanged
over it; ``runtime/joins.py`` builds its streaming DataFrame.

Supported, as in ksqlDB:

* stream-table joins (INNER, LEFT): each stream record meets the table row of its key as of that
  record; the ON condition must use the table's PRIMARY KEY;
* stream-stream joins (INNER, LEFT) with ``WITHIN``: records of either side meet the other side's
  records of the same key whose timestamps are within the window.

Not yet: table-table joins, RIGHT/FULL joins, n-way joins, windowed sources in joins.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from streamsql import types as t
from streamsql.catalog import Catalog, Source
from streamsql.errors import AnalysisError
from streamsql.planner.expressions import ExpressionCompiler, Scope, ScopeColumn, quote
from streamsql.sql import ast

#: pseudo columns each side of a join keeps, reachable as ``alias.ROWTIME`` etc.
SIDE_PSEUDO = (t.ROWTIME, t.ROWPARTITION, t.ROWOFFSET)


@dataclass(frozen=True)
class JoinSide:
    source: Source
    alias: str
    #: Spark SQL of the join expression over this side's own DataFrame
    key_sql: str
    key_type: t.SqlType | None

    def column_name(self, name: str) -> str:
        """The joined source's name for one of this side's columns (ksqlDB: ``ALIAS_NAME``)."""
        return f"{self.alias}_{name}"


@dataclass(frozen=True)
class JoinSpec:
    kind: str  # INNER | LEFT
    left: JoinSide
    right: JoinSide
    #: stream-stream joins: how far before/after a left record a right record may be (ms)
    within_before_ms: int | None = None
    within_after_ms: int | None = None
    grace_ms: int | None = None

    @property
    def stream_table(self) -> bool:
        return self.right.source.is_table


@dataclass
class JoinedSource(Source):
    """A synthetic stream: the rows a join produces (never in the catalog)."""

    join: JoinSpec | None = field(default=None)


def plan_join(catalog: Catalog, query: ast.Query) -> tuple[JoinedSource, Scope]:
    """The joined source of ``query`` and the scope its expressions resolve in."""
    if len(query.joins) > 1:
        raise AnalysisError("Not supported yet: joins of more than two sources")
    clause = query.joins[0]
    left_src = catalog.get(query.source.name)
    right_src = catalog.get(clause.right.name)
    left_alias = query.source.alias or left_src.name
    right_alias = clause.right.alias or right_src.name
    if left_alias == right_alias:
        raise AnalysisError(f"Can not join '{left_src.name}' to '{right_src.name}': self joins require "
                            f"unique aliases.")
    if clause.kind not in ("INNER", "LEFT"):
        raise AnalysisError(f"Not supported yet: {clause.kind} OUTER JOIN")
    if left_src.is_table:
        raise AnalysisError("Not supported yet: joins with a TABLE on the left (table-table joins)")
    if left_src.window_type or right_src.window_type:
        raise AnalysisError("Not supported yet: joins of windowed sources")
    stream_stream = not right_src.is_table
    if stream_stream and clause.within_before_ms is None:
        raise AnalysisError(f"Stream-Stream joins must have a WITHIN clause specified. None was provided. "
                            f"To learn about how to specify a WITHIN clause with a stream-stream join, please "
                            f"visit: https://docs.confluent.io/current/ksql/docs/syntax-reference.html"
                            f"#create-stream-as-select")
    if not stream_stream and clause.within_before_ms is not None:
        raise AnalysisError(f"A window definition was provided for a Stream-Table join. These joins are not "
                            f"windowed. Please drop the window definition (ie. the WITHIN clause) and try "
                            f"to execute your join again.")
    left_expr, right_expr = _split_condition(clause.on, left_alias, right_alias, left_src, right_src)
    left_scope = _side_scope(left_src, left_alias)
    right_scope = _side_scope(right_src, right_alias)
    lk = ExpressionCompiler(left_scope).compile(_unqualified(left_expr))
    rk = ExpressionCompiler(right_scope).compile(_unqualified(right_expr))
    if not stream_stream:
        keys = right_src.key_columns
        if len(keys) != 1 or not (isinstance(right_expr, exp.Column) and right_expr.name == keys[0].name):
            raise AnalysisError(
                f"Cannot repartition a TABLE source. If this is a join, make sure that the criteria uses the "
                f"TABLE's key column {', '.join(k.name for k in keys)} instead of {right_expr.sql()}")
    if lk.type is not None and rk.type is not None and lk.type != rk.type and not (
            t.is_numeric(lk.type) and t.is_numeric(rk.type)):
        raise AnalysisError(f"Invalid join condition: types don't match. Got {left_expr.sql()}{{{lk.type}}} = "
                            f"{right_expr.sql()}{{{rk.type}}}.")
    left = JoinSide(left_src, left_alias, lk.sql, lk.type)
    right = JoinSide(right_src, right_alias, rk.sql, rk.type)
    spec = JoinSpec(clause.kind, left, right, clause.within_before_ms, clause.within_after_ms, clause.grace_ms)
    key_name = _key_column(left_expr, right_expr, left, right)
    columns: list[t.Column] = []
    for side in (left, right):
        for c in side.source.columns:
            if c.role not in ("key", "value"):
                continue
            name = side.column_name(c.name)
            columns.append(t.Column(name, c.type, "key" if name == key_name else "value"))
    columns.sort(key=lambda c: not c.is_key)  # the key first, as every source
    joined = JoinedSource(
        name=f"{left_src.name}_{right_src.name}_JOIN", kind="STREAM", columns=columns, topic=left_src.topic,
        key_format=left_src.key_format if left_src.key_format != "NONE" else right_src.key_format,
        value_format=left_src.value_format, partitions=left_src.partitions,
        key_delimiter=left_src.key_delimiter, value_delimiter=left_src.value_delimiter,
        statement=left_src.statement, join=spec,
    )
    scope_cols: list[ScopeColumn] = []
    for side in (left, right):
        for c in side.source.columns:
            if c.role in ("key", "value"):
                scope_cols.append(ScopeColumn(c.name, c.type, quote(side.column_name(c.name)), side.alias))
        for name in SIDE_PSEUDO:
            scope_cols.append(ScopeColumn(name, t.PSEUDO_COLUMNS[name], quote(side.column_name(name)), side.alias))
    for name, ty in t.PSEUDO_COLUMNS.items():  # unqualified: the joined record's own
        scope_cols.append(ScopeColumn(name, ty, quote(name), None))
    return joined, Scope(scope_cols, {left_alias, right_alias})


def side_columns(side: JoinSide) -> list[tuple[str, t.SqlType, str]]:
    """(column in the side's DataFrame, type, joined name) of every column a side contributes."""
    out = [(c.name, c.type, side.column_name(c.name)) for c in side.source.columns if c.role in ("key", "value")]
    out += [(name, t.PSEUDO_COLUMNS[name], side.column_name(name)) for name in SIDE_PSEUDO]
    return out


def _side_scope(source: Source, alias: str) -> Scope:
    cols = [ScopeColumn(c.name, c.type, quote(c.name), alias) for c in source.columns]
    cols += [ScopeColumn(name, ty, quote(name), alias) for name, ty in t.PSEUDO_COLUMNS.items()]
    return Scope(cols, {alias, source.name})


def _unqualified(node: exp.Expression) -> exp.Expression:
    """``node`` with its column qualifiers removed (it is compiled over one side only)."""
    node = node.copy()
    for col in node.find_all(exp.Column):
        col.set("table", None)
    return node


def _qualifiers(node: exp.Expression, left_alias: str, right_alias: str, left: Source, right: Source) -> set[str]:
    sides: set[str] = set()
    for col in node.find_all(exp.Column):
        q = col.table.upper() if col.table else None
        if q in (left_alias, left.name):
            sides.add("L")
        elif q in (right_alias, right.name):
            sides.add("R")
        elif q:
            raise AnalysisError(f"'{q}' is not a valid stream/table name or alias.")
        else:
            in_left = left.column(col.name) is not None
            in_right = right.column(col.name) is not None
            if in_left and in_right:
                raise AnalysisError(f"Column '{col.name}' is ambiguous. Could be {left_alias}.{col.name} or "
                                    f"{right_alias}.{col.name}.")
            if in_left:
                sides.add("L")
            elif in_right:
                sides.add("R")
            else:
                raise AnalysisError(f"JOIN ON column '{col.name}' cannot be resolved.")
    return sides


def _split_condition(on: exp.Expression, left_alias: str, right_alias: str, left: Source,
                     right: Source) -> tuple[exp.Expression, exp.Expression]:
    """The (left side, right side) expressions of ``ON a = b``, whichever order they are written."""
    if not isinstance(on, exp.EQ):
        raise AnalysisError(f"Unsupported join expression: {on.sql()}. Only equality joins of the form "
                            f"`a.x = b.y` are supported.")
    a, b = on.this, on.expression
    qa = _qualifiers(a, left_alias, right_alias, left, right)
    qb = _qualifiers(b, left_alias, right_alias, left, right)
    if qa == {"L"} and qb == {"R"}:
        return a, b
    if qa == {"R"} and qb == {"L"}:
        return b, a
    raise AnalysisError(f"Each side of the join must reference exactly one source and not the same source. "
                        f"Left side references {sorted(qa)} and right references {sorted(qb)}")


def _key_column(left_expr: exp.Expression, right_expr: exp.Expression, left: JoinSide, right: JoinSide) -> str | None:
    """The key of the join result: the left join column, else the right one (ksqlDB)."""
    if isinstance(left_expr, exp.Column) and left.source.column(left_expr.name) is not None:
        return left.column_name(left_expr.name)
    if isinstance(right_expr, exp.Column) and right.source.column(right_expr.name) is not None:
        return right.column_name(right_expr.name)
    return None
