"""Deterministic sample data for the seed pipelines (``streamsql produce``, ``streamsql demo``).

Seeded generators, so a demo or benchmark run is repeatable: the same seed gives the same records.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator

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


#: seed 003's routes and cabins
_AIRPORTS = ("LHR", "IST", "JFK", "CDG", "DXB", "SIN", "FRA", "AMS", "MAD", "BCN")
_CABINS = ("Y", "W", "J", "F")


def flight_batches(count: int, seed: int = 3, quotes_per_batch: int = 20) -> Iterator[tuple[bytes | None, bytes, int]]:
    """Seed 003 flight searches as the source describes them: ``count`` messages without a key,
    each one search's quotes as a gzipped batch of CSV lines ``origin,destination,date,gbpprice,
    cabin`` (``LHR,IST,2020-08-01,169.99,Y``), 3 to ``2 * quotes_per_batch - 3`` lines per batch
    (``quotes_per_batch`` on average). queries/cheapest_flight.sql reads them."""
    import gzip

    rng = random.Random(seed)
    for i in range(count):
        origin = _AIRPORTS[rng.randrange(len(_AIRPORTS))]
        lines = []
        for _q in range(rng.randrange(3, max(4, 2 * quotes_per_batch - 2))):
            dest = _AIRPORTS[rng.randrange(len(_AIRPORTS))]
            price = round(rng.lognormvariate(5.0, 0.6), 2)
            lines.append(f"{origin},{dest},2026-03-{1 + rng.randrange(28):02d},{price},"
                         f"{_CABINS[rng.randrange(len(_CABINS))]}")
        yield None, gzip.compress("\n".join(lines).encode(), compresslevel=6, mtime=0), BASE_TIME_MS + 10 * i


def _md5_uuid(text: str) -> str:
    import hashlib
    import uuid

    return str(uuid.UUID(bytes=hashlib.md5(text.encode()).digest()))


def enrich_flight_batch(payload: bytes, partition: int, offset: int, timestamp_ms: int,
                        topic: str = "cflight_searches") -> list[str]:
    """Seed 003's transform step in Python, as queries/cheapest_flight.sql does it in SQL (the
    benchmarks' reference): the batch's non-empty lines, each with its uuid, the batch uuid
    and the batch timestamp appended. The uuids are UUID-formatted MD5s of
    ``<topic>/<partition>/<offset>`` (the batch) and ``<batch uuid>/<line number from 1>``."""
    import datetime as dt
    import gzip

    batch = _md5_uuid(f"{topic}/{partition}/{offset}")
    stamp = dt.datetime.fromtimestamp(timestamp_ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    lines = [line for line in gzip.decompress(payload).decode().split("\n") if line.strip()]
    return [f"{line},{_md5_uuid(f'{batch}/{n}')},{batch},{stamp}" for n, line in enumerate(lines, 1)]


#: seed 000's services and a Zipf-like vocabulary: a few words are heavy hitters
_SERVICES = ("api", "web", "auth", None)
_WORDS = ("get", "post", "users", "orders", "200", "404", "500", "timeout", "retry", "cache", "miss", "hit",
          "login", "logout", "token", "expired", "db", "slow", "query", "payment", "refund", "search",
          "alves", "silva", "santos", "kafka", "spark", "stream", "table", "window")


def log_lines(count: int, seed: int = 0) -> Iterator[tuple[bytes | None, bytes, int]]:
    """Seed 000 log lines: (no key, JSON ``{"service", "msg"}``, timestamp ms), 3 to 10 words per
    line drawn with Zipf-like weights (queries/heavy_hitters.sql reads them)."""
    rng = random.Random(seed)
    weights = [1 / (rank ** 1.2) for rank in range(1, len(_WORDS) + 1)]
    for i in range(count):
        words = rng.choices(_WORDS, weights=weights, k=rng.randint(3, 10))
        value = {"service": _SERVICES[rng.randrange(len(_SERVICES))], "msg": " ".join(words)}
        yield None, json.dumps(value, separators=(",", ":")).encode(), BASE_TIME_MS + 10 * i


#: each sample's generator of (key, value, timestamp ms) records
SAMPLES: dict[str, Callable[..., Iterator[tuple[bytes | None, bytes, int]]]] = {
    "payments": payments, "flights": flight_batches, "logs": log_lines}


def produce(bootstrap_servers: str, sample: str, topic: str, count: int, partitions: int = 2,
            seed: int | None = None) -> int:
    """Create ``topic`` if needed and write ``count`` records of ``sample`` to it."""
    from confluent_kafka import Producer

    from streamsql.kafka.admin import KafkaAdmin
    from streamsql.kafka.clients import client_config, produce_waiting

    gen = SAMPLES[sample]
    admin = KafkaAdmin(bootstrap_servers)
    if not admin.topic_exists(topic):
        admin.create_topic(topic, partitions)
    producer = Producer(client_config(bootstrap_servers, {"partitioner": "murmur2_random", "linger.ms": 5,
                                                          "enable.idempotence": True}))
    n = 0
    for key, value, ts in gen(count) if seed is None else gen(count, seed):
        produce_waiting(producer, topic, {"value": value, "key": key, "timestamp": ts})
        n += 1
    producer.flush(30)
    admin.close()
    return n
