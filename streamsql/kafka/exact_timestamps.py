"""Writing records at the exact timestamp they carry, 0 included: librdkafka reads timestamp 0
as "now", ksqlDB writes it as is, so those records go through kafka-python here (the sink's
records at timestamp 0, and INSERT VALUES at ROWTIME 0).

The conformance runner's inputs have their own wire-protocol producer
(``conformance/rawproduce.py``): kafka-python's ``send`` refuses the null header values the
corpus writes at timestamp 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from streamsql.errors import KafkaError
from streamsql.kafka import settings as kafka_settings
from streamsql.kafka.clients import FLUSH_TIMEOUT_S
from streamsql.kafka.options import SinkOptions

if TYPE_CHECKING:
    from confluent_kafka import Producer


def require_topic(producer: Producer, topic: str) -> None:
    """Fail unless ``topic`` exists, asked through librdkafka (auto-creation off). kafka-python's
    metadata requests make tansu create a missing topic whatever the client asks, so the
    exact-timestamp path would resurrect a deleted sink topic with the broker's default
    partition count."""
    from confluent_kafka import KafkaException

    try:
        meta = producer.list_topics(topic, timeout=FLUSH_TIMEOUT_S).topics.get(topic)
    except KafkaException as e:
        raise KafkaError(f"cannot write to topic '{topic}': {e}") from None
    if meta is None or meta.error is not None:
        raise KafkaError(f"cannot write to topic '{topic}': "
                         f"{meta.error.str() if meta is not None and meta.error else 'topic does not exist'}")


#: how long a send waits for a topic's metadata before failing (kafka-python's default is 60 s)
EXACT_MAX_BLOCK_MS = 10_000


def write_exact_timestamps(opts: SinkOptions, keys: list[bytes | None], values: list[bytes | None],
                            timestamps: list[int | None], headers: list[Any]) -> int:
    """Write records through kafka-python, which sends the timestamp it is given (0 included).
    Same guarantees as the main path: idempotent, acks=all, Java-compatible murmur2 partitioning.

    One producer per call, closed after it (10-40 ms on a local broker; the path is taken only
    for records at timestamp 0): a cached kafka-python producer keeps refreshing the metadata of
    every topic it ever wrote to, and tansu answers such a request for a deleted topic by creating
    it again, with its default partition count."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaError as KPError

    producer = None
    futures = []
    try:
        producer = KafkaProducer(bootstrap_servers=opts.bootstrap.split(","), acks="all",
                                 enable_idempotence=True, linger_ms=5, key_serializer=_key_bytes,
                                 allow_auto_create_topics=False, max_block_ms=EXACT_MAX_BLOCK_MS,
                                 **kafka_settings.kafka_python({**kafka_settings.of(opts.bootstrap), **opts.kafka}))
        for k, v, ts, h in zip(keys, values, timestamps, headers):
            key = _NULL_KEY if k is None and v is None else k
            futures.append(producer.send(opts.topic, key=key, value=v, timestamp_ms=ts, headers=list(h) if h else None))
        producer.flush(FLUSH_TIMEOUT_S)
        for f in futures:
            f.get(timeout=FLUSH_TIMEOUT_S)
    except KPError as e:
        raise KafkaError(f"cannot write to topic '{opts.topic}': {e}") from None
    finally:
        if producer is not None:
            producer.close(FLUSH_TIMEOUT_S)
    return len(futures)


#: kafka-python refuses a record whose key and value are both null, which Kafka allows and ksqlDB
#: writes (a stream record with a null value and no key): it is sent with this key, which the
#: key serializer turns back into null.
_NULL_KEY = object()


def _key_bytes(key: Any) -> Any:
    return None if key is _NULL_KEY else key
