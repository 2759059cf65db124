"""A stateless query run whole inside its reader's task: decode → WHERE → projection → encode →
produce, no row handed to the JVM.

Why: a query such as ``CREATE STREAM out AS SELECT a, b FROM s WHERE x % 10 = 0`` otherwise
hands every decoded row to the JVM, which converts the Arrow batch into its own rows, selects,
and converts them back into Arrow for the Python sink — two conversions of every record, and
the JVM's share of a pass-through query's CPU (session 35: ~4.3 of ~16 CPU-s per million
records) for a step that moves columns. When the planner shows that pyarrow computes the step
exactly as Spark would (``physical/steps.py``: ``Select.in_reader``), the reader's task applies
it to each decoded batch and writes the result with the Kafka sink's own code
(:func:`streamsql.kafka.sink.write_arrow`); the query's Spark plan is the scan alone, written
to Spark's ``noop`` sink, and the task hands Spark one column-less row per record it wrote: the
``noop`` sink's ``numOutputRows`` is then the query's records written, and a first batch's input
count (which has no offsets to count from, ``runtime/progress.consumed_records``) the rows the
reader kept, as with a pushed WHERE.

Delivery is the same as the sink's: a task's records are acknowledged by Kafka before the task
ends, and Spark commits the micro-batch's offsets after every task ended (at-least-once; a
replayed micro-batch is written again). Exactly-once queries keep Spark's plan.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow as pa

from streamsql import types as T
from streamsql.types import HEADERS_COL, TOMBSTONE_COL


@dataclass(frozen=True)
class ReaderPipe:
    """What the reader's task runs after decoding: ``where`` (``planner/pushdown.py``'s JSON
    tree of the whole WHERE, or None), ``columns`` (output name, program) in the query's order
    (``physical/in_reader.py`` makes the programs and says why each is Spark's result), and
    ``sink``: the Kafka sink's options."""

    columns: tuple[tuple[str, Any], ...]
    where: str | None
    sink: tuple[tuple[str, str], ...]

    def to_json(self) -> str:
        return json.dumps({"columns": self.columns, "where": self.where, "sink": dict(self.sink)}, sort_keys=True)

    @staticmethod
    @functools.lru_cache(maxsize=64)
    def parse(text: str) -> ReaderPipe:
        """Parsed once per worker process and pipe (a task reads one partition's range)."""
        data = json.loads(text)
        return ReaderPipe(tuple((str(o), p) for o, p in data["columns"]), data.get("where"),
                          tuple(sorted(data["sink"].items())))

    @functools.cached_property
    def _mask(self) -> Any:
        """SQL's WHERE over a stream: a null-valued record never passes one."""
        import pyarrow.compute as pc

        from streamsql.kafka.filters import filter_expression

        assert self.where is not None
        return pc.and_kleene(pc.invert(pc.field(TOMBSTONE_COL)), filter_expression(self.where))

    def apply(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The rows the query writes, as the sink expects them (``physical/frames.select``):
        the query's columns, then ROWTIME, __HEADERS, __TOMBSTONE."""
        if self.where is not None:
            batch = batch.filter(self._mask)
        names = [out for out, _ in self.columns]
        arrays = [evaluate(program, batch) for _, program in self.columns]
        for name in (T.ROWTIME, HEADERS_COL, TOMBSTONE_COL):
            if name not in names:
                names.append(name)
                arrays.append(batch.column(name))
        return pa.RecordBatch.from_arrays(arrays, names=names)

    def run(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """Write every batch's rows to the sink's topic; once Kafka acknowledged them all,
        yields a batch of as many rows as were written, with no columns (what Spark counts)."""
        from streamsql.kafka.sink import write_arrow

        written = write_arrow((self.apply(batch) for batch in batches), dict(self.sink))
        if written:
            yield counted_rows(written)


def evaluate(node: dict[str, Any], batch: pa.RecordBatch) -> pa.Array:
    """One output column: a decoded column, a literal repeated, or ``+ - *`` with its operands
    cast to the types the program names (Spark's coercion, ``physical/in_reader.py``)."""
    value = _value(node, batch)
    return value if isinstance(value, (pa.Array, pa.ChunkedArray)) else pa.repeat(value, batch.num_rows)


def _value(node: dict[str, Any], batch: pa.RecordBatch) -> Any:
    import pyarrow.compute as pc

    if "column" in node:
        return batch.column(node["column"])
    if "value" in node:
        return _literal(node["value"], node["type"])
    args = [_literal(a["value"], to) if "value" in a else _cast(_value(a, batch), arrow_type(to))
            for a, to in zip(node["args"], node["cast"])]
    return _cast(getattr(pc, node["op"])(*args), arrow_type(node["type"]))


def _literal(value: Any, kind: str) -> pa.Scalar:
    """A literal made in its operand type (an integer literal beside a decimal is the decimal
    of its digits, which pyarrow's int → decimal cast would refuse below 10 digits)."""
    if kind.startswith("decimal("):
        return pa.scalar(Decimal(str(value)), arrow_type(kind))
    return pa.scalar(float(value) if kind == "float64" else value, arrow_type(kind))


def _cast(value: Any, to: pa.DataType) -> Any:
    return value if value.type == to else value.cast(to)


@functools.lru_cache(maxsize=256)
def arrow_type(kind: str) -> pa.DataType:
    if kind.startswith("decimal("):
        precision, scale = kind[len("decimal("):-1].split(",")
        return pa.decimal128(int(precision), int(scale))
    return {"int32": pa.int32(), "int64": pa.int64(), "float64": pa.float64()}[kind]


def counted_rows(n: int) -> pa.RecordBatch:
    """``n`` rows with no columns."""
    return pa.RecordBatch.from_struct_array(pa.repeat(_no_fields(), n))


@functools.cache
def _no_fields() -> pa.Scalar:
    return pa.scalar({}, pa.struct([]))  # made on first use: it loads pyarrow's compute module
