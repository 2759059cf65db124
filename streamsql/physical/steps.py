"""Physical plans: what a query runs, as a chain of typed steps, before any Spark object exists.

The planner (``streamsql.planner``) turns a statement into a logical plan (``QueryPlan`` for
stateless queries, ``AggregatePlan`` for GROUP BY); :func:`physical_plan` turns that into
steps, and :class:`streamsql.physical.builder.SparkBuilder` — the one place that creates
Spark DataFrames and streaming writers — builds one Spark construct per step. EXPLAIN prints
the steps, so what a user reads is what runs. (ksqlDB's layering: logical plan → execution
steps → one builder per step; sqlglot's planner: a ``Plan`` of ``Step`` s.)

Where each step runs:

* ``Scan``, ``Select``, ``Aggregate``, ``SparkAggregate``, ``TableChanges``, ``KafkaSink``:
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
    from streamsql.planner.planner import QueryPlan


@dataclass
class Scan:
    """Read a source's topic, decoded; a joined source reads both sides and joins them."""

    source: Source
    starting_offsets: str

    def describe(self) -> str:
        join = getattr(self.source, "join", None)
        if join is not None:
            return f"{_join_text(join)} (from {self.starting_offsets})"
        return (f"Scan {self.source.kind.lower()} {self.source.name} (topic {self.source.topic}, "
                f"key {self.source.key_format}, value {self.source.value_format}, from {self.starting_offsets})")


def _join_text(join: Any) -> str:
    """``Join KIND LEFT ⋈ RIGHT``; an n-way join's left side is the join before it, in brackets."""
    nested = getattr(join.left.source, "join", None)
    left = f"({_join_text(nested)})" if nested is not None else join.left.source.name
    return f"Join {join.kind} {left} ⋈ {join.right.source.name}"


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
    every change becomes an upsert or a removal row (``__HAVING``)."""

    plan: QueryPlan
    changelog: bool = False

    def describe(self) -> str:
        parts = [f"Select {', '.join(c.name for c in self.plan.columns)}"]
        if self.plan.where:
            parts.append(f"where {self.plan.where}")
        if self.changelog:
            parts.append("(table changes)")
        return " ".join(parts)


def _aggregation_text(label: str, p: AggregatePlan) -> str:
    keys = ", ".join(sql for _, sql, _ in p.keys) or "(all rows)"
    calls = ", ".join(c.shown or c.text for c in p.calls)
    text = f"{label} by {keys}: {calls}"
    if p.window is not None:
        text += f" window {p.window.type} size {p.window.size_ms} ms grace {p.grace_ms} ms"
    return text


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


Step = Scan | TopicScan | Select | Aggregate | SparkAggregate | TableChanges | KafkaSink | ConnectorSink | Collect
#: the steps that aggregate (their state lives in the checkpoint)
AGGREGATE_STEPS = (Aggregate, SparkAggregate)
#: the steps whose state lives in the checkpoint (its layout is recorded there)
STATEFUL_STEPS = (Aggregate, SparkAggregate, TableChanges)


@dataclass
class PhysicalPlan:
    """A linear chain of steps: one source step, transformations, one terminal step."""

    steps: list[Step]

    def explain(self) -> str:
        return "\n".join(f"{'  ' * i}{'> ' if i else ''}[{i + 1}] {s.describe()}" for i, s in enumerate(self.steps))

    @property
    def terminal(self) -> Step:
        return self.steps[-1]


def physical_plan(logical: QueryPlan | AggregatePlan, terminal: Step, starting_offsets: str, *,
                  buckets: int = 1, cache: bool = True, changelog: bool = False,
                  operator: str | None = None) -> PhysicalPlan:
    """The steps of a logical plan ending in ``terminal``. ``changelog``: a stateless query
    over a table emits its changes (upserts and removals) rather than its rows; written to a
    topic (a ``KafkaSink`` terminal) they pass the ``TableChanges`` step (``buckets`` state
    keys, as an aggregation's). An aggregation
    takes Spark's own operator when it computes the plan exactly (``spark_aggregate``), else
    the Python operator; ``operator`` (``"spark"``/``"python"``, from a query's checkpoint)
    keeps a resumed query on the operator its state was written by."""
    from streamsql.physical import spark_aggregate
    from streamsql.planner.aggregation import AggregatePlan

    steps: list[Step] = [Scan(logical.source, starting_offsets)]
    if isinstance(logical, AggregatePlan):
        spark = spark_aggregate.unsupported_reason(logical) is None if operator is None else operator == "spark"
        steps.append(SparkAggregate(logical, per_record=not cache) if spark else Aggregate(logical, buckets, cache))
    else:
        # a foreign-key join's rows are its changelog already: Kafka Streams' FK join emits its
        # tombstones itself, a left row's delete even when the key was removed before (ksqlDB)
        if getattr(getattr(logical.source, "join", None), "foreign_key", ()):
            changelog = False
        steps.append(Select(logical, changelog))
        if changelog and isinstance(terminal, KafkaSink):
            steps.append(TableChanges([c.name for c in logical.columns if c.is_key], buckets))
    steps.append(terminal)
    return PhysicalPlan(steps)


def connector_plan(sink: ConnectorSink, topics: tuple[str, ...]) -> PhysicalPlan:
    """A sink connector's steps. Its topics are read from the earliest offset when it first
    starts, as a Connect sink's consumer group does (``auto.offset.reset=earliest``)."""
    return PhysicalPlan([TopicScan(topics), sink])
