"""JOIN analysis: two sources and an ON condition become one *joined source*.

A query with ``FROM a [alias] [INNER|LEFT] JOIN b [alias] [WITHIN n] ON a.x = b.y`` is planned as
a query over a :class:`JoinedSource`: a synthetic stream whose columns are every column of both
sides, named ``<ALIAS>_<COLUMN>`` as in ksqlDB (``SELECT *`` over a join shows ``I1_K, I1_ID,
I2_K, I2_ID``). The rest of the planner (WHERE, projection, GROUP BY, sinks) then runs unchanged
over it; the ``Join`` step (``physical/joins.py``) runs it.

Supported, as in ksqlDB:

* stream-table joins (INNER, LEFT): each stream record meets the table row of its key as of that
  record; the ON condition must use the table's PRIMARY KEY;
* stream-stream joins (INNER, LEFT, RIGHT, FULL) with ``WITHIN``: records of either side meet the other side's
  records of the same key whose timestamps are within the window.

* table-table joins (INNER, LEFT, RIGHT, FULL) on both primary keys: the result is a table, updated when either
  side changes, with a tombstone when a joined row disappears.

A FULL OUTER join (or one whose ON has no plain column) is keyed by a synthetic ``ROWKEY``.

N-way joins (``a JOIN b ON .. JOIN c ON ..``) nest: the joins so far are the left side of the
next one (ksqlDB's left-deep JoinTree); every source keeps its ``ALIAS_COLUMN`` names, and the
result's key follows ksqlDB's join equivalence sets (``_Tree``).

Foreign-key table-table joins (the left side's ON expression is not its primary key) are keyed by
the left table's primary key (``JoinSpec.foreign_key``).

Joins of windowed sources (both windowed, each on its key): rows meet when key and window are
equal (``JoinSpec.window``); the result is windowed as the left source, and each side's window
bounds are value columns (``S1_WINDOWSTART``, ``S1_WINDOWEND``). In an n-way join each join is
checked and run so, its left side the earlier join (windowed as its first source).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from streamsql import types as t
from streamsql.catalog import Catalog, Source
from streamsql.errors import AnalysisError, located
from streamsql.formats.features import features
from streamsql.functions.registry import FunctionRegistry
from streamsql.planner.expressions import ExpressionCompiler, Scope, ScopeColumn, quote
from streamsql.sql import ast
from streamsql.sql.dialect import to_ksql

#: pseudo columns each side of a join keeps, reachable as ``alias.ROWTIME`` etc.
SIDE_PSEUDO = (t.ROWTIME, t.ROWPARTITION, t.ROWOFFSET)
#: the key column ksqlDB adds when the join key is no source's column
SYNTHETIC_KEY = "ROWKEY"


@dataclass(frozen=True)
class JoinSide:
    """One input of a join: a catalog source under its alias, or (the left input of the second and
    later JOINs) the :class:`JoinedSource` of the joins before it, whose alias is empty."""

    source: Source
    alias: str
    #: Spark SQL of the join expression over this side's own DataFrame
    key_sql: str
    key_type: t.SqlType | None

    def column_name(self, name: str) -> str:
        """The joined source's name for one of this side's columns (ksqlDB: ``ALIAS_NAME``; a
        joined side's columns are named so already)."""
        return f"{self.alias}_{name}" if self.alias else name


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
    #: that column's name: ROWKEY, or ROWKEY_n when a source has a column so named
    synthetic_name: str = SYNTHETIC_KEY
    #: a foreign-key table-table join (the left side's ON expression is not its primary key): the
    #: joined names of the left table's key columns, which key the result
    foreign_key: tuple[str, ...] = ()
    #: a join of windowed sources: the left source's window type. Rows meet when their keys and
    #: windows are equal, as Kafka Streams compares windowed keys' bytes: the window start (a
    #: time window's key holds no end), or start and end for SESSION windows
    window: str | None = None

    def leaves(self) -> list[JoinSide]:
        """The joined sources, in FROM order (a nested join's own sources first)."""
        nested = getattr(self.left.source, "join", None)
        return [*(nested.leaves() if nested is not None else [self.left]), self.right]

    def output_name(self, qualifier: str | None, name: str) -> str:
        """A projected column's name: its own, or ``ALIAS_NAME`` when several sources have ``name``."""
        leaves = self.leaves()
        shared = sum(s.source.column(name) is not None or name in SIDE_PSEUDO for s in leaves) > 1
        if qualifier is None or not shared:
            return name
        side = next((s for s in leaves if qualifier == s.alias), None) or next(
            (s for s in leaves if qualifier == s.source.name), leaves[-1])
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
        left = f"{self.left.source.name} AS {self.left.alias}" if self.left.alias else f"({self.left.source.name})"
        return (f"{self.kind} JOIN {left} WITH {self.right.source.name} AS "
                f"{self.right.alias}{window} ON {self.left.key_sql} = {self.right.key_sql}")


@dataclass
class JoinedSource(Source):
    """A synthetic stream: the rows a join produces (never in the catalog)."""

    join: JoinSpec | None = field(default=None)


@dataclass
class _Tree:
    """The FROM clause joined so far: one source, or a join of a tree (left) and a source (right),
    as ksqlDB's JoinTree builds it left-deep in the order the JOINs are written."""

    source: Source  # a catalog source, or the JoinedSource of the joins so far
    leaves: list[tuple[str, Source]]  # (alias, source) of every source in it, in FROM order
    #: ksqlDB's join equivalence set: ON expressions (qualified SQL text) equal to this tree's key
    equivalent: frozenset[str] = frozenset()
    #: ksqlDB's viable key columns: ``ALIAS.COLUMN`` texts equal to the key, in order
    viable: tuple[str, ...] = ()

    def alias_of(self, qualifier: str) -> str | None:
        """The alias a qualifier names: an alias, or the name of a source that has no other alias."""
        for alias, _src in self.leaves:
            if qualifier == alias:
                return alias
        for alias, src in self.leaves:
            if qualifier == src.name:
                return alias
        return None

    def leaf(self, alias: str) -> Source:
        return next(src for a, src in self.leaves if a == alias)


def plan_join(catalog: Catalog, query: ast.Query, functions: FunctionRegistry) -> tuple[JoinedSource, Scope]:
    """The joined source of ``query`` (its JOINs applied left to right: ``a JOIN b ON .. JOIN c
    ON ..`` is ``(a ⋈ b) ⋈ c``) and the scope its expressions resolve in; ``functions``: the
    registry its join expressions' calls compile against."""
    check_join_sources(catalog, query)
    first = catalog.get(query.source.name)
    tree = _Tree(first, [(query.source.alias or first.name, first)])
    rights = [catalog.get(clause.right.name) for clause in query.joins]
    joined: JoinedSource | None = None
    for clause, right_src in zip(query.joins, rights):
        joined, tree = _join(tree, clause, right_src, query.select, functions)
    assert joined is not None
    return joined, _joined_scope(joined)


def check_join_sources(catalog: Catalog, query: ast.Query) -> None:
    """ksqlDB's analyzer checks of a query's joined sources, every ON clause before any join is
    planned: value formats that can join, unique aliases, each ON clause's two sources windowed
    alike."""
    if not query.joins:
        return
    first = catalog.get(query.source.name)
    rights = [catalog.get(clause.right.name) for clause in query.joins]
    unjoinable = [s for s in [first, *rights] if not features(s.value_format).joins_and_groups]
    if unjoinable:
        raise AnalysisError(f"Source(s) {', '.join(s.name for s in unjoinable)} are using the "
                            f"'{unjoinable[0].value_format.upper()}' value format. This format does not yet "
                            f"support JOIN.")
    leaves = _Tree(first, [(query.source.alias or first.name, first)])
    for clause, right_src in zip(query.joins, rights):
        right_alias = clause.right.alias or right_src.name
        if any(right_alias == alias for alias, _src in leaves.leaves):
            raise AnalysisError(f"Can not join '{leaves.leaf(right_alias).name}' to '{right_src.name}': self joins "
                                f"require unique aliases.")
        leaves = _Tree(first, [*leaves.leaves, (right_alias, right_src)])
        _left_expr, _right_expr, left_alias = _split_condition(clause.on, leaves, leaves.leaves[-1][0])
        _check_windowing(left_alias, leaves.leaf(left_alias), right_alias, right_src)


def _on_own_key(expr: Any, src: Source) -> bool:
    """Whether a join expression is its source's one key column."""
    keys = src.key_columns
    return len(keys) == 1 and isinstance(expr, exp.Column) and expr.name == keys[0].name


def _check_windowing(left_alias: str, left: Source, right_alias: str, right: Source) -> None:
    """ksqlDB's analyzer: a windowed source joins only a windowed one, session windows only
    session windows, and time windows (TUMBLING, HOPPING) only time windows."""
    if bool(left.window_type) != bool(right.window_type):
        raise AnalysisError(
            f"Can not join windowed source to non-windowed source.\n`{left_alias}` is "
            f"{left.window_type.upper() if left.window_type else 'not'} windowed\n`{right_alias}` is "
            f"{right.window_type.upper() if right.window_type else 'not'} windowed")
    if not left.window_type or not right.window_type:
        return
    lw, rw = left.window_type.upper(), right.window_type.upper()
    if (lw == "SESSION") != (rw == "SESSION"):
        raise AnalysisError(
            f"Incompatible windowed sources.\nLeft source: {lw}\nRight source: {rw}\nSession windowed sources can "
            f"only be joined to other session windowed sources, and may still not result in expected behaviour as "
            f"session bounds must be an exact match for the join to work\nHopping and tumbling windowed sources "
            f"can only be joined to other hopping and tumbling windowed sources")


def _check_windowed_keys(left: Source, left_expr: Any, right: Source, right_expr: Any,
                         left_on_key: bool | None = None) -> None:
    """ksqlDB's rules for a join of windowed sources (``PreJoinRepartitionNode``,
    ``SchemaKStream.selectKey``): a windowed source cannot be repartitioned, so each side must be
    joined on its own key, and in the join's key format (the left source's: format and window)
    unless its format carries registry schema ids, which ksqlDB re-keys into the join's format
    anyway. A table cannot even be re-keyed then. In an n-way join the left side is an earlier
    join, windowed as its first source (``left_on_key``: whether the ON expression is its key);
    ksqlDB checks each join so, with no rule of its own for n-way joins of windowed sources."""
    repartition = ("Implicit repartitioning of windowed sources is not supported. See "
                   "https://github.com/confluentinc/ksql/issues/4385.")
    join_format = (left.key_format.upper(), (left.window_type or "").upper(), left.window_size_ms)
    for src, expr in ((left, left_expr), (right, right_expr)):
        on_key = left_on_key if src is left and left_on_key is not None else _on_own_key(expr, src)
        if not on_key:
            raise AnalysisError(repartition)
        # keys carrying a registry schema id: ksqlDB repartitions both sides of the join over
        # them, so that equal keys written with different schema ids meet
        forced = features(src.key_format).uses_registry
        if forced and src.is_table:
            raise AnalysisError(repartition + " As a result, ksqlDB does not support joins on windowed sources with "
                                "Schema-Registry-enabled key formats (AVRO, JSON_SR, PROTOBUF) at this time. Please "
                                "repartition your sources to use a different key format before performing the join.")
        own = (src.key_format.upper(), (src.window_type or "").upper(), src.window_size_ms)
        if not forced and own != join_format:
            raise AnalysisError(repartition)


def _join(tree: _Tree, clause: Any, right_src: Source, select: list[Any],
          functions: FunctionRegistry) -> tuple[JoinedSource, _Tree]:
    """One JOIN clause applied to the tree so far."""
    right_alias = clause.right.alias or right_src.name
    both = _Tree(tree.source, [*tree.leaves, (right_alias, right_src)])
    left_expr, right_expr, left_alias = _split_condition(clause.on, both, right_alias)
    # the source the ON clause's left side reads names the join in ksqlDB's messages
    left_leaf = tree.leaf(left_alias)
    left_src = tree.source
    if clause.kind in ("FULL", "RIGHT") and right_src.is_table and not left_src.is_table:
        raise AnalysisError(f"Invalid join type: {clause.kind.lower()}-outer join not supported for stream-table "
                            f"join. Got {left_leaf.name} [{clause.kind}] OUTER JOIN {right_src.name}.")
    if left_src.is_table and not right_src.is_table:
        raise AnalysisError(f"Invalid join order: table-stream joins are not supported; only stream-table "
                            f"joins. Got {left_leaf.name} [{clause.kind}] JOIN {right_src.name}.")
    windowed = bool(left_src.window_type)
    if windowed:
        # an earlier join's result is on its key when the ON expression is one of the columns
        # equal to that key (ksqlDB's JoinTree), else it would be repartitioned
        left_on_key = (_text(left_expr, both) in tree.equivalent) if len(tree.leaves) > 1 else None
        _check_windowed_keys(left_src, left_expr, right_src, right_expr, left_on_key)
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
    left_scope = _side_scope(left_src, left_alias) if len(tree.leaves) == 1 else _joined_scope(left_src)
    lk = ExpressionCompiler(left_scope, functions).compile(
        left_expr if len(tree.leaves) > 1 else _unqualified(left_expr))
    rk = ExpressionCompiler(_side_scope(right_src, right_alias), functions).compile(_unqualified(right_expr))
    left_text, right_text = _text(left_expr, both), _text(right_expr, both)
    written = f"{_text(clause.on.this, both)} = {_text(clause.on.expression, both)}"  # ksqlDB shows it as written
    right_on_key = (len(right_src.key_columns) == 1 and isinstance(right_expr, exp.Column)
                    and right_expr.name == right_src.key_columns[0].name)
    foreign_key = False
    if left_src.is_table:
        if not right_on_key:
            raise AnalysisError(f"Invalid join condition: table-table joins require to join on the primary key of "
                                f"the right input table. Got {written}.")
        keys = left_src.key_columns
        on_key = (left_text in tree.viable if len(tree.leaves) > 1 else
                  len(keys) == 1 and isinstance(left_expr, exp.Column) and left_expr.name == keys[0].name)
        if not on_key and len(tree.leaves) > 1:
            raise AnalysisError(f"Invalid join condition: foreign-key table-table joins are not supported as part of "
                                f"n-way joins. Got {written}.")
        foreign_key = not on_key
        if foreign_key and clause.kind in ("RIGHT", "FULL"):
            raise AnalysisError(f"{'RIGHT' if clause.kind == 'RIGHT' else 'FULL'} OUTER JOIN on a foreign key is not "
                                f"supported")
        if foreign_key and lk.type is not None and rk.type is not None and lk.type != rk.type:
            raise AnalysisError(f"Invalid join condition: types don't match. Got {left_text}{{{lk.type}}} = "
                                f"{right_text}{{{rk.type}}}.")
    elif not stream_stream and not right_on_key:
        raise AnalysisError(
            f"Invalid join condition: stream-table joins require to join on the table's primary key. Got "
            f"{written}.")
    if lk.type is not None and rk.type is not None and lk.type != rk.type and not (
            t.is_numeric(lk.type) and t.is_numeric(rk.type)):
        raise AnalysisError(f"Invalid join condition: types don't match. Got {left_expr.sql()}{{{lk.type}}} = "
                            f"{right_expr.sql()}{{{rk.type}}}.")
    left = JoinSide(left_src, left_alias if len(tree.leaves) == 1 else "", lk.sql, lk.type)
    right = JoinSide(right_src, right_alias, rk.sql, rk.type)
    # ksqlDB's JoinTree: the ON expressions are equal to the join's key, and so is everything
    # equal to the left tree's key when the left expression is; FULL OUTER keys equal neither.
    # A foreign-key join's key is the left table's primary key.
    equivalent: frozenset[str] = frozenset()
    viable: list[str] = []
    left_keys = tuple(f"{left_alias}.{c.name}" for c in left_src.key_columns) if foreign_key else ()
    if foreign_key:
        equivalent = frozenset(left_keys)
        viable = list(left_keys)
    elif clause.kind != "FULL":
        equivalent = frozenset({left_text, right_text})
        if tree.equivalent & equivalent:
            equivalent |= tree.equivalent
        columns = [*tree.viable]
        columns += [left_text] if isinstance(left_expr, exp.Column) else []
        columns += [right_text] if isinstance(right_expr, exp.Column) else []
        viable = [c for i, c in enumerate(columns) if c in equivalent and c not in columns[:i]]
    # ksqlDB's buildJoinKey: the key is the first viable column the projection has, else the first
    chosen = next((c for c in viable if _projected(c, select, both)), viable[0] if viable else None)
    synthetic = None if chosen is not None else (lk.type or rk.type or t.STRING)
    # only the joined catalog sources count: an earlier join's synthetic key is not a source column
    synthetic_name = synthetic_key_name([c for _alias, src in both.leaves for c in src.columns])
    key_names = ((_joined_name(chosen),) if chosen is not None else (synthetic_name,)) if not foreign_key else tuple(
        _joined_name(k) for k in left_keys)
    spec = JoinSpec(clause.kind, left, right, clause.within_before_ms, clause.within_after_ms, clause.grace_ms,
                    key_candidates=key_names if not foreign_key else (),
                    key_expressions=tuple(viable) if viable else (synthetic_name,), synthetic_key=synthetic,
                    synthetic_name=synthetic_name,
                    foreign_key=key_names if foreign_key else (),
                    window=left_src.window_type.upper() if windowed and left_src.window_type else None)
    columns_out: list[t.Column] = [t.Column(synthetic_name, synthetic, "key")] if synthetic is not None else []
    for side in (left, right):
        for name, ty in side_value_columns(side):
            columns_out.append(t.Column(name, ty, "key" if name in key_names else "value"))
    leftmost = both.leaves[0][1]
    joined = JoinedSource(
        name=f"{left_src.name}_{right_src.name}_JOIN", kind="TABLE" if left_src.is_table else "STREAM",
        columns=columns_out, topic=leftmost.topic,
        key_format=leftmost.key_format if leftmost.key_format != "NONE" else right_src.key_format,
        # no source has a key format: the result's key takes ksql.persistence.default.format.key
        # (ksqlDB's JoinNode.getDefaultSourceKeyFormat), not a keyless source's declared one
        declared_key_format="NONE",
        value_format=leftmost.value_format, partitions=leftmost.partitions,
        key_delimiter=leftmost.key_delimiter, value_delimiter=leftmost.value_delimiter,
        statement=leftmost.statement, join=spec,
        # a join of windowed sources is windowed as its left source (ksqlDB's join key format)
        window_type=left_src.window_type, window_size_ms=left_src.window_size_ms,
    )
    return joined, _Tree(joined, both.leaves, equivalent, tuple(viable))


def synthetic_key_name(columns: list[t.Column]) -> str:
    """The name of a join's synthetic key (ksqlDB's ``ColumnNames.generateSyntheticJoinKey``):
    ``ROWKEY``, or ``ROWKEY_n`` with the smallest n that no column of the joined sources is
    named (``ROWKEY`` counts as 0)."""
    used = set()
    for c in columns:
        match = re.fullmatch(rf"{SYNTHETIC_KEY}(?:_(\d+))?", c.name)
        if match:
            used.add(int(match.group(1) or 0))
    n = next(i for i in range(len(used) + 1) if i not in used)
    return SYNTHETIC_KEY if n == 0 else f"{SYNTHETIC_KEY}_{n}"


def _joined_scope(joined: Source) -> Scope:
    """What expressions over a join's rows can reference: every source's columns and pseudo
    columns, qualified by its alias (``A.X`` reads the joined column ``A_X``), the joined record's
    own pseudo columns, and a synthetic ROWKEY."""
    spec = getattr(joined, "join", None)
    assert spec is not None
    scope_cols: list[ScopeColumn] = []
    for side in spec.leaves():
        for c in side_source_columns(side.source):
            scope_cols.append(ScopeColumn(c.name, c.type, quote(side.column_name(c.name)), side.alias))
        for name in SIDE_PSEUDO:
            scope_cols.append(ScopeColumn(name, t.PSEUDO_COLUMNS[name], quote(side.column_name(name)), side.alias))
    for name, ty in t.PSEUDO_COLUMNS.items():  # unqualified: the joined record's own
        scope_cols.append(ScopeColumn(name, ty, quote(name), None))
    if spec.synthetic_key is not None:
        scope_cols.append(ScopeColumn(spec.synthetic_name, spec.synthetic_key, quote(spec.synthetic_name), None))
    return Scope(scope_cols, {side.alias for side in spec.leaves()})


def _joined_name(text: str) -> str:
    """``ALIAS.COLUMN`` → the joined column ``ALIAS_COLUMN`` (ksqlDB's generatedJoinColumnAlias)."""
    alias, _dot, column = text.partition(".")
    return f"{alias}_{column}"


def _projected(text: str, select: list[Any], tree: _Tree) -> bool:
    """Whether the projection contains column ``ALIAS.COLUMN`` (ksqlDB's Projection:
    ``*``, ``alias.*`` or the column itself)."""
    alias, _dot, column = text.partition(".")
    for item in select:
        node = item.expression
        if item.star and (node is None or not (isinstance(node, exp.Column) and node.table)):
            return True
        if not isinstance(node, exp.Column):
            continue
        if isinstance(node.this, exp.Star):
            if tree.alias_of(node.table.upper()) == alias:
                return True
            continue
        if node.name == column:
            owner = tree.alias_of(node.table.upper()) if node.table else _owner(node.name, tree)
            if owner == alias:
                return True
    return False


def _owner(column: str, tree: _Tree) -> str | None:
    """The alias of the only source with ``column``, or None."""
    owners = [alias for alias, src in tree.leaves if src.column(column) is not None]
    return owners[0] if len(owners) == 1 else None


def side_source_columns(source: Source) -> list[t.Column]:
    """A catalog source's columns as a join side carries them: a windowed source's window bounds
    follow its key, as value columns of the join (ksqlDB copies them into each side's value
    before joining; ``SELECT *`` shows ``S1_WINDOWSTART``, ``S1_WINDOWEND``)."""
    if not source.window_type or getattr(source, "join", None) is not None:
        return list(source.columns)
    keys = [c for c in source.columns if c.is_key]
    bounds = [t.Column(t.WINDOWSTART, t.BIGINT, "value"), t.Column(t.WINDOWEND, t.BIGINT, "value")]
    return keys + bounds + [c for c in source.columns if not c.is_key]


def side_value_columns(side: JoinSide) -> list[tuple[str, t.SqlType]]:
    """(joined name, type) of the columns a side adds to the join's rows: its key, value and
    header columns (a header column is a value column of the join, as in ksqlDB); a joined
    side's synthetic ROWKEY stays behind: only the outermost join's is addressable."""
    spec = getattr(side.source, "join", None)
    if spec is None:
        return [(side.column_name(c.name), c.type) for c in side_source_columns(side.source)]
    return [(c.name, c.type) for c in side.source.columns if c.name != spec.synthetic_name]


def side_columns(side: JoinSide) -> list[tuple[str, t.SqlType, str]]:
    """(column in the side's DataFrame, type, joined name) of every column a side contributes:
    a source's columns and pseudo columns, renamed ``ALIAS_NAME``; a joined side's, already so named."""
    spec = getattr(side.source, "join", None)
    if spec is None:
        out = [(c.name, c.type, side.column_name(c.name)) for c in side_source_columns(side.source)]
        out += [(name, t.PSEUDO_COLUMNS[name], side.column_name(name)) for name in SIDE_PSEUDO]
        return out
    out = [(name, ty, name) for name, ty in side_value_columns(side)]
    out += [(leaf.column_name(name), t.PSEUDO_COLUMNS[name], leaf.column_name(name))
            for leaf in spec.leaves() for name in SIDE_PSEUDO]
    return out


def leftmost_column(side: JoinSide, name: str) -> str:
    """The column of a side's DataFrame holding the first source's pseudo column ``name``
    (a join's ROWPARTITION and ROWOFFSET are its first source's)."""
    spec = getattr(side.source, "join", None)
    return name if spec is None else spec.leaves()[0].column_name(name)


def _side_scope(source: Source, alias: str) -> Scope:
    cols = [ScopeColumn(c.name, c.type, quote(c.name), alias) for c in source.columns]
    cols += [ScopeColumn(name, ty, quote(name), alias) for name, ty in t.PSEUDO_COLUMNS.items()]
    return Scope(cols, {alias, source.name})


def _unqualified(node: exp.Expr) -> exp.Expr:
    """``node`` with its column qualifiers removed (it is compiled over one side only)."""
    node = node.copy()
    for col in node.find_all(exp.Column):
        col.set("table", None)
    return node


def _text(node: exp.Expr, tree: _Tree) -> str:
    """An ON operand as ksqlDB prints it: columns qualified by their source's alias, upper case."""
    node = node.copy()
    for col in node.find_all(exp.Column):
        alias = tree.alias_of(col.table.upper()) if col.table else _owner(col.name, tree)
        if alias is not None:
            col.set("table", exp.to_identifier(alias))
    return to_ksql(node).upper()


def _aliases(node: exp.Expr, tree: _Tree) -> list[str]:
    """The aliases of the sources ``node`` reads, in order of first use."""
    out: list[str] = []
    for col in node.find_all(exp.Column):
        if col.table:
            q = col.table.upper()
            alias = tree.alias_of(q)
            if alias is None:
                raise AnalysisError(f"'{q}' is not a valid stream/table name or alias.")
            if tree.leaf(alias).column(col.name) is None and col.name not in t.PSEUDO_COLUMNS:
                raise AnalysisError(f"{located(col)}JOIN ON column '{q}.{col.name}' cannot be resolved.")
        else:
            owners = [a for a, src in tree.leaves if src.column(col.name) is not None]
            if len(owners) > 1:  # ksqlDB finds it while preparing the statement, and says so
                raise AnalysisError(f"Exception while preparing statement: {located(col)}Column '{col.name}' is "
                                    f"ambiguous. Could be " + " or ".join(f"{a}.{col.name}" for a in owners) + ".")
            if not owners:
                raise AnalysisError(f"{located(col)}JOIN ON column '{col.name}' cannot be resolved.")
            alias = owners[0]
        if alias not in out:
            out.append(alias)
    return out


def _split_condition(on: exp.Expr, both: _Tree, right_alias: str) -> tuple[exp.Expr, exp.Expr, str]:
    """The (left side, right side) expressions of ``ON a = b``, whichever order they are written,
    and the alias of the source the left one reads. The left side reads the tree so far, the right
    side the joined source."""
    if isinstance(on, exp.And):
        raise AnalysisError(f"Invalid join condition: joins on multiple conditions are not yet supported. "
                            f"Got ({to_ksql(on)}).")
    if not isinstance(on, exp.EQ):
        raise AnalysisError(f"Unsupported join expression: {on.sql()}. Only equality joins of the form "
                            f"`a.x = b.y` are supported.")
    a, b = on.this, on.expression
    qa, qb = _aliases(a, both), _aliases(b, both)
    for side, refs in ((a, qa), (b, qb)):
        if not refs:
            raise AnalysisError(f"Invalid comparison expression '{side.sql()}' in join '({on.sql()})'. Each side "
                                f"of the join comparision must contain references from exactly one source.")
    if len(qa) == 1 and len(qb) == 1 and qa != qb:
        if qb == [right_alias]:
            return a, b, qa[0]
        if qa == [right_alias]:
            return b, a, qb[0]
    shown = lambda refs: ", ".join(f"`{r}`" for r in refs)  # noqa: E731
    raise AnalysisError(f"Each side of the join must reference exactly one source and not the same source. "
                        f"Left side references {shown(qa)} and right references {shown(qb)}")
