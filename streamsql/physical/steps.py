"""Physical plans: what a query runs, as a chain of typed steps, before any Spark object exists.

The planner (``streamsql.planner``) turns a statement into a logical plan (``QueryPlan`` for
stateless queries, ``AggregatePlan`` for GROUP BY); :func:`physical_plan` turns that into
steps, and :class:`streamsql.physical.builder.SparkBuilder` — the one place that creates
Spark DataFrames and streaming writers — builds one Spark construct per step. EXPLAIN prints
the steps, so what a user reads is what runs. (ksqlDB's layering: logical plan → execution
steps → one builder per step; sqlglot's planner: a ``Plan`` of ``Step`` s.)

Where each step runs:

* ``Scan``, ``Join``, ``Select``, ``Aggregate``, ``SparkAggregate``, ``TableChanges``, ``KafkaSink``:
  Spark's executors (the stateful steps' state in Spark's state store, partitioned by key).
  ``SparkAggregate`` is Spark's own operator, for the shapes it computes exactly as ksqlDB;
  ``Aggregate`` runs ksqlDB's semantics in Python for the rest. ``TableChanges`` keeps a
  filtered/projected table's changelog free of spurious tombstones. A table's pull-query store
  follows the changelog topic its query writes (``runtime/materialized.py``).
* ``Collect``: transient queries hand their rows to the driver's result stream.
* ``TopicScan`` → ``ConnectorSink``: a sink connector (``streamsql.connectors``): raw records of
  its topics, written to the external system from the executors.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamsql.catalog import Source
    from streamsql.planner.aggregation import AggregatePlan
    from streamsql.planner.joins import JoinSpec
    from streamsql.planner.planner import QueryPlan


@dataclass
class Scan:
    """Read a source's topic, decoded. ``starting_offsets`` (``earliest``/``latest``) is where a
    query without a checkpoint begins; ``pinned``: ``latest`` resolved to partition → offset when
    the statement was accepted (``runtime/starts.py``), so nothing produced after it is missed."""

    source: Source
    starting_offsets: str
    pinned: dict[int, int] | None = None
    #: the WHERE conjuncts the reader applies to each decoded batch (``planner/pushdown.py``)
    source_filter: str | None = None

    def describe(self) -> str:
        start = self.starting_offsets
        if self.pinned is not None:
            at = ", ".join(f"{p}:{o}" for p, o in sorted(self.pinned.items()))
            start = f"{start} as the statement was accepted, partition:offset {at}"
        pushed = ""
        if self.source_filter:
            from streamsql.planner.pushdown import filter_text

            pushed = f"; the reader keeps only rows where {filter_text(self.source_filter)}"
        return (f"Scan {self.source.kind.lower()} {self.source.name} (topic {self.source.topic}, "
                f"key {self.source.key_format}, value {self.source.value_format}, from {start}{pushed})")


@dataclass
class Join:
    """JOIN two inputs in the executors (``physical/joins.py``): the left input is a scan or, in
    an n-way join, the join before it; the right input a scan. A key join runs one stateful
    operator grouped by ``buckets`` state keys, one per Kafka Streams task of ksqlDB's join (a
    partition of the first source); ``by_partition``: both inputs are partitioned by the join key
    already, so a bucket is a partition, else a hash of the join key (where ksqlDB repartitions).
    A foreign-key join runs Kafka Streams' two operators (subscriptions, then by foreign key)."""

    spec: JoinSpec
    left: Scan | Join
    right: Scan
    buckets: int
    by_partition: bool

    def describe(self) -> str:
        spec = self.spec
        if spec.foreign_key:
            how = "foreign key: subscriptions by the left key, then by foreign key"
        else:
            shape = "table-table" if spec.table_table else "stream-table" if spec.stream_table else "stream-stream"
            how = (f"{shape}; {self.buckets} bucket(s) "
                   f"{'by partition' if self.by_partition else 'by hash of the join key'}")
        return f"{_join_text(spec)}: {how}"

    def scans(self) -> list[Scan]:
        """The scans it reads, in FROM order (a nested join's first)."""
        left = self.left.scans() if isinstance(self.left, Join) else [self.left]
        return [*left, self.right]

    def inputs(self) -> list[str]:
        """The describe lines of its inputs, depth first, indented under the join."""
        lines: list[str] = []
        for label, step in (("left", self.left), ("right", self.right)):
            lines.append(f"{label}: {step.describe()}")
            if isinstance(step, Join):
                lines.extend(f"  {line}" for line in step.inputs())
        return lines


def _join_text(join: JoinSpec) -> str:
    """``Join KIND LEFT ⋈ RIGHT``; an n-way join's left side is the join before it, in brackets."""
    nested = getattr(join.left.source, "join", None)
    left = f"({_join_text(nested)})" if nested is not None else join.left.source.name
    return f"Join {join.kind} {left} ⋈ {join.right.source.name}"


def source_step(source: Source, starting_offsets: str) -> Scan | Join:
    """The step that reads ``source``: a scan of its topic, or the join a joined source is."""
    from streamsql.physical.joins import by_partition, join_buckets

    join = getattr(source, "join", None)
    if join is None:
        return Scan(source, starting_offsets)
    return Join(join, source_step(join.left.source, starting_offsets), Scan(join.right.source, starting_offsets),
                join_buckets(join), by_partition(join))


@dataclass
class TopicScan:
    """Read topics' raw records (key and value bytes, topic, partition, offset, timestamp), as a
    Kafka Connect sink receives them."""

    topics: tuple[str, ...]
    starting_offsets: str = "earliest"

    def describe(self) -> str:
        return f"Scan topics {', '.join(self.topics)} raw (from {self.starting_offsets})"


@dataclass
class Select:
    """Stateless: WHERE, projection, PARTITION BY, table functions. ``changelog``: over a table,
    every change becomes an upsert or a removal row (``__HAVING``). ``in_reader``: the scan's
    tasks run this step and the Kafka sink after it themselves (``kafka/pipe.py``;
    ``physical/in_reader.py`` says when)."""

    plan: QueryPlan
    changelog: bool = False
    in_reader: bool = False

    def describe(self) -> str:
        parts = [f"Select {', '.join(c.name for c in self.plan.columns)}"]
        if self.plan.where:
            parts.append(f"where {self.plan.where_text or self.plan.where}")
        if self.changelog:
            parts.append("(table changes)")
        if self.in_reader:
            parts.append("(in the reader's tasks with the sink: no row reaches the JVM)")
        return " ".join(parts)


def _aggregation_text(label: str, p: AggregatePlan) -> str:
    keys = ", ".join(sql for _, sql, _ in p.keys) or "(all rows)"
    calls = ", ".join(c.shown or c.text for c in p.calls)
    text = f"{label} by {keys}: {calls}"
    if p.window is not None:
        w = p.window
        spans = [_duration(w.size_ms) if w.type == "SESSION" else f"SIZE {_duration(w.size_ms)}"]
        if w.advance_ms is not None:
            spans.append(f"ADVANCE BY {_duration(w.advance_ms)}")
        spans.append(f"GRACE PERIOD {_duration(p.grace_ms)}")
        text += f" window {w.type} ({', '.join(spans)})"
    return text


_UNITS = (("DAY", 86_400_000), ("HOUR", 3_600_000), ("MINUTE", 60_000), ("SECOND", 1000), ("MILLISECOND", 1))


def _duration(ms: int) -> str:
    """Milliseconds in ksqlDB's words, in the largest unit that states them exactly (60000 ->
    ``1 MINUTE``): what a reader of EXPLAIN or the topology wrote in the statement."""
    for unit, size in _UNITS:
        if ms and ms % size == 0:
            n = ms // size
            return f"{n} {unit}{'' if n == 1 else 'S'}"
    return f"{ms} MILLISECONDS"


@dataclass
class Aggregate:
    """GROUP BY in the executors: ``buckets`` state keys (Kafka Streams' tasks, one stream time
    each), ``cache``: one update per key per micro-batch (ksqlDB's record cache) or every update."""

    plan: AggregatePlan
    buckets: int
    cache: bool

    def describe(self) -> str:
        p = self.plan
        text = _aggregation_text("Aggregate", p) + f" emit {'FINAL' if p.emit == 'FINAL' else 'CHANGES'}"
        text += f"; {self.buckets} bucket(s), {'latest per key per batch' if self.cache else 'every update'}"
        if p.having:
            text += f"; having {p.having}"
        return text


@dataclass
class SparkAggregate:
    """GROUP BY in Spark's own stateful operator (JVM state in the state store; see
    ``physical/spark_aggregate.py`` for the shapes it takes and how ksqlDB's semantics map).
    ``per_record`` (the record cache off): the source admits one record per micro-batch, so
    the operator emits every update."""

    plan: AggregatePlan
    per_record: bool

    def describe(self) -> str:
        p = self.plan
        text = _aggregation_text("Aggregate (Spark)", p)
        text += " emit FINAL (append)" if p.emit == "FINAL" else " emit CHANGES (update)"
        text += "; one record per batch" if self.per_record else "; latest per key per batch"
        return text


@dataclass
class KafkaSink:
    """Write rows to a topic from the executors (tombstones for removed table rows)."""

    target: Source

    def describe(self) -> str:
        return (f"Kafka sink {self.target.name} (topic {self.target.topic}, key {self.target.key_format}, "
                f"value {self.target.value_format})")


@dataclass
class TableChanges:
    """A table's change rows → its changelog: upserts, and tombstones only for keys the table
    holds (a present bit per key in the state store; ``physical/table_changes.py``). ``buckets``
    state keys, one per partition of the source, as the aggregate step's."""

    key_names: list[str]
    buckets: int

    def describe(self) -> str:
        keys = ", ".join(self.key_names) or "(no key)"
        return f"Table changes by {keys}: tombstones only for present keys; {self.buckets} bucket(s)"


@dataclass
class ConnectorSink:
    """A sink connector's writes: each micro-batch's records, task by task (one per Kafka
    partition), into the external system from the executors. ``config`` is the connector's
    typed configuration (``streamsql.connectors.sink.SinkConfig``)."""

    name: str
    class_name: str
    config: Any = field(repr=False)

    def describe(self) -> str:
        return f"Connector sink {self.name} ({self.class_name})"


@dataclass
class Collect:
    """Hand each micro-batch's rows to a transient query's result stream in the driver."""

    on_batch: Callable[[Any, int], None] = field(repr=False)
    available_now: bool = False

    def describe(self) -> str:
        return "Collect rows to the client" + (" (to the topic's current end)" if self.available_now else "")


Step = (Scan | Join | TopicScan | Select | Aggregate | SparkAggregate | TableChanges | KafkaSink | ConnectorSink
        | Collect)
#: the steps that aggregate (their state lives in the checkpoint)
AGGREGATE_STEPS = (Aggregate, SparkAggregate)
#: the steps whose state lives in the checkpoint (its layout is recorded there); a join's
#: layout is recorded beside theirs (``physical/builder.check_join_checkpoint``)
STATEFUL_STEPS = (Aggregate, SparkAggregate, TableChanges)


@dataclass
class PhysicalPlan:
    """A linear chain of steps: one source step, transformations, one terminal step."""

    steps: list[Step]

    def explain(self) -> str:
        lines: list[str] = []
        for i, step in enumerate(self.steps):
            indent = "  " * i
            lines.append(f"{indent}{'> ' if i else ''}[{i + 1}] {step.describe()}")
            if isinstance(step, Join):
                lines.extend(f"{indent}      {line}" for line in step.inputs())
        return "\n".join(lines)

    @property
    def terminal(self) -> Step:
        return self.steps[-1]

    def scans(self) -> list[Scan]:
        """The source scans it reads (a join's, in FROM order)."""
        first = self.steps[0]
        return first.scans() if isinstance(first, Join) else [first] if isinstance(first, Scan) else []


def physical_plan(logical: QueryPlan | AggregatePlan, terminal: Step, starting_offsets: str, *,
                  buckets: int = 1, cache: bool = True, changelog: bool = False,
                  operator: str | None = None, in_reader: bool = False) -> PhysicalPlan:
    """The steps of a logical plan ending in ``terminal``. ``changelog``: a stateless query
    over a table emits its changes (upserts and removals) rather than its rows; written to a
    topic (a ``KafkaSink`` terminal) they pass the ``TableChanges`` step (``buckets`` state
    keys, as an aggregation's). An aggregation
    takes Spark's own operator when it computes the plan exactly (``spark_aggregate``), else
    the Python operator; ``operator`` (``"spark"``/``"python"``, from a query's checkpoint)
    keeps a resumed query on the operator its state was written by. ``in_reader``: a stateless
    step the reader computes exactly runs there, with the sink (``physical/in_reader.py``)."""
    from streamsql.physical import spark_aggregate
    from streamsql.physical.in_reader import runs_in_reader
    from streamsql.planner.aggregation import AggregatePlan

    steps: list[Step] = [source_step(logical.source, starting_offsets)]
    if isinstance(logical, AggregatePlan):
        spark = spark_aggregate.unsupported_reason(logical) is None if operator is None else operator == "spark"
        steps.append(SparkAggregate(logical, per_record=not cache) if spark else Aggregate(logical, buckets, cache))
    else:
        # a foreign-key join's rows are its changelog already: Kafka Streams' FK join emits its
        # tombstones itself, a left row's delete even when the key was removed before (ksqlDB)
        if getattr(getattr(logical.source, "join", None), "foreign_key", ()):
            changelog = False
        first = steps[0]
        if isinstance(first, Scan) and logical.source_filter:
            first.source_filter = logical.source_filter
        steps.append(Select(logical, changelog,
                            in_reader=in_reader and not changelog and isinstance(terminal, KafkaSink)
                            and runs_in_reader(logical, terminal.target)))
        if changelog and isinstance(terminal, KafkaSink):
            steps.append(TableChanges([c.name for c in logical.columns if c.is_key], buckets))
    steps.append(terminal)
    return PhysicalPlan(steps)


def connector_plan(sink: ConnectorSink, topics: tuple[str, ...]) -> PhysicalPlan:
    """A sink connector's steps. Its topics are read from the earliest offset when it first
    starts, as a Connect sink's consumer group does (``auto.offset.reset=earliest``)."""
    return PhysicalPlan([TopicScan(topics), sink])
