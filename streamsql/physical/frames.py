"""The stateless DataFrame transformations of the builder's steps: a query's filter and
projection (over a stream, over a table's changes), the rows of its table functions, and the
pre-aggregation select.

Each function applies a plan's Spark SQL text to a DataFrame; what the text says was decided at
planning time (``planner/``), which builds no DataFrame. Only :mod:`streamsql.physical.builder`
calls these.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamsql import types as t
from streamsql.functions.table_functions import POSITION, array_column
from streamsql.planner.aggregation import MATCH_COL, AggregatePlan
from streamsql.planner.expressions import quote
from streamsql.types import HEADERS_COL, TOMBSTONE_COL

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from streamsql.planner.planner import QueryPlan


def select(plan: QueryPlan, source_df: DataFrame) -> DataFrame:
    """Apply the plan to the source's streaming DataFrame. Output: the plan's columns, then
    ROWTIME, __HEADERS and __TOMBSTONE for the sink."""
    df = source_df
    if plan.where:
        df = df.where(f"(NOT {TOMBSTONE_COL}) AND ({plan.where})")
    df = explode(df, plan.table_functions)
    # a null-valued record keeps its key, and a PARTITION BY of key columns only is evaluated
    # on it; one reading its value gives it a null key (ksqlDB's PartitionByParamsFactory)
    exprs = [f"{_null_for_tombstones(c.sql) if c.is_key and c.sql in plan.keys_from_value else c.sql} "
             f"AS {quote(c.name)}" for c in plan.columns]
    if not any(c.name == t.ROWTIME for c in plan.columns):  # a transient query may select ROWTIME itself
        exprs.append(f"{plan.rowtime_sql} AS {t.ROWTIME}")
    exprs += [HEADERS_COL, TOMBSTONE_COL]
    if plan.source.window_type and not plan.repartitioned:  # the sink writes the same windows
        exprs += [f"{t.WINDOWSTART} AS __WINDOWSTART", f"{t.WINDOWEND} AS __WINDOWEND"]
    return df.selectExpr(*exprs)


def select_changes(plan: QueryPlan, source_df: DataFrame) -> DataFrame:
    """A stateless query over a TABLE: every input row produces an output row; ``__HAVING``
    is false when the row must be removed from the result (tombstone, or WHERE not met)."""
    alive = f"(NOT {TOMBSTONE_COL})" + (f" AND coalesce({plan.where}, false)" if plan.where else "")
    exprs = [f"{c.sql} AS {quote(c.name)}" for c in plan.columns]
    exprs += [f"{plan.rowtime_sql} AS {t.ROWTIME}", "CAST(NULL AS BIGINT) AS __WINDOWSTART",
              "CAST(NULL AS BIGINT) AS __WINDOWEND", f"{alive} AS __HAVING"]
    return source_df.selectExpr(*exprs)


def explode(df: DataFrame, arrays: list[str]) -> DataFrame:
    """Table functions (functions/table_functions.py): one row per position of the longest array;
    the arrays stay as ``__TF*`` columns."""
    if not arrays:
        return df
    df = df.selectExpr("*", *[f"{sql} AS {quote(array_column(i))}" for i, sql in enumerate(arrays)])
    sizes = ", ".join(f"coalesce(size({quote(array_column(i))}), 0)" for i in range(len(arrays)))
    n = f"greatest(0, {sizes})"
    # sequence(0, -1) counts down, so the filter keeps exactly 0 .. n-1
    return df.selectExpr("*", f"explode(filter(sequence(0, {n} - 1), p -> p >= 0 AND p < {n})) AS {POSITION}")


def pre_aggregate(plan: AggregatePlan, source_df: DataFrame) -> DataFrame:
    """An aggregation's stage 1 on the source's streaming DataFrame (stateless): keys,
    arguments, ROWTIME, ROWPARTITION, ROWOFFSET; over a table also the source key columns and
    ``__MATCH``."""
    pre = [f"{sql} AS {quote(name)}" for name, sql, _ in plan.keys]
    pre += [f"{sql} AS {quote(name)}" for name, sql in plan.arguments]
    pre += [t.ROWTIME, t.ROWPARTITION, t.ROWOFFSET]
    if plan.over_table:
        # every change of the table reaches the processor: a tombstone or a row that stops
        # matching WHERE retracts the row's previous value
        match = f"(NOT {TOMBSTONE_COL}) AND coalesce({plan.where}, false)" if plan.where else f"NOT {TOMBSTONE_COL}"
        pre.append(f"{match} AS {MATCH_COL}")
        pre += [f"{quote(c.name)} AS {quote(n)}" for c, n in zip(plan.source.key_columns, plan.source_key_columns)]
        return source_df.selectExpr(*pre)
    df = source_df.where(f"NOT {TOMBSTONE_COL}")
    if plan.where:
        df = df.where(plan.where)
    return df.selectExpr(*pre)


def _null_for_tombstones(sql: str) -> str:
    return f"CASE WHEN {TOMBSTONE_COL} THEN NULL ELSE {sql} END"
