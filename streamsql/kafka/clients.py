"""Every librdkafka client's settings, and this process's cached producers: the one module the
admin client, the source's readers, the sink, transactions and the processing log take their
clients' configuration from (research/spark.md §3.4: quiet logs, no fetch back-off).

Nothing here imports another module of ``streamsql.kafka`` but the cluster settings
(``settings.py``), so each of those can use it without importing the others.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from streamsql.errors import KafkaError
from streamsql.kafka import settings

if TYPE_CHECKING:
    from confluent_kafka import Producer

#: librdkafka log level for every client we create: warnings and worse. Level 6 (info) prints a
#: "Disconnected" line for every idle connection the broker closes.
LOG_LEVEL = 4
#: how long a producer's flush waits for Kafka's acknowledgements
FLUSH_TIMEOUT_S = 120.0


def client_config(bootstrap_servers: str, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The base librdkafka settings for any client, with ``extra`` (user settings) on top."""
    # Never create topics as a side effect of a metadata request: tansu does so by default,
    # which would turn a misspelt topic into a new empty one instead of an error.
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap_servers, "log_level": LOG_LEVEL,
                            "allow.auto.create.topics": False}
    conf.update(settings.of(bootstrap_servers))  # the cluster's security settings (kafka/settings.py)
    conf.update(extra or {})
    return conf


def common_settings(extra: Mapping[str, Any] | None) -> dict[str, Any]:
    """The subset of user settings every kind of client shares (security, client id): what a
    producer or admin client may take from a consumer's pass-through settings."""
    return {k: v for k, v in (extra or {}).items()
            if settings.is_client_setting(k) or k.startswith(("client.", "broker.", "metadata."))}


def consumer_config(bootstrap_servers: str, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Settings for an assign()-only consumer that reads exact offset ranges.

    * ``fetch.queue.backoff.ms=1``: librdkafka 2.x otherwise waits 1 s whenever its local queue
      is "full", which made large backlogs 4× slower (research/spark.md §3.4). Not 0: at 0 the
      broker thread re-checks a full queue without pause, spinning while the caller decodes
      what it consumed — in a range reader's task that thread burnt 0.7-1.4 CPU-s per 500k
      records against 0.1 at 1 ms, with the same wall time (docs/performance.md, session 38).
    * ``enable.partition.eof``: reaching the end is an event, so a range that ends at the log
      end (or on a transaction marker) terminates without a timeout.
    * ``auto.offset.reset=earliest``: a start offset that retention already deleted resumes at
      the oldest record still there instead of jumping to the end.
    """
    base = {
        "group.id": "streamsql-reader",  # required by librdkafka; never joined (assign() only)
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
        "fetch.queue.backoff.ms": 1,
        "queued.min.messages": 200000,
        "fetch.wait.max.ms": 100,
    }
    base.update(extra or {})
    return client_config(bootstrap_servers, base)


def producer_config(bootstrap: str, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """An idempotent producer that partitions keys as the Java client does (``murmur2_random``,
    so ksqlDB and Java producers agree on partitions), with ``extra`` on top."""
    conf: dict[str, Any] = {
        "enable.idempotence": True,
        "acks": "all",
        "partitioner": "murmur2_random",
        "linger.ms": 5,
        "batch.num.messages": 10000,
        "queue.buffering.max.messages": 500000,
        "compression.type": "none",
    }
    conf.update(extra or {})
    return client_config(bootstrap, conf)


_PRODUCERS: dict[tuple[str, tuple[tuple[str, str], ...]], Producer] = {}
_PRODUCERS_LOCK = threading.Lock()


def cached_producer(bootstrap: str, extra: Mapping[str, Any] | None = None) -> Producer:
    """This process's producer for ``bootstrap`` and ``extra`` librdkafka settings (an
    idempotent producer's start-up costs ~0.5 s, research/spark.md §3.3; the sink's tasks and
    the processing log share them)."""
    from confluent_kafka import Producer

    settings = dict(extra or {})
    key = (bootstrap, tuple(sorted((k, str(v)) for k, v in settings.items())))
    with _PRODUCERS_LOCK:
        p = _PRODUCERS.get(key)
        if p is None:
            p = Producer(producer_config(bootstrap, settings))
            _PRODUCERS[key] = p
        return p


def drop_producer(p: Producer) -> None:
    """Forget a producer after a fatal error (e.g. idempotence state lost); the next write
    starts a fresh one."""
    with _PRODUCERS_LOCK:
        for k, v in list(_PRODUCERS.items()):
            if v is p:
                del _PRODUCERS[k]


def close_producers(bootstrap: str) -> None:
    """Forget this process's producers of the cluster at ``bootstrap``, their unsent records
    purged: for a cluster that is gone while the process lives on (an embedded broker stopped),
    whose producers would otherwise retry it, and log each failure, until the process ends."""
    with _PRODUCERS_LOCK:
        closing = [p for key, p in _PRODUCERS.items() if key[0] == bootstrap]
        for key in [key for key in _PRODUCERS if key[0] == bootstrap]:
            del _PRODUCERS[key]
    for p in closing:
        try:
            p.purge()
        except Exception:  # noqa: BLE001 - already unusable: dropping it is all that is left
            pass


def produce_waiting(producer: Any, topic: str, kwargs: dict[str, Any]) -> None:
    """``produce`` with back-pressure: wait for deliveries when the local queue is full (the one
    copy of this loop: the sink, the sample producer and the benchmarks use it)."""
    from confluent_kafka import KafkaException

    while True:
        try:
            producer.produce(topic, **kwargs)
            return
        except BufferError:
            producer.poll(0.05)
        except KafkaException as e:
            raise KafkaError(f"cannot write to topic '{topic}': {e.args[0].str()}") from None
