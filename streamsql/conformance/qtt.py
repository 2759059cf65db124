"""``streamsql test``: run ksqlDB's query-validation tests (QTT) against the real engine.

A QTT file (``{"tests": [...]}``) holds test cases: ``statements`` to execute, ``inputs`` to
produce, ``outputs`` expected on topics (in order), or an ``expectedException`` the statements must
raise. ksqlDB runs them on Kafka Streams' ``TopologyTestDriver`` one record at a time; here each
case runs on a real :class:`~streamsql.runtime.engine.Engine` (its own catalog and data directory)
over one shared broker and one shared SparkSession:

* **Isolation.** Every topic name of a case gets a per-case prefix: ``KAFKA_TOPIC='x'`` literals
  in statements, the topics of inputs/outputs/``topics``, and (through the session property
  ``ksql.output.topic.name.prefix``) the default sink topic of ``CREATE STREAM s AS SELECT``.
* **Inputs** are encoded with the declared formats of the source reading the topic (KAFKA INT key
  → 4 bytes, JSON → JSON text, DELIMITED → the string as given) and written with their exact
  timestamps (see :mod:`streamsql.conformance.rawproduce`: librdkafka cannot write timestamp 0, and
  kafka-python refuses a null header value, which the corpus writes at timestamp 0).
* **Record-at-a-time.** Inputs are produced, then ``wait_until_idle``. Within one partition a
  stateless query keeps input order, so one batch gives ksqlDB's output order; when several queries
  write into the same topic (``INSERT INTO``) their interleaving depends on feeding one record at a
  time, so such cases produce one record, wait until idle, and repeat; so do cases with a join
  (which side's record comes first decides what it emits).
* **Fed first.** A join processes the records of a micro-batch in the order a Kafka Streams task
  would (:func:`streamsql.physical.joins.arrival_order`: by timestamp across topics, ties to the
  right side). When that order is the inputs' order (:func:`merge_order_is_input_order`, checked
  again against each join's sides once its statement ran), the inputs are produced before
  the first query starts, so its first batch holds them all: one micro-batch instead of one per
  record, same results. A case whose queries turn out not to allow it (a join reading another
  query's output, two queries writing one topic, a foreign-key join, a source with a TIMESTAMP
  column) is run again record at a time.
* **Comparison** per expected topic, in order: key, value (JSON as data; numbers numerically),
  timestamp, window start/end/type (always; a time window's end from the sink's size). Topics
  with several partitions are compared per partition (Kafka orders records only within a
  partition).

Test ids are ``<file stem>/<test name>``, plus `` - <FORMAT>`` / `` - <CONFIG>`` for templated
cases (ksqlDB's naming).
"""

from __future__ import annotations

import base64
import json
import shutil
import struct
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamsql.conformance.cases import DEFAULT_TIMEOUT_S, QttCase
from streamsql.conformance.compare import ActualRecord, SideFormat, compare_topic, describe_record
from streamsql.conformance.expectations import check_post, class_mismatch, message_matches
from streamsql.conformance.rawproduce import partition_for
from streamsql.conformance.records import decode_with, encode_with, raw_encode, window_suffix
from streamsql.conformance.results import CaseResult, judged
from streamsql.conformance.topics import register_topic_schemas, rewrite_statement, topics_to_create
from streamsql.errors import ParseError, StreamsqlError
from streamsql.formats import schema_registry
from streamsql.kafka.collector import admin_client
from streamsql.runtime.spark import activate

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient
    from pyspark.sql import SparkSession

    from streamsql.conformance.rawproduce import RawProducer
    from streamsql.formats import FormatSpec
    from streamsql.runtime.engine import Engine


#: Spark settings while cases run: a case's data is a few records, so the per-batch fixed costs
#: are what a case pays for (measured on every 8th ratchet id, 2 cores, -j 3: 125 → 103 s with one
#: shuffle partition, → 93 s interpreted as well; docs/conformance.md).
#:
#: * one shuffle partition instead of the engine's 2 × cores: a stateful micro-batch is one task,
#:   not four (each with its own state store and Python worker);
#: * expressions interpreted, not compiled: for every new plan Spark generates Java source for
#:   its projections and stages and compiles it with Janino; over a handful of rows that costs far
#:   more than it saves. Both modes are Spark's own and give the same results (Spark's expression
#:   tests run each expression both ways).
#:
#: Only the test runner's session gets them; the engine's queries are otherwise planned the same.
RUNNER_SPARK_CONF = {
    "spark.sql.shuffle.partitions": "1",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}


@contextmanager
def runner_settings(spark: SparkSession) -> Iterator[None]:
    """:data:`RUNNER_SPARK_CONF` on ``spark`` for the duration; a session shared with the
    caller (the test suite's) gets its own settings back."""
    saved = {k: spark.conf.get(k, None) for k in RUNNER_SPARK_CONF}
    for k, v in RUNNER_SPARK_CONF.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, old in saved.items():
            if old is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, old)


class MemoryCommandLog:
    """A command log that lives as long as its case: nothing to replay, nothing to fsync. Sequence
    numbers start at ``first`` so that query ids (``CSAS_<NAME>_<seq>``, Spark query names) are
    unique among cases running at the same time."""

    def __init__(self, first: int = 0) -> None:
        self._first = first
        self._commands: list[Any] = []

    def read_all(self) -> list[Any]:
        return list(self._commands)

    def next_seq(self) -> int:
        return self._commands[-1].seq + 1 if self._commands else self._first

    def append(self, statement: str, properties: dict[str, str], *args: Any, **kwargs: Any) -> Any:
        from streamsql.catalog.commands import Command

        cmd = Command(self.next_seq(), statement, dict(properties), *args, **kwargs)
        self._commands.append(cmd)
        return cmd

    def reset(self) -> None:
        self._commands = []


#: ksqlDB's QTT runs with its test UDFs on the classpath; ours are Python ports in this directory
#: (the corpus needs them under any settings)
QTT_FUNCTIONS = {"ksql.extension.dir": str(Path(__file__).with_name("qtt_udfs"))}
#: the corpus's engine settings: ``streamsql.aggregation.buckets`` 1, one stream time per
#: aggregation, as ksqlDB over the corpus's (mostly) one-partition topics, whatever the session's
#: shuffle partitions
QTT_ENGINE_PROPERTIES = {**QTT_FUNCTIONS, "streamsql.aggregation.buckets": "1"}


class _Failure(Exception):
    """A case failed (reason = message)."""


class _FeedRecordAtATime(Exception):
    """Feeding the inputs first did not apply to this case's queries: run it record at a time."""


def merge_order_is_input_order(inputs: Sequence[dict[str, Any]], tie_winner: str | None = None,
                               any_tie_winner: bool = False) -> bool:
    """True when merging the inputs' topics by timestamp (each topic in input order; always the
    topic whose next record is earliest, as a Kafka Streams task picks) gives the input order.

    A tie between topics is broken for ``tie_winner`` (the join's right side, as
    :func:`streamsql.physical.joins.arrival_order` does), or, with ``any_tie_winner``, for
    whichever topic the inputs list first (before the join's sides are known); otherwise a tie
    makes the answer False."""
    queues: dict[str, list[tuple[int, int]]] = {}
    for i, rec in enumerate(inputs):
        queues.setdefault(str(rec.get("topic")), []).append((int(rec.get("timestamp", 0) or 0), i))
    heads = {topic: 0 for topic in queues}
    expected = 0
    while True:
        candidates = [(queue[heads[topic]][0], topic) for topic, queue in queues.items() if heads[topic] < len(queue)]
        if not candidates:
            return True
        earliest = min(ts for ts, _ in candidates)
        tied = [topic for ts, topic in candidates if ts == earliest]
        if len(tied) == 1:
            topic = tied[0]
        elif any_tie_winner:
            topic = next((t for t in tied if queues[t][heads[t]][1] == expected), tied[0])
        elif tie_winner in tied and len(tied) == 2:
            topic = tie_winner
        else:
            return False
        if queues[topic][heads[topic]][1] != expected:
            return False
        heads[topic] += 1
        expected += 1


def _join_tie_winner(steps: Sequence[Any]) -> str | None:
    """The topic that goes first at equal timestamps in the plan's join: its right side, for a
    join of two scans; None for an n-way join (its later operators see joined rows)."""
    from streamsql.physical.steps import Join, Scan

    joins = [step for step in steps if isinstance(step, Join)]
    if len(joins) == 1 and isinstance(joins[0].left, Scan):
        return joins[0].right.source.topic
    return None


def _has_foreign_key_join(steps: Sequence[Any]) -> bool:
    """A foreign-key join runs two operators (subscriptions, then by foreign key): records of one
    batch reach the second in another order than one at a time."""
    from streamsql.physical.steps import Join

    def foreign(step: Any) -> bool:
        return isinstance(step, Join) and (bool(step.spec.foreign_key) or foreign(step.left))

    return any(foreign(step) for step in steps)


def _statement_kinds(statement: str) -> tuple[type, ...]:
    """The statement classes ``statement`` parses to (none for one that does not parse here: the
    engine rejects it)."""
    from streamsql.sql.parser import parse

    try:
        return tuple(type(node) for node in parse(statement))
    except Exception:  # noqa: BLE001
        return ()


class QttRunner:
    """Runs cases one at a time on fresh engines over a shared broker and SparkSession."""

    def __init__(self, bootstrap_servers: str, spark: SparkSession, work_dir: Path | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S, spark_master: str | None = None, parallel: int = 1,
                 engine_properties: dict[str, str] | None = None) -> None:
        self.bootstrap = bootstrap_servers
        #: what each case's engine starts with (a case's own properties are SET on top): the
        #: corpus's (:data:`QTT_ENGINE_PROPERTIES`) unless given, e.g. a user's properties file
        self.engine_properties = dict(QTT_ENGINE_PROPERTIES if engine_properties is None else engine_properties)
        self.parallel = max(1, parallel)
        self._seq_lock = threading.Lock()
        self.spark = spark
        self.timeout_s = timeout_s
        self.spark_master = spark_master
        self._own_work_dir = work_dir is None
        self.work_dir = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="streamsql-qtt-"))
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self._seq = 0
        self._producer: RawProducer | None = None
        self._admin_client: AdminClient | None = None
        #: in every topic name of this runner's cases: random, so two runners on one broker (two
        #: in one process, or two runs) never share topics; digits, as the seconds it replaced
        #: (two runners made within one second reused each other's topics and records)
        self.run_tag = f"{uuid.uuid4().int % 10**8:08d}"
        self._warm = False  # a case has run a query through Spark (see iter_results)

    # -- public --------------------------------------------------------------------------------

    def run(self, cases: Iterable[QttCase], on_result: Callable[[CaseResult], None] | None = None) -> list[CaseResult]:
        out = []
        for res in self.iter_results(cases):
            out.append(res)
            if on_result is not None:
                on_result(res)
        return out

    def iter_results(self, cases: Iterable[QttCase]) -> Iterable[CaseResult]:
        """Results in the order of ``cases``; with ``parallel`` > 1, that many cases run at once
        (each on its own engine). Every case is queued up front, so a slow case holds back only
        the *reporting* of later ones, never their start: the workers stay busy to the end."""
        if self.parallel == 1:
            for case in cases:
                yield self.run_case(case)
            return
        from concurrent.futures import ThreadPoolExecutor

        pending = list(cases)
        # Warm-up, one case at a time until one has run a query: the first tasks of Spark's Python
        # runners add entries to an environment map shared by every query of the Kafka data
        # source (BasePythonRunner puts SPARK_LOCAL_DIRS, SPARK_REUSE_WORKER, ... into the
        # function's envVars). Three cold queries doing that at once corrupted the HashMap, and
        # from then on every task failed to deserialize (java.io.OptionalDataException), the
        # whole corpus run failing. Once the entries exist, later puts only replace values.
        while pending and not self._warm:
            yield self.run_case(pending.pop(0))
        with ThreadPoolExecutor(self.parallel, thread_name_prefix="qtt-pool") as pool:
            futures = [pool.submit(self.run_case, case) for case in pending]
            try:
                for f in futures:
                    yield f.result()
            finally:
                for f in futures:
                    f.cancel()  # the consumer stopped early: run nothing more

    def run_case(self, case: QttCase) -> CaseResult:
        """Runs ``case`` once (twice only when its inputs cannot be fed before its queries start:
        the same case in the other feeding mode, not a retry). A failure of the machine's is
        reported as such (:func:`~streamsql.conformance.results.judged`), never run again."""
        result = self._run_case_once(case, feed_first=True)
        if result.status == "rerun":
            result = self._run_case_once(case, feed_first=False)
        return judged(result)

    def _run_case_once(self, case: QttCase, feed_first: bool = True) -> CaseResult:
        if case.skip_reason:
            return CaseResult(case.id, case.file, "skipped", case.skip_reason)
        with self._seq_lock:
            self._seq += 1
            seq = self._seq
        prefix = f"qtt{self.run_tag}_{seq}_"
        started = time.monotonic()
        box: dict[str, Any] = {}
        state: dict[str, Any] = {}

        def body() -> None:
            try:
                activate(self.spark)
                self._execute(case, prefix, state, feed_first)
                box["result"] = ("passed", "")
            except _FeedRecordAtATime:
                box["result"] = ("rerun", "")
            except _Failure as f:
                box["result"] = ("failed", str(f))
            except BaseException as e:  # noqa: BLE001 - one case's crash never stops the run
                box["result"] = ("failed", f"crash: {type(e).__name__}: {_first_line(str(e))}")
                box["trace"] = traceback.format_exc()

        worker = threading.Thread(target=body, name=f"qtt-{seq}", daemon=True)
        worker.start()
        worker.join(self.timeout_s)
        if worker.is_alive():
            engine = state.get("engine")
            if engine is not None:
                try:
                    engine.close()  # stopping the queries unblocks processAllAvailable
                except Exception:  # noqa: BLE001
                    pass
            worker.join(30)
            status, reason = "failed", f"timeout: the case did not finish within {self.timeout_s:.0f}s"
        else:
            status, reason = box.get("result", ("failed", "crash: no result"))
        self._cleanup(state, prefix)
        reason = reason.replace(prefix, "")
        return CaseResult(case.id, case.file, status, reason, time.monotonic() - started,
                          fed_first="fed_first" in state and status != "rerun")

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close()
        if self._own_work_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    # -- one case ------------------------------------------------------------------------------

    def _execute(self, case: QttCase, prefix: str, state: dict[str, Any], feed_first: bool = True) -> None:
        from streamsql.runtime.config import EngineConfig
        from streamsql.runtime.engine import Engine

        data_dir = self.work_dir / prefix.rstrip("_")
        state["data_dir"] = data_dir
        first_seq = int(prefix.rstrip("_").rsplit("_", 1)[-1]) * 1000 if self.parallel > 1 else 0
        engine = Engine(EngineConfig(self.bootstrap, data_dir, self.spark_master, dict(self.engine_properties)),
                        command_log=MemoryCommandLog(first_seq), spark=self.spark)
        state["engine"] = engine
        engine.start()
        expected_exc = case.expected_exception
        # ksqlDB's test harness turns the record cache off: every aggregate update is output
        props: dict[str, str] = {"auto.offset.reset": "earliest", "ksql.streams.cache.max.bytes.buffering": "0"}
        for k, v in case.properties.items():
            props[k] = str(v).lower() if isinstance(v, bool) else str(v)
        props["ksql.output.topic.name.prefix"] = prefix + props.get("ksql.output.topic.name.prefix", "")
        # each case its own in-memory Schema Registry (ksqlDB's harness uses a mock one too)
        props.setdefault(schema_registry.URL_PROPERTY, f"mock://{prefix}")
        state["registry"] = props[schema_registry.URL_PROPERTY]
        for k, v in props.items():
            engine.execute(f"SET '{k}'='{v.replace(chr(39), chr(39) * 2)}';")

        for name, partitions in topics_to_create(case).items():
            engine.admin.create_topic(prefix + name, partitions)
        state["schemas"] = register_topic_schemas(case, prefix, state["registry"])

        feed_first = (feed_first and bool(case.inputs) and props.get("auto.offset.reset") == "earliest"
                      and len({str(r.get("topic")) for r in case.inputs}) > 1
                      and merge_order_is_input_order(case.inputs, any_tie_winner=True))
        starts_query: list[bool] = []
        if feed_first:
            from streamsql.sql import ast

            kinds = [_statement_kinds(stmt) for stmt in case.statements]
            # INSERT VALUES writes records before the inputs when they are fed after the statements
            feed_first = not any(ast.InsertValues in k for k in kinds)
            # the inputs go in just before the first CREATE ... AS SELECT / INSERT INTO ... SELECT
            starts_query = [ast.CreateAsSelect in k or ast.InsertInto in k for k in kinds]
        # statements: each at its line of the script ksqlDB's harness makes of them (one after
        # the other), so the positions in messages are the same
        line = 0
        for i, stmt in enumerate(case.statements):
            if feed_first and "fed_first" not in state and starts_query[i]:
                feed_first = self._feed_first(engine, case, prefix, state)
            text = "\n" * line + rewrite_statement(stmt, prefix)
            line += stmt.count("\n") + 1
            try:
                results = engine.execute(text)
            except StreamsqlError as e:
                msg = str(e).replace(prefix, "")
                if isinstance(e, ParseError) and 0 < e.line <= len(text.splitlines()):
                    # ksqlDB's ParseFailedException names the script line that failed to parse
                    msg += "\nStatement: " + text.splitlines()[e.line - 1].replace(prefix, "")
                if expected_exc is not None:
                    want = expected_exc.get("message")
                    wrong_class = class_mismatch(expected_exc, e, rejected_statement=True)
                    if wrong_class:
                        raise _Failure(f"{wrong_class} (statement {i + 1}: {_first_line(msg, 400)})") from None
                    if message_matches(want, msg):
                        return
                    raise _Failure(f"expected exception message containing {json.dumps(want)} but statement "
                                   f"{i + 1} was rejected with: {_first_line(msg, 400)}") from None
                raise _Failure(f"{_statement_named(i, text, e.statement)} rejected: {_first_line(msg, 400)}"
                               ) from None
            for res in results:
                close = getattr(res, "close", None)
                if callable(close) and type(res).__name__ == "RowStream":
                    close()

        # inputs
        try:
            self._feed(engine, case, prefix, state)
        except StreamsqlError as e:
            msg = str(e).replace(prefix, "")
            if expected_exc is not None:
                wrong_class = class_mismatch(expected_exc, e, rejected_statement=False)
                if wrong_class:
                    raise _Failure(f"{wrong_class} ({_first_line(msg, 400)})") from None
                if message_matches(expected_exc.get("message"), msg):
                    return
                raise _Failure(f"expected exception message containing {json.dumps(expected_exc.get('message'))} "
                               f"but processing failed with: {_first_line(msg, 400)}") from None
            raise _Failure(f"processing failed: {_first_line(msg, 400)}") from None
        if expected_exc is not None:
            raise _Failure(f"expected exception {expected_exc.get('type', '')} "
                           f"{json.dumps(expected_exc.get('message', ''))} but the statements were accepted "
                           f"and the inputs processed")

        # outputs
        failures = self._check_outputs(engine, case, prefix) if case.outputs else self._check_no_outputs(engine, prefix)
        if failures:
            raise _Failure(failures)
        post = check_post(case.post, engine.catalog)
        if post:
            raise _Failure(post)

    def _raw(self) -> RawProducer:
        from streamsql.conformance.rawproduce import RawProducer

        with self._seq_lock:
            if self._producer is None:
                self._producer = RawProducer(self.bootstrap)
            return self._producer

    def _feed_first(self, engine: Engine, case: QttCase, prefix: str, state: dict[str, Any]) -> bool:
        """Produce every input now, before the first query starts, if each input topic is declared
        by a source and has one partition (one join task, so one arrival order). Returns whether
        it did; ``state["fed_first"]`` keeps the queries already running."""
        topics = {prefix + str(r.get("topic")) for r in case.inputs}
        for topic in topics:
            source = _source_for_topic(engine.catalog, topic, prefer_declared=True)
            # a TIMESTAMP column orders the join's records by a value, not by the inputs' times
            if source is None or source.timestamp_column:
                return False
            if engine.admin.partitions(topic) != 1:
                return False
        self._produce(engine, case, prefix, state.get("schemas") or {}, after_each=None)
        state["fed_first"] = set(engine.queries)
        return True

    def _check_fed_first(self, engine: Engine, case: QttCase, prefix: str, running_before: set[str]) -> None:
        """Raises :class:`_FeedRecordAtATime` unless the queries give the same results fed first:
        every query reading several topics started after the inputs were in, reads only input
        topics and orders them as listed (ties to its right side); no query writes an input
        topic; no topic has two writers."""
        catalog = engine.catalog
        inputs = {prefix + str(r.get("topic")) for r in case.inputs}

        def topic_of(name: str) -> str | None:
            src = catalog.sources.get(name)
            return src.topic if src is not None else None

        sinks = [topic_of(q.sink) for q in catalog.queries.values()]
        if len(sinks) != len(set(sinks)) or inputs & set(sinks):
            raise _FeedRecordAtATime()
        prefixed = [{**r, "topic": prefix + str(r.get("topic"))} for r in case.inputs]
        for qid, q in catalog.queries.items():
            plan = engine.queries.plans.get(qid)
            if plan is not None and _has_foreign_key_join(plan.steps):
                raise _FeedRecordAtATime()
            if len(q.sources) < 2:
                continue
            topics = {topic_of(s) for s in q.sources}
            if (qid in running_before or not topics <= inputs
                    or any(catalog.sources[s].timestamp_column for s in q.sources if s in catalog.sources)):
                raise _FeedRecordAtATime()
            # the join's own topics, in input order, as its operator will order them
            winner = _join_tie_winner(plan.steps) if plan is not None else None
            if not merge_order_is_input_order([r for r in prefixed if r["topic"] in topics], tie_winner=winner):
                raise _FeedRecordAtATime()

    def _feed(self, engine: Engine, case: QttCase, prefix: str, state: dict[str, Any]) -> None:
        schemas: dict[str, dict[str, tuple[int, str]]] = state.get("schemas") or {}
        if not case.inputs:
            if engine.queries:
                engine.wait_until_idle()
            return
        if "fed_first" in state:
            self._check_fed_first(engine, case, prefix, state["fed_first"])
        else:
            writers: dict[str, int] = {}
            for q in engine.catalog.queries.values():
                writers[q.sink] = writers.get(q.sink, 0) + 1
            # a join reads two topics: what it emits depends on which side's record came first
            one_at_a_time = any(n > 1 for n in writers.values()) or any(
                len(q.sources) > 1 for q in engine.catalog.queries.values())
            self._produce(engine, case, prefix, schemas, after_each=engine.wait_until_idle if one_at_a_time else None)
        engine.wait_until_idle()
        if engine.queries:
            self._warm = True
        failed = engine.failed_queries()
        if failed:
            raise StreamsqlError(f"Query {failed[0][0]} failed: {failed[0][1]}")

    def _produce(self, engine: Engine, case: QttCase, prefix: str, schemas: dict[str, dict[str, tuple[int, str]]],
                 after_each: Callable[[], None] | None) -> None:
        """Encode and write every input record, in order; ``after_each`` runs after each one."""
        from streamsql.catalog import source_formats

        partitions: dict[str, int] = {}
        producer = self._raw()
        for rec in case.inputs:
            topic = prefix + str(rec.get("topic"))
            source = _source_for_topic(engine.catalog, topic, prefer_declared=True)
            if source is not None:
                declared = schemas.get(topic, {})
                key = encode_with(source_formats.key_spec(source), rec.get("key"), declared.get("key"))
                value = encode_with(source_formats.value_spec(source), rec.get("value"), declared.get("value"))
            else:
                key, value = raw_encode(rec.get("key")), raw_encode(rec.get("value"))
            if rec.get("window") and key is not None:
                key += window_suffix(rec.get("window"))
            headers = [(str(h.get("KEY")), base64.b64decode(h["VALUE"]) if h.get("VALUE") is not None else None)
                       for h in (rec.get("headers") or [])]
            if topic not in partitions:
                partitions[topic] = engine.admin.partitions(topic)
            part = partition_for(key, partitions[topic])
            try:
                producer.produce(topic, part, key, value, int(rec.get("timestamp", 0) or 0), headers)
            except Exception as e:  # noqa: BLE001
                raise _Failure(f"cannot produce input to topic '{rec.get('topic')}': {e}") from None
            if after_each is not None:
                after_each()

    def _check_no_outputs(self, engine: Engine, prefix: str) -> str | None:
        """A case with no expected output records expects its queries to write none: every topic a
        query of the case writes must be empty (ksqlDB's harness compares only the topics the
        outputs name, so an empty list there checks nothing; ours is stricter)."""
        sinks = sorted({engine.catalog.sources[q.sink].topic for q in engine.catalog.queries.values()
                        if q.sink in engine.catalog.sources})
        for topic in sinks:
            records = engine.admin.read_all(topic)
            if records:
                shown = "; ".join(describe_record(r.key, r.value, r.timestamp) for r in records[:3])
                return (f"expected no output records but topic '{topic.replace(prefix, '')}' has {len(records)}: "
                        f"{shown}{' ...' if len(records) > 3 else ''}")
        return None

    def _check_outputs(self, engine: Engine, case: QttCase, prefix: str) -> str | None:
        from streamsql.catalog import source_formats

        by_topic: dict[str, list[dict[str, Any]]] = {}
        for rec in case.outputs:
            by_topic.setdefault(str(rec.get("topic")), []).append(rec)
        # an expected record without a timestamp matches any (ksqlDB's Record.timestamp(): "empty if
        # timestamp can be anything")
        default_ts = None
        topics = engine.admin.topics()
        for name, expected in by_topic.items():
            topic = prefix + name
            if topic not in topics:
                return f"output topic '{name}' was not created (expected {len(expected)} records)"
            source = _source_for_topic(engine.catalog, topic, prefer_declared=False)
            kspec = source_formats.key_spec(source) if source is not None else None
            vspec = source_formats.value_spec(source) if source is not None else None
            key_fmt = _side_format(kspec)
            value_fmt = _side_format(vspec)
            windowed = any(e.get("window") for e in expected)
            actual = []
            for r in engine.admin.read_all(topic):
                raw_key = r.key
                window: dict[str, Any] | None = None
                if windowed and raw_key is not None and len(raw_key) >= 8:
                    if source is not None and (source.window_type or "").upper() == "SESSION" and len(raw_key) >= 16:
                        end, start = struct.unpack(">qq", raw_key[-16:])
                        raw_key, window = raw_key[:-16], {"start": start, "end": end, "type": "session"}
                    else:
                        (start,) = struct.unpack(">q", raw_key[-8:])
                        raw_key, window = raw_key[:-8], {"start": start}
                        if source is not None and source.window_size_ms:
                            window["end"] = start + int(source.window_size_ms)
                        window["type"] = "time"
                key = decode_with(kspec, raw_key) if kspec is not None and kspec.name.upper() != "NONE" else (
                    None if raw_key is None else decode_with(None, raw_key))
                value = decode_with(vspec, r.value)
                actual.append(ActualRecord(r.partition, r.offset, key, value, r.timestamp, window, r.headers))
            problem = compare_topic(name, expected, actual, key_fmt, value_fmt, default_ts)
            if problem:
                return problem
        return None

    # -- cleanup -------------------------------------------------------------------------------

    def _cleanup(self, state: dict[str, Any], prefix: str) -> None:
        engine = state.get("engine")
        if engine is not None:
            try:
                engine.close()
            except Exception:  # noqa: BLE001
                pass
        data_dir = state.get("data_dir")
        if data_dir is not None:
            shutil.rmtree(data_dir, ignore_errors=True)
        try:
            self._delete_topics(prefix)
        except Exception:  # noqa: BLE001 - best effort; the broker is in-memory anyway
            pass

    def _delete_topics(self, prefix: str) -> None:
        from streamsql.kafka.clients import client_config

        if self._admin_client is None:
            self._admin_client = admin_client(client_config(self.bootstrap))
        md = self._admin_client.list_topics(timeout=10)
        names = [n for n in md.topics if n.startswith(prefix)]
        if names:
            self._admin_client.delete_topics(names, operation_timeout=10)  # not awaited


def _side_format(spec: FormatSpec | None) -> SideFormat:
    if spec is None:
        return SideFormat("raw")
    name = spec.name.upper()
    if name in ("JSON", "AVRO", "JSON_SR", "PROTOBUF", "PROTOBUF_NOSR"):
        return SideFormat("json")
    if name == "DELIMITED":
        return SideFormat("text", spec.delimiter or ",")
    if name == "KAFKA":
        return SideFormat("typed")
    return SideFormat("raw")


def _source_for_topic(catalog: Any, topic: str, prefer_declared: bool) -> Any:
    matches = [s for s in catalog.sources.values() if s.topic == topic]
    if not matches:
        return None
    if prefer_declared:
        matches.sort(key=lambda s: s.writer_query is not None)
    else:
        matches.sort(key=lambda s: s.writer_query is None)
    return matches[0]


def _statement_named(index: int, script: str, failed: str | None) -> str:
    """The rejected statement as a failure names it: ``statement 3`` (a QTT case's third), or,
    when the case's statement text is a script of several (``streamsql test --sql``), ``statement
    at line 12`` (where the rejected one starts)."""
    at = script.find(failed) if failed else -1
    if at < 0 or failed is None or failed.strip().rstrip(";").strip() == script.strip().rstrip(";").strip():
        return f"statement {index + 1}"
    return f"statement at line {script.count(chr(10), 0, at) + 1}"


def _first_line(text: str, limit: int = 300) -> str:
    line = text.strip().split("\n")[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."
