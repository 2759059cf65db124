"""JOIN analysis: two sources and an ON condition become one *joined source*.

A query with ``FROM a [alias] [INNER|LEFT] JOIN b [alias] [WITHIN n] ON a.x = b.y`` is planned as
a query over a :class:`JoinedSource`: a synthetic stream whose columns are every column of both
sides, named ``<ALIAS>_<COLUMN>`` as in ksqlDB (``SELECT *`` over a join shows ``I1_K, I1_ID,
I2_K, I2_ID``). The rest of the planner (WHERE, projection, GROUP BY, sinks) then runs unchanged
over it; ``runtime/joins.py`` builds its streaming DataFrame.

Supported, as in ksqlDB:

* stream-table joins (INNER, LEFT): each stream record meets the table row of its key as of that
  record; the ON condition must use the table's PRIMARY KEY;
* stream-stream joins (INNER, LEFT, RIGHT, FULL) with ``WITHIN``: records of either side meet the other side's
  records of the same key whose timestamps are within the window.

* table-table joins (INNER, LEFT, RIGHT, FULL) on both primary keys: the result is a table, updated when either
  side changes, with a tombstone when a joined row disappears.

A FULL OUTER join (or one whose ON has no plain column) is keyed by a synthetic ``ROWKEY``.

Not yet: n-way joins, foreign-key joins, windowed sources in joins.
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
#: the key column ksqlDB adds when the join key is no source's column
SYNTHETIC_KEY = "ROWKEY"


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
    #: joined columns that may serve as the result's key (the join columns; a LEFT join's key
    #: comes from its left side when that is a column) and how the ON clause wrote them
    key_candidates: tuple[str, ...] = ()
    key_expressions: tuple[str, ...] = ()
    #: the type of the synthetic ROWKEY column, when the key is not a source column (FULL OUTER
    #: joins, or ON expressions on both sides)
    synthetic_key: t.SqlType | None = None

    def output_name(self, qualifier: str | None, name: str) -> str:
        """A projected column's name: its own, or ``ALIAS_NAME`` when both sides have ``name``."""
        both = all(s.source.column(name) is not None or name in SIDE_PSEUDO for s in (self.left, self.right))
        if qualifier is None or not both:
            return name
        side = self.left if qualifier in (self.left.alias, self.left.source.name) else self.right
        return side.column_name(name)

    @property
    def stream_table(self) -> bool:
        return self.right.source.is_table and not self.left.source.is_table

    @property
    def table_table(self) -> bool:
        return self.left.source.is_table

    def describe(self) -> str:
        """One line for EXPLAIN."""
        window = ("" if self.right.source.is_table
                  else f" WITHIN ({self.within_before_ms} ms, {self.within_after_ms} ms)")
        return (f"{self.kind} JOIN {self.left.source.name} AS {self.left.alias} WITH {self.right.source.name} AS "
                f"{self.right.alias}{window} ON {self.left.key_sql} = {self.right.key_sql}")


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
    kafka = [s.name for s in (left_src, right_src) if s.value_format.upper() == "KAFKA"]
    if kafka:
        raise AnalysisError(f"Source(s) {', '.join(kafka)} are using the 'KAFKA' value format. This format "
                            f"does not yet support JOIN.")
    if left_alias == right_alias:
        raise AnalysisError(f"Can not join '{left_src.name}' to '{right_src.name}': self joins require "
                            f"unique aliases.")
    if clause.kind in ("FULL", "RIGHT") and right_src.is_table and not left_src.is_table:
        raise AnalysisError(f"Invalid join type: {clause.kind.lower()}-outer join not supported for stream-table "
                            f"join. Got {left_src.name} [{clause.kind}] OUTER JOIN {right_src.name}.")

    if left_src.is_table and not right_src.is_table:
        raise AnalysisError(f"Invalid join order: table-stream joins are not supported; only stream-table "
                            f"joins. Got {left_src.name} [{clause.kind}] JOIN {right_src.name}.")
    if left_src.window_type or right_src.window_type:
        raise AnalysisError("Not supported yet: joins of windowed sources")
    left_expr, right_expr = _split_condition(clause.on, left_alias, right_alias, left_src, right_src)
    stream_stream = not right_src.is_table
    if stream_stream and clause.within_before_ms is None:
        raise AnalysisError("Stream-Stream joins must have a WITHIN clause specified. None was provided. "
                            "To learn about how to specify a WITHIN clause with a stream-stream join, please "
                            "visit: https://docs.confluent.io/current/ksql/docs/syntax-reference.html"
                            "#create-stream-as-select")
    if not stream_stream and clause.within_before_ms is not None:
        raise AnalysisError("A window definition was provided for a Stream-Table join. These joins are not "
                            "windowed. Please drop the window definition (ie. the WITHIN clause) and try "
                            "to execute your join again.")
    left_scope = _side_scope(left_src, left_alias)
    right_scope = _side_scope(right_src, right_alias)
    lk = ExpressionCompiler(left_scope).compile(_unqualified(left_expr))
    rk = ExpressionCompiler(right_scope).compile(_unqualified(right_expr))
    if left_src.is_table:
        keys = left_src.key_columns
        if len(keys) != 1 or not (isinstance(left_expr, exp.Column) and left_expr.name == keys[0].name):
            raise AnalysisError(
                f"Invalid join condition: table-table joins require to join on the primary key of the left "
                f"table. Got {_shown(left_expr, left_alias)} = {_shown(right_expr, right_alias)}.")
    if not stream_stream:
        keys = right_src.key_columns
        if len(keys) != 1 or not (isinstance(right_expr, exp.Column) and right_expr.name == keys[0].name):
            raise AnalysisError(
                f"Invalid join condition: stream-table joins require to join on the table's primary key. Got "
                f"{_shown(left_expr, left_alias)} = {_shown(right_expr, right_alias)}.")
    if lk.type is not None and rk.type is not None and lk.type != rk.type and not (
            t.is_numeric(lk.type) and t.is_numeric(rk.type)):
        raise AnalysisError(f"Invalid join condition: types don't match. Got {left_expr.sql()}{{{lk.type}}} = "
                            f"{right_expr.sql()}{{{rk.type}}}.")
    left = JoinSide(left_src, left_alias, lk.sql, lk.type)
    right = JoinSide(right_src, right_alias, rk.sql, rk.type)
    candidates = _key_candidates(clause.kind, left_expr, right_expr, left, right)
    synthetic = None if candidates else (lk.type or rk.type or t.STRING)
    if synthetic is not None:  # FULL OUTER, or no column on either side of ON: ksqlDB's ROWKEY
        candidates = [(SYNTHETIC_KEY, SYNTHETIC_KEY)]
    spec = JoinSpec(clause.kind, left, right, clause.within_before_ms, clause.within_after_ms, clause.grace_ms,
                    key_candidates=tuple(name for name, _text in candidates),
                    key_expressions=tuple(text for _name, text in candidates), synthetic_key=synthetic)
    columns: list[t.Column] = [t.Column(SYNTHETIC_KEY, synthetic, "key")] if synthetic is not None else []
    for side in (left, right):
        for c in side.source.columns:
            if c.role not in ("key", "value"):
                continue
            name = side.column_name(c.name)
            columns.append(t.Column(name, c.type, "key" if name in spec.key_candidates else "value"))
    joined = JoinedSource(
        name=f"{left_src.name}_{right_src.name}_JOIN", kind="TABLE" if left_src.is_table else "STREAM",
        columns=columns, topic=left_src.topic,
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
    if synthetic is not None:
        scope_cols.append(ScopeColumn(SYNTHETIC_KEY, synthetic, quote(SYNTHETIC_KEY), None))
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


def _shown(node: exp.Expr, alias: str) -> str:
    """An ON operand as ksqlDB prints it: columns qualified, upper case."""
    node = node.copy()
    for col in node.find_all(exp.Column):
        col.set("table", exp.to_identifier(alias))
    return node.sql().upper()


def _unqualified(node: exp.Expr) -> exp.Expr:
    """``node`` with its column qualifiers removed (it is compiled over one side only)."""
    node = node.copy()
    for col in node.find_all(exp.Column):
        col.set("table", None)
    return node


def _qualifiers(node: exp.Expr, left_alias: str, right_alias: str, left: Source, right: Source) -> set[str]:
    sides: set[str] = set()
    for col in node.find_all(exp.Column):
        q = col.table.upper() if col.table else None
        if q in (left_alias, left.name) or q in (right_alias, right.name):
            mine = left if q in (left_alias, left.name) else right
            if mine.column(col.name) is None and col.name not in t.PSEUDO_COLUMNS:
                raise AnalysisError(f"JOIN ON column '{q}.{col.name}' cannot be resolved.")
            sides.add("L" if mine is left else "R")
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


def _split_condition(on: exp.Expr, left_alias: str, right_alias: str, left: Source,
                     right: Source) -> tuple[exp.Expr, exp.Expr]:
    """The (left side, right side) expressions of ``ON a = b``, whichever order they are written."""
    if not isinstance(on, exp.EQ):
        raise AnalysisError(f"Unsupported join expression: {on.sql()}. Only equality joins of the form "
                            f"`a.x = b.y` are supported.")
    a, b = on.this, on.expression
    qa = _qualifiers(a, left_alias, right_alias, left, right)
    qb = _qualifiers(b, left_alias, right_alias, left, right)
    for side, refs in ((a, qa), (b, qb)):
        if not refs:
            raise AnalysisError(f"Invalid comparison expression '{side.sql()}' in join '({on.sql()})'. Each side "
                                f"of the join comparision must contain references from exactly one source.")
    if qa == {"L"} and qb == {"R"}:
        return a, b
    if qa == {"R"} and qb == {"L"}:
        return b, a
    raise AnalysisError(f"Each side of the join must reference exactly one source and not the same source. "
                        f"Left side references {sorted(qa)} and right references {sorted(qb)}")


def _key_candidates(kind: str, left_expr: exp.Expr, right_expr: exp.Expr, left: JoinSide,
                    right: JoinSide) -> list[tuple[str, str]]:
    """The join columns that can be the result's key, as (joined name, ON text): for an INNER
    join either side's column (they are equal); for a LEFT join the left column (the right one may
    be null), else the right one; for a RIGHT join either, the left first (ksqlDB). The runtime
    fills a join column from the join key when its side is missing (runtime/joins.py)."""
    out: list[tuple[str, str]] = []
    for side, node in ((left, left_expr), (right, right_expr)):
        if isinstance(node, exp.Column) and side.source.column(node.name) is not None:
            out.append((side.column_name(node.name), f"{side.alias}.{node.name}"))
    if kind == "LEFT" and len(out) == 2:
        out = out[:1]
    if kind == "FULL":  # either side may be missing: the key is synthetic
        return []
    return out
