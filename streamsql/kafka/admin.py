"""Kafka administration and small synchronous helpers: topics, one-off produce, read-to-end.

Every client here takes its settings from ``clients.py``. Shared with the streaming source
(``offsets.py``): :class:`EndOffsets` – the *true* end offset of each partition. Kafka's
ListOffsets(LATEST) is the end offset on Apache Kafka, but the embedded broker (tansu 0.6)
answers with the base offset of the last record batch + 1, so 5 records produced in one batch
look like end offset 1. Fetch responses carry the correct high watermark, so a long-lived
consumer that fetches at the tail of every partition learns the real end; the answer is the
maximum of both, which is right on both brokers.

Every confluent-kafka failure is re-raised as :class:`streamsql.errors.KafkaError` with text a
user can act on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from confluent_kafka import Consumer, KafkaException, Message, Producer, TopicPartition
from confluent_kafka import KafkaError as _CKError
from confluent_kafka.admin import AdminClient, ClusterMetadata, NewTopic, OffsetSpec

from streamsql.errors import KafkaError
from streamsql.kafka.clients import client_config, common_settings, consumer_config
from streamsql.kafka.collector import admin_client, shared_admin_client

DEFAULT_TIMEOUT_S = 15.0


#: librdkafka's errors for a TLS handshake or a SASL login that failed (each retry fails alike)
_SECURITY_ERRORS = frozenset({_CKError._SSL, _CKError._AUTHENTICATION, _CKError.SASL_AUTHENTICATION_FAILED})


def kafka_error(what: str, err: BaseException | _CKError | None) -> KafkaError:
    """``what`` (e.g. ``"cannot create topic 'x'"``) plus librdkafka's reason."""
    if isinstance(err, KafkaException) and err.args:
        err = err.args[0]
    if isinstance(err, _CKError):
        reason = err.str() or err.name()
    else:
        reason = str(err) if err is not None else "unknown error"
    return KafkaError(f"{what}: {reason}")


def _is_eof(err: _CKError | None) -> bool:
    return err is not None and err.code() == _CKError._PARTITION_EOF


@dataclass(frozen=True)
class Record:
    """One Kafka record as PRINT and tests see it."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


def topic_partitions(consumer: Consumer | AdminClient, topic: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> list[int]:
    """Partition ids of ``topic`` (sorted); KafkaError ``Topic 'x' does not exist`` if missing."""
    try:
        md = consumer.list_topics(topic, timeout=timeout_s)
    except KafkaException as e:
        raise kafka_error(f"cannot read metadata of topic '{topic}'", e) from None
    tm = md.topics.get(topic)
    if tm is None or (tm.error is not None and tm.error.code() == _CKError.UNKNOWN_TOPIC_OR_PART):
        raise KafkaError(f"Topic '{topic}' does not exist")
    if tm.error is not None:
        raise kafka_error(f"cannot read metadata of topic '{topic}'", tm.error)
    return sorted(tm.partitions)


#: what librdkafka answers a listing of a partition its metadata cache does not know yet
#: (only this: a topic that does not exist is said at once, not after a wait)
_STALE_METADATA = {_CKError._UNKNOWN_PARTITION}


#: how long :meth:`EndOffsets.partitions` trusts its last answer
PARTITIONS_TTL_S = 1.0


class EndOffsets:
    """True end offsets (next offset to be written) of one topic's partitions.

    Holds one long-lived consumer and uses the process's shared AdminClient (collector.py);
    create once per source and reuse (each call is a few milliseconds: one ListOffsets request
    plus one fetch round trip).

    :meth:`ends` lists offsets (right on Kafka), then *probes*: it positions the consumer one
    record before the listed end of every partition and waits until each partition has answered
    one fetch (a record or end-of-partition). The consumer's cached high watermark is then at
    least as fresh as the listing, and on tansu it is the real end that ListOffsets misses.
    """

    def __init__(self, bootstrap_servers: str, topic: str, extra: Mapping[str, Any] | None = None,
                 probe_timeout_s: float = 5.0) -> None:
        self.topic = topic
        self.probe_timeout_s = probe_timeout_s
        extra = dict(extra or {})
        self._isolation = str(extra.get("isolation.level", "read_uncommitted"))
        self._consumer = Consumer(consumer_config(bootstrap_servers, {
            **extra, "fetch.wait.max.ms": 10, "queued.max.messages.kbytes": 1024,
            "max.partition.fetch.bytes": 65536,
        }))
        self._admin = shared_admin_client(client_config(bootstrap_servers, common_settings(extra)))
        self._known: dict[int, int] = {}  # highest end returned per partition
        self._probed: dict[int, int] = {}  # listed end at the last successful probe
        self._partitions: tuple[float, list[int]] | None = None  # (when asked, partitions)

    def partitions(self) -> list[int]:
        """The topic's partitions, asked of Kafka at most every :data:`PARTITIONS_TTL_S` (a
        metadata request each time cost a pull query ~0.5 ms of its ~2.5); a partition added
        since is seen that much later, as librdkafka's own metadata refresh sees it."""
        now = time.monotonic()
        if self._partitions is None or now - self._partitions[0] >= PARTITIONS_TTL_S:
            self._partitions = (now, topic_partitions(self._consumer, self.topic))
        return list(self._partitions[1])

    def _list(self, parts: Iterable[int], spec: OffsetSpec) -> dict[int, int]:
        from confluent_kafka import IsolationLevel

        req = {TopicPartition(self.topic, p): spec for p in parts}
        if not req:
            return {}
        iso = IsolationLevel.READ_COMMITTED if self._isolation == "read_committed" else IsolationLevel.READ_UNCOMMITTED
        deadline = time.monotonic() + self.probe_timeout_s
        while True:
            try:
                futures = self._admin.list_offsets(req, isolation_level=iso, request_timeout=DEFAULT_TIMEOUT_S)
                return {tp.partition: f.result().offset for tp, f in futures.items()}
            except KafkaException as e:
                stale = e.args and isinstance(e.args[0], _CKError) and e.args[0].code() in _STALE_METADATA
                if not stale or time.monotonic() >= deadline:
                    raise kafka_error(f"cannot list offsets of topic '{self.topic}'", e) from None
            # the shared client's metadata predates the topic as it is now (just created, or
            # dropped and created again with more partitions): ask for the topic's metadata,
            # which refreshes its cache, and list again
            try:
                self._admin.list_topics(self.topic, timeout=DEFAULT_TIMEOUT_S)
            except KafkaException:
                pass
            time.sleep(0.05)

    def earliest(self, parts: Iterable[int], exact_within_s: float | None = None) -> dict[int, int]:
        """Oldest offset still in each partition (0 unless retention deleted records).

        A listed start above 0 is checked by fetching from offset 0: tansu sometimes lists a
        partition's start as the base of its second batch when its first batches were written
        by several producers at once (records below it are still there and fetchable), and a
        reader starting there silently skips them. On Kafka, offset 0 below the log start is
        out of range and the consumer resets to the log start, so the check agrees with the
        listing. A partition that does not answer in time keeps its listed start, unless
        ``exact_within_s`` is given: then the check is repeated, with longer waits, until every
        partition answered, and a partition still silent after that many seconds raises (a reader
        that must not skip records would rather fail than start late)."""
        listed = self._list(parts, OffsetSpec.earliest())
        doubtful = [p for p, off in listed.items() if off > 0]
        deadline = None if exact_within_s is None else time.monotonic() + exact_within_s
        wait = self.probe_timeout_s
        while doubtful:
            fetched = self._first_offsets(doubtful, wait)
            listed.update({p: min(listed[p], off) for p, off in fetched.items()})
            doubtful = [p for p in doubtful if p not in fetched]
            if not doubtful or deadline is None:
                break
            if time.monotonic() >= deadline:
                raise KafkaError(f"cannot read the first offsets of topic '{self.topic}' partitions {doubtful}: "
                                 f"no answer within {exact_within_s:.0f}s")
            wait = min(max(wait * 2, 0.1), max(deadline - time.monotonic(), 0.05))
        return listed

    def _first_offsets(self, parts: Iterable[int], wait_s: float) -> dict[int, int]:
        """The offset of the first record (or of the end, if none) a fetch from offset 0 of
        every partition in ``parts`` returns."""
        tps = [TopicPartition(self.topic, p, 0) for p in parts]
        self._consumer.assign(tps)
        pending = {tp.partition for tp in tps}
        first: dict[int, int] = {}
        deadline = time.monotonic() + wait_s
        try:
            while pending and time.monotonic() < deadline:
                for m in self._consumer.consume(1000, 0.005):
                    err = m.error()
                    p, off = m.partition(), m.offset()
                    if (err is not None and not _is_eof(err)) or p not in pending or off is None:
                        continue
                    first[p] = off
                    pending.discard(p)
        finally:
            self._consumer.unassign()
        return first

    def ends(self, parts: Iterable[int] | None = None, exact_within_s: float | None = None) -> dict[int, int]:
        """End offset of every partition (all current ones when ``parts`` is None), never lower
        than a value this object returned before.

        A partition whose probe is not answered in time keeps its listed end (on tansu possibly
        short of the true end: fine for a trigger, which asks again). With ``exact_within_s``
        the probe is repeated, with longer waits, until every partition answered, and raises
        after that many seconds: a reader that stops at the end must not stop short of it."""
        parts = sorted(self.partitions() if parts is None else parts)
        listed = self._list(parts, OffsetSpec.latest())
        # Probe only partitions whose listed end moved since their last probe. On tansu the
        # listed value is "last batch's base + 1", so it moves whenever a batch is appended and
        # an unchanged value means an unchanged true end; on Kafka it is the true end itself.
        # An idle query thus costs one ListOffsets request per trigger, no fetches.
        stale = {p: off for p, off in listed.items() if self._probed.get(p) != off}
        learned: dict[int, int] = {}
        deadline = None if exact_within_s is None else time.monotonic() + exact_within_s
        wait = self.probe_timeout_s
        while stale:
            found, answered = self._probe(stale, wait)
            for p, off in found.items():
                learned[p] = max(learned.get(p, 0), off)
            for p in answered:
                self._probed[p] = stale[p]
            stale = {p: off for p, off in stale.items() if p not in answered}
            if not stale or deadline is None:
                break
            if time.monotonic() >= deadline:
                raise KafkaError(f"cannot read the end offsets of topic '{self.topic}' partitions {sorted(stale)}: "
                                 f"no answer within {exact_within_s:.0f}s")
            wait = min(max(wait * 2, 0.1), max(deadline - time.monotonic(), 0.05))
        out = {p: max(listed.get(p, 0), learned.get(p, 0), self._known.get(p, 0)) for p in parts}
        self._known.update(out)
        return out

    def _probe(self, listed: Mapping[int, int], wait_s: float) -> tuple[dict[int, int], set[int]]:
        """Fetch once from ``end - 1`` on every partition in ``listed``. Returns what the fetch
        responses say each end is (the cached high watermark, or offset+1 of the last record
        seen if higher) and the partitions that answered before the timeout."""
        start = {p: max(max(off, self._known.get(p, 0)) - 1, 0) for p, off in listed.items()}
        tps = [TopicPartition(self.topic, p, o) for p, o in start.items()]
        self._consumer.assign(tps)
        pending = set(start)
        learned: dict[int, int] = {}
        deadline = time.monotonic() + wait_s
        try:
            while pending and time.monotonic() < deadline:
                for m in self._consumer.consume(1000, 0.005):
                    err = m.error()
                    if err is not None and not _is_eof(err):
                        if err.code() == _CKError.UNKNOWN_TOPIC_OR_PART:
                            raise KafkaError(f"Topic '{self.topic}' does not exist")
                        continue
                    p, off = m.partition(), m.offset()
                    pending.discard(p)
                    if err is None:
                        assert p is not None and off is not None  # a record has both
                        learned[p] = max(learned.get(p, 0), off + 1)
            for tp in tps:
                _, hwm = self._consumer.get_watermark_offsets(tp, cached=True)
                if hwm is not None and hwm > learned.get(tp.partition, 0):
                    learned[tp.partition] = hwm
        finally:
            self._consumer.unassign()  # no background fetching between calls
        return learned, set(start) - pending

    def close(self) -> None:
        try:
            self._consumer.close()
        except Exception:  # noqa: BLE001 - best effort on shutdown
            pass


class _SecurityErrors:
    """The admin client's ``error_cb``: remembers the last TLS or authentication failure.

    A separate object, not a bound method of :class:`KafkaAdmin`: the client keeps its
    callback, and a callback holding the admin would make a reference cycle (see
    :meth:`KafkaAdmin.close`)."""

    def __init__(self) -> None:
        self.message: str | None = None
        self.at = 0.0  # time.monotonic() of the last one

    def __call__(self, err: _CKError) -> None:
        if err.code() in _SECURITY_ERRORS:
            self.message, self.at = err.str(), time.monotonic()


_acknowledged = 0
_acknowledged_lock = threading.Lock()


def acknowledged_writes() -> int:
    """Records :meth:`KafkaAdmin.produce` wrote that Kafka acknowledged, in this process, by any
    admin client (it only grows): counted as each is acknowledged, before ``produce`` or
    ``flush`` returns. A pull query's catch-up asks Kafka again only when this or the committed
    micro-batches grew (``TableStore.catch_up``)."""
    return _acknowledged


class KafkaAdmin:
    """Synchronous administration for the engine and its surfaces (CREATE/DROP, SHOW TOPICS,
    INSERT VALUES, PRINT)."""

    def __init__(self, bootstrap_servers: str, config: Mapping[str, Any] | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.timeout_s = timeout_s
        self._extra = dict(config or {})
        self._security = _SecurityErrors()
        conf: dict[str, Any] = {**client_config(bootstrap_servers, self._extra), "error_cb": self._security}
        self._client: AdminClient | None = admin_client(conf)
        self._producer: Producer | None = None
        #: several clients' INSERT VALUES run at once (the server): one producer is made
        self._producer_lock = threading.Lock()

    @property
    def security_error(self) -> str | None:
        """The last TLS or authentication failure librdkafka reported for the cluster: such a
        failure repeats on every retry, so a call gives up with it instead of timing out."""
        return self._security.message

    @property
    def _admin(self) -> AdminClient:
        if self._client is None:
            raise KafkaError(f"the Kafka admin client of {self.bootstrap_servers} is closed")
        return self._client

    # -- topics ---------------------------------------------------------------------------------

    def _metadata(self, topic: str | None = None) -> ClusterMetadata:
        started = time.monotonic()
        deadline = started + self.timeout_s
        while True:
            try:
                return self._admin.list_topics(topic, timeout=min(1.0, max(0.1, deadline - time.monotonic())))
            except KafkaException as e:
                self._admin.poll(0)  # serves error_cb
                if self.security_error is not None and self._security.at >= started:
                    raise KafkaError(f"cannot reach Kafka at {self.bootstrap_servers}: {self.security_error}"
                                     ) from None
                if time.monotonic() >= deadline:
                    raise kafka_error(f"cannot reach Kafka at {self.bootstrap_servers}", e) from None

    def topics(self) -> dict[str, int]:
        """Every topic (internal ones included) → partition count."""
        md = self._metadata()
        return {name: len(t.partitions) for name, t in sorted(md.topics.items()) if t.error is None}

    def topic_exists(self, name: str) -> bool:
        return name in self.topics()

    def partitions(self, topic: str) -> int:
        """Partition count; KafkaError ``Topic 'x' does not exist`` when missing."""
        return len(topic_partitions(self._admin, topic, self.timeout_s))

    def replicas(self, topic: str) -> int:
        """Replicas of the topic's first partition (ksqlDB's ASSERT TOPIC reads that one)."""
        md = self._metadata(topic)
        tm = md.topics.get(topic)
        if tm is None or tm.error is not None or not tm.partitions:
            raise KafkaError(f"Topic '{topic}' does not exist")
        return len(tm.partitions[min(tm.partitions)].replicas)

    def create_topic(self, name: str, partitions: int = 1, replicas: int = 1,
                     config: Mapping[str, str] | None = None) -> None:
        """Create ``name``; fine if it already exists with ``partitions`` partitions."""
        existing = self.topics().get(name)
        if existing is None:
            new = NewTopic(name, num_partitions=partitions, replication_factor=replicas,
                           config={k: str(v) for k, v in (config or {}).items()})
            future = self._admin.create_topics([new], operation_timeout=self.timeout_s)[name]
            try:
                future.result(timeout=self.timeout_s)
            except KafkaException as e:
                if e.args[0].code() != _CKError.TOPIC_ALREADY_EXISTS:
                    raise kafka_error(f"cannot create topic '{name}'", e) from None
            self._await_metadata(name, present=True)
            existing = self.partitions(name)
        if existing != partitions:
            raise KafkaError(
                f"A Kafka topic with the name '{name}' already exists, with different partition count. "
                f"Existing partitions: {existing}, requested: {partitions}")

    def add_partitions(self, name: str, total: int) -> None:
        """Grow ``name`` to ``total`` partitions (Kafka cannot shrink a topic)."""
        from confluent_kafka.admin import NewPartitions

        future = self._admin.create_partitions([NewPartitions(name, total)],
                                               operation_timeout=self.timeout_s)[name]
        try:
            future.result(timeout=self.timeout_s)
        except KafkaException as e:
            raise kafka_error(f"cannot grow topic '{name}' to {total} partitions", e) from None
        deadline = time.monotonic() + self.timeout_s
        while self.partitions(name) < total and time.monotonic() < deadline:
            time.sleep(0.02)

    def delete_topic(self, name: str) -> None:
        """Delete ``name``; KafkaError if it does not exist.

        This process's cached readers are closed first (:func:`streamsql.kafka.reading.close_consumers`):
        a consumer that fetched the topic moments before it is deleted can take the whole process
        down on tansu (docs/reliability.md, "A deleted topic and a reading consumer")."""
        from streamsql.kafka.reading import close_consumers  # its decoding brings PySpark: on use

        close_consumers(self.bootstrap_servers)
        future = self._admin.delete_topics([name], operation_timeout=self.timeout_s)[name]
        try:
            future.result(timeout=self.timeout_s)
        except KafkaException as e:
            if e.args[0].code() == _CKError.UNKNOWN_TOPIC_OR_PART:
                raise KafkaError(f"Topic '{name}' does not exist") from None
            raise kafka_error(f"cannot delete topic '{name}'", e) from None
        self._await_metadata(name, present=False)

    def _await_metadata(self, name: str, present: bool) -> None:
        """Topic creation/deletion is asynchronous in the cluster; wait until metadata agrees so
        the next statement sees it."""
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            if (name in self.topics()) == present:
                return
            time.sleep(0.02)

    def end_offsets(self, topic: str) -> dict[int, int]:
        """Partition → offset the next record will get (the true end, :class:`EndOffsets`)."""
        ends = EndOffsets(self.bootstrap_servers, topic, self._extra)
        try:
            return ends.ends()
        finally:
            ends.close()

    def cluster_id(self) -> str:
        return str(self._metadata().cluster_id)

    # -- produce --------------------------------------------------------------------------------

    def produce(self, topic: str, key: bytes | None, value: bytes | None, timestamp_ms: int | None = None,
                headers: Iterable[tuple[str, bytes | None]] | None = None, partition: int | None = None,
                flush: bool = True) -> None:
        """Write one record (INSERT INTO ... VALUES). Key → partition like the Java client
        (murmur2). Waits for the acknowledgement unless ``flush=False`` (then call :meth:`flush`)."""
        if timestamp_ms == 0 and partition is None:
            # librdkafka reads timestamp 0 as "now"; the exact-timestamp path writes it (imported
            # here: its options bring the formats' descriptions, which administration needs not)
            from streamsql.kafka.exact_timestamps import write_exact_timestamps
            from streamsql.kafka.options import SinkOptions

            self.flush()
            write_exact_timestamps(SinkOptions(self.bootstrap_servers, topic), [key], [value], [0],
                                    [list(headers) if headers else None])
            self._count_acknowledged()
            return
        with self._producer_lock:
            if self._producer is None:
                self._producer = Producer(client_config(self.bootstrap_servers, {
                    **self._extra, "enable.idempotence": True, "partitioner": "murmur2_random", "linger.ms": 0}))
        errors: list[Any] = []

        def on_delivery(err: _CKError | None, _msg: Message) -> None:
            if err is not None:
                errors.append(err)
            else:
                self._count_acknowledged()

        kwargs: dict[str, Any] = {"key": key, "value": value, "on_delivery": on_delivery}
        if timestamp_ms is not None:
            kwargs["timestamp"] = int(timestamp_ms)
        if headers:
            kwargs["headers"] = list(headers)
        if partition is not None:
            kwargs["partition"] = partition
        try:
            self._producer.produce(topic, **kwargs)
        except (KafkaException, BufferError) as e:
            raise kafka_error(f"cannot produce to topic '{topic}'", e) from None
        if flush:
            self.flush()
        if errors:
            raise kafka_error(f"cannot produce to topic '{topic}'", errors[0])

    @staticmethod
    def _count_acknowledged() -> None:
        global _acknowledged
        with _acknowledged_lock:
            _acknowledged += 1

    def flush(self) -> None:
        """Wait for every record produced to be acknowledged. Past the timeout, records not yet
        sent are withdrawn; records already sent cannot be, and Kafka may still store them when
        it answers again (a broker that froze mid-request does): the error says which."""
        if self._producer is not None:
            left = self._producer.flush(self.timeout_s)
            if left:
                self._producer.purge(in_queue=True, in_flight=False)
                self._producer.poll(0)  # the withdrawn records' delivery reports
                sent = len(self._producer)
                withdrawn = left - sent
                raise KafkaError(f"{left} record(s) not acknowledged by Kafka within {self.timeout_s:.0f}s"
                                 + (f"; {withdrawn} withdrawn" if withdrawn else "")
                                 + (f"; {sent} already sent may still be written when Kafka answers again"
                                    if sent else ""))

    # -- read -----------------------------------------------------------------------------------

    def iter_records(self, topic: str, from_beginning: bool = True, follow: bool = False,
                     timeout_s: float = DEFAULT_TIMEOUT_S, limit: int | None = None,
                     last: int | None = None) -> Iterator[Record]:
        """Records of every partition, partition by partition interleaved as Kafka returns them.

        Without ``follow`` it stops at the true end of every partition as of the call; with
        ``follow`` it keeps waiting for new records until the caller stops iterating (PRINT).
        ``from_beginning=False`` starts at the end (only meaningful with ``follow``); ``last=N``
        starts N records before each partition's end (the latest ones).
        """
        ends_probe = EndOffsets(self.bootstrap_servers, topic, self._extra)
        consumer = Consumer(consumer_config(self.bootstrap_servers, self._extra))
        try:
            parts = ends_probe.partitions()
            # exact, or an error: a reader that stops at the end must neither stop short of it
            # nor start past a partition's first records
            exact = None if follow else timeout_s
            ends = ends_probe.ends(parts, exact_within_s=exact)
            starts = ends_probe.earliest(parts, exact_within_s=exact) if from_beginning else dict(ends)
            if last is not None:
                starts = {p: max(starts[p], ends[p] - last) for p in parts}
            consumer.assign([TopicPartition(topic, p, starts[p]) for p in parts])
            pending = {p for p in parts if starts[p] < ends[p]}
            count = 0
            deadline = time.monotonic() + timeout_s
            while follow or pending:
                if not follow and time.monotonic() > deadline:
                    raise KafkaError(f"timed out reading topic '{topic}' to its end after {timeout_s:.0f}s")
                for m in consumer.consume(500, 0.1):
                    err = m.error()
                    p, off = m.partition(), m.offset()
                    if err is not None:
                        if _is_eof(err):
                            if not follow:
                                assert p is not None and off is not None  # an EOF event carries both
                                if off >= ends[p]:
                                    pending.discard(p)
                            continue
                        raise kafka_error(f"cannot read topic '{topic}'", err)
                    assert p is not None and off is not None  # a record has both
                    if not follow and off >= ends[p]:
                        pending.discard(p)
                        continue
                    # a consumed record's headers are (name, bytes) pairs; the stubs also allow the
                    # producer's forms (a dict, str values)
                    headers = cast(list[tuple[str, bytes | None]], m.headers() or [])
                    yield Record(topic, p, off, m.timestamp()[1], m.key(), m.value(), list(headers))
                    count += 1
                    if limit is not None and count >= limit:
                        return
                    if not follow and off + 1 >= ends[p]:
                        pending.discard(p)
                if not follow and pending:
                    # a range can end on a transaction marker or a compaction gap: position() tells
                    for tp in consumer.position([TopicPartition(topic, p) for p in pending]):
                        if tp.offset >= ends[tp.partition]:
                            pending.discard(tp.partition)
        finally:
            consumer.close()
            ends_probe.close()

    def read_all(self, topic: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
        """Every record from the beginning to the true end, ordered by (partition, offset)."""
        recs = list(self.iter_records(topic, from_beginning=True, timeout_s=timeout_s))
        return sorted(recs, key=lambda r: (r.partition, r.offset))

    def close(self) -> None:
        """Flush and release the clients now, in the calling thread.

        A librdkafka handle left to Python's cycle collector is destroyed in whatever thread
        the collector next runs in, librdkafka's own callback threads included, where
        destroying a handle aborts or crashes the process (confluent-kafka-python #1761, #2129):
        so nothing here is part of a reference cycle, and close drops the handles at once."""
        if self._producer is not None:
            self._producer.flush(self.timeout_s)
            self._producer = None
        self._client = None
