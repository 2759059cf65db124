"""Deterministic sample data for the seed pipelines (``streamsql produce``, ``streamsql demo``).

Seeded generators, so a demo or benchmark run is repeatable: the same seed gives the same records.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

#: ms timestamp of the first generated record (2026-01-01T00:00:00Z); records are 10 ms apart.
BASE_TIME_MS = 1_767_225_600_000


def payments(count: int, seed: int = 2) -> Iterator[tuple[bytes, bytes, int]]:
    """Seed 002 payments: (key, JSON value, timestamp ms). About 5% score above 0.8."""
    rng = random.Random(seed)
    currencies = ["GBP", "EUR", "USD"]
    for i in range(count):
        suspicious = rng.random() < 0.05
        fraud = round(rng.uniform(0.8001, 1.0) if suspicious else 0.8 * rng.betavariate(0.6, 3.0), 4)
        value = {
            "accountId": f"acct-{rng.randrange(1000)}",
            "amount": round(rng.lognormvariate(3.5, 1.0), 2),
            "currency": currencies[i % len(currencies)],
            "merchant": f"m-{rng.randrange(200)}",
            "fraudProbability": fraud,
        }
        yield f"pay-{i:08d}".encode(), json.dumps(value, separators=(",", ":")).encode(), BASE_TIME_MS + 10 * i


SAMPLES = {"payments": payments}


def produce(bootstrap_servers: str, sample: str, topic: str, count: int, partitions: int = 2, seed: int | None = None) -> int:
    """Create ``topic`` if needed and write ``count`` records of ``sample`` to it."""
    from confluent_kafka import Producer

    from streamsql.kafka.admin import KafkaAdmin, client_config

    gen = SAMPLES[sample]
    admin = KafkaAdmin(bootstrap_servers)
    if not admin.topic_exists(topic):
        admin.create_topic(topic, partitions)
    producer = Producer(client_config(bootstrap_servers, {"partitioner": "murmur2_random", "linger.ms": 5,
                                                          "enable.idempotence": True}))
    n = 0
    for key, value, ts in gen(count) if seed is None else gen(count, seed):
        while True:
            try:
                producer.produce(topic, value=value, key=key, timestamp=ts)
                break
            except BufferError:
                producer.poll(0.1)
        n += 1
    producer.flush(30)
    admin.close()
    return n
