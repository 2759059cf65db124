"""Push queries over a stream answered by the engine's own process, without a Spark query.

A push query such as ``SELECT * FROM s WHERE k = 'a' EMIT CHANGES`` is otherwise a Spark
streaming query per client: seconds to start, and while rows trickle in (25/s on a team's
server), micro-batches back to back, each a Spark job and a second one for ``collect`` — about
0.7 of a core per running push query on this machine (``benchmarks/server_load.py``, 2026-12-07).
ksqlDB's scalable push queries read the topic's records as they arrive instead; so does this.

Where the query is one a stream's reader task can run whole (``physical/in_reader.py``: a stream
read alone, the record's own time, a WHERE that translates whole and every output column
translated), a thread of the engine follows the topic (``kafka/reading.follow``: the streaming
source's decoding, processing log and pushed WHERE) and applies the same programs the reader's
tasks apply (``kafka/pipe.py``) — the same translation, so the same rows as Spark's plan, and no
second evaluator. Output columns are limited to types whose Python values the Spark path hands
over unchanged or through :func:`~streamsql.runtime.pull.spark_shaped` (numbers, strings,
booleans, decimals, bytes); anything else keeps Spark's plan.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from streamsql import types as t
from streamsql.runtime.pull import program_type, spark_shaped

if TYPE_CHECKING:
    import pyarrow as pa

    from streamsql.kafka.options import SourceOptions
    from streamsql.planner.planner import QueryPlan
    from streamsql.runtime.results import RowStream

log = logging.getLogger("streamsql")

#: the output types the server's follower hands over as Spark's path does
_KINDS = {t.Kind.BOOLEAN, t.Kind.INTEGER, t.Kind.BIGINT, t.Kind.DOUBLE, t.Kind.STRING, t.Kind.DECIMAL,
          t.Kind.BYTES}


@dataclass(frozen=True)
class ArrowPush:
    """A push query's WHERE (``pushdown.exact_filter``'s JSON tree, or None) and its output
    programs (``in_reader.reader_columns``), with the SQL type of each output column."""

    where: str | None
    columns: tuple[tuple[str, Any], ...]
    result: tuple[t.Column, ...]

    def rows(self, batch: pa.RecordBatch) -> list[list[Any]]:
        """The query's rows of one decoded batch, as the Spark path's ``collect`` hands them on:
        tombstones never (a stream's null value is no row), then the WHERE, then the columns."""
        import pyarrow.compute as pc

        from streamsql.kafka.filters import filter_expression
        from streamsql.kafka.pipe import evaluate

        keep = pc.invert(pc.field(t.TOMBSTONE_COL))
        if self.where is not None:
            keep = pc.and_kleene(keep, filter_expression(self.where))
        batch = batch.filter(keep)
        if not batch.num_rows:
            return []
        values = [evaluate(program, batch).to_pylist() for _, program in self.columns]
        shaped = [[spark_shaped(v, c.type) for v in column] for column, c in zip(values, self.result)]
        return [list(row) for row in zip(*shaped)]


def arrow_push(plan: QueryPlan) -> ArrowPush | None:
    """The :class:`ArrowPush` of a push query, or None where Spark's plan must run it (see the
    module's docstring for which)."""
    from streamsql.physical.in_reader import reader_columns, reads_alone

    source = plan.source
    if not reads_alone(plan):
        return None
    programs = reader_columns(plan)
    if programs is None:
        return None
    types = {**{c.name: c.type for c in source.columns}, **t.PSEUDO_COLUMNS}
    result = []
    for c, (_, program) in zip(plan.columns, programs):
        if set(program) <= {"column", "type"}:
            given = types.get(program["column"])
            if given is None:
                return None
            sql_type = t.from_spark(t.to_spark(given))
        else:
            sql_type = program_type(str(program["type"]))
        if not isinstance(sql_type, (t.Primitive, t.Decimal)) or sql_type.kind not in _KINDS:
            return None
        result.append(t.Column(c.name, sql_type, "key" if c.is_key else "value"))
    return ArrowPush(plan.exact_filter if plan.where is not None else None, programs, tuple(result))


def serve(push: ArrowPush, opts: SourceOptions, starts: dict[int, int], stream: RowStream,
          on_end: Callable[[], None]) -> None:
    """Follow the topic from ``starts`` and put the query's rows into ``stream`` until it is
    closed or its LIMIT is reached (run in a thread of its own); a failure ends the stream with
    the error, as a failed Spark query does."""
    from streamsql.errors import AnalysisError
    from streamsql.kafka.decoding import source_schema
    from streamsql.kafka.reading import follow

    error: BaseException | None = None
    try:
        for batch in follow(opts, source_schema(opts), starts, lambda: stream.closed):
            for row in push.rows(batch):
                if not stream.put(row):
                    return
    except Exception as e:  # noqa: BLE001 - the reader hears why its query ended
        log.warning("push query %s failed: %s", stream.query_id, e)
        error = AnalysisError(str(e))
    finally:
        stream.finish(error)
        on_end()
