"""Workloads: a deterministic input, the streamsql SQL, and the same pipeline for every other system.

A workload carries everything each system needs, so adding W2–W5 means adding one
:class:`Workload` to :data:`WORKLOADS`:

* ``generate(count, seed)`` → ``(key, value, timestamp_ms)`` records (produced once per run);
* ``sql(input_topic, output_topic)`` → the statements streamsql runs (a persistent query);
* ``reference()`` → a fresh per-record function ``(key, value) -> outputs emitted`` in plain
  Python. It is the ``ceiling-json`` work, and summed over the input it gives the number of
  records the output topic must hold when a system is done (for an aggregation that emits
  changes: the number of updates a pipeline writes without a record cache);
* ``quix(sdf, output_topic)`` → the same pipeline on a Quix Streams ``StreamingDataFrame``;
* for an aggregation with EMIT CHANGES, whose output count depends on batching (streamsql's record
  cache writes the latest value per key per micro-batch), ``final()`` → an accumulator of the
  expected final value per output key over the input, and ``output_state(key, value)`` → an
  output record as ``(output key, value)`` in the same form: a system is done when the latest
  record of every expected key carries its final value.
"""

from __future__ import annotations

import gzip
import json
import random
import re
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from streamsql import samples
from streamsql.seeds import FUNCTIONS_DIR, PIPELINES_DIR

Record = tuple[bytes | None, bytes | None, int]


class FinalReference(Protocol):
    """The expected final state of an aggregation's output, built over the input records."""

    def add(self, key: bytes | None, value: bytes | None, timestamp: int) -> None: ...

    def result(self) -> dict[str, Any]:
        """Output key → final value, in the JSON-native form ``output_state`` gives."""
        ...


@dataclass(frozen=True)
class Workload:
    name: str
    title: str
    generate: Callable[[int, int], Iterator[Record]]
    sql: Callable[[str, str], str]
    reference: Callable[[], Callable[[bytes | None, bytes | None], int]]
    #: the same pipeline on Quix Streams; None where the harness has no peer version (Nexmark
    #: q3-q8: their reference is Flink's published per-core figure, ``flink_per_core``)
    quix: Callable[[Any, Any], Any] | None
    seed: int = 2
    partitions: int = 2
    #: whether the low-rate latency probe means anything (not for windows that close after minutes,
    #: nor for inputs without a unique key per record, which the probe matches outputs by)
    latency: bool = True
    #: how the Quix Streams app deserialises input values ("json", or "bytes" for gzipped batches)
    quix_value_format: str = "json"
    #: a second input, produced first into ``<input topic>_table`` (W5's customers): records for
    #: an input of ``count`` records
    table: Callable[[int], Iterator[Record]] | None = None
    #: an aggregation with EMIT CHANGES: the expected final value per output key (a fresh
    #: accumulator fed every input record). When given, a system is done when every expected key's
    #: latest output record carries its final value, however many records it took
    final: Callable[[], FinalReference] | None = None
    #: an output record (Kafka key and value bytes, as either system writes it) → (output key,
    #: value in ``final``'s form); the one place where the systems' outputs are normalised
    output_state: Callable[[bytes | None, bytes | None], tuple[str, Any]] | None = None
    #: Nexmark: Flink's input events per second per core for this query (nexmark/nexmark's
    #: reference run, ../shared/research/landscape.md §2.2), printed beside streamsql's
    flink_per_core: int | None = None
    #: the workload this one is measured against in the same run (the TABLE filter's STREAM
    #: twin): the harness prints streamsql's records/s of this one over the twin's
    twin: str | None = None

    @property
    def record_cache(self) -> bool:
        """Whether streamsql's record cache changes what this workload writes (an aggregation
        that emits changes): only then is ``streamsql-nocache`` a different system."""
        return self.final is not None


# --- W1: payments JSON → fraud filter (seed pipeline 002, queries/fraud_filter.sql) ---------------

def seed_sql(file: str, workload: str, substitutions: list[tuple[str, str]], stop_at: str | None = None) -> str:
    """A seed pipeline from queries/ as shipped (up to the ``stop_at`` marker), pointed at the run's
    topics: each (pattern, replacement) must match exactly once, or the file changed shape."""
    text = (PIPELINES_DIR / file).read_text()
    if stop_at is not None:
        text = text.split(stop_at)[0]
    for pattern, replacement in substitutions:
        text, n = re.subn(pattern, replacement, text, flags=re.IGNORECASE)
        if n != 1:
            raise RuntimeError(f"queries/{file} changed shape; update benchmarks/workloads.py {workload}")
    return text


def _w1_sql(input_topic: str, output_topic: str) -> str:
    """queries/fraud_filter.sql as shipped, pointed at the run's topics."""
    return seed_sql("fraud_filter.sql", "W1", [
        (r"KAFKA_TOPIC\s*=\s*'payments'", f"KAFKA_TOPIC = '{input_topic}'"),
        (r"(CREATE STREAM fraudulent_payments)\s+AS", rf"\1 WITH (KAFKA_TOPIC = '{output_topic}') AS")])


def _w1_reference() -> Callable[[bytes | None, bytes | None], int]:
    loads = json.loads

    def process(_key: bytes | None, value: bytes | None) -> int:
        return 1 if value is not None and loads(value)["fraudProbability"] > 0.8 else 0

    return process


def _w1_quix(sdf: Any, output_topic: Any) -> Any:
    sdf = sdf.filter(lambda v: v["fraudProbability"] > 0.8)
    sdf.to_topic(output_topic)
    return sdf


W1 = Workload(
    name="W1",
    title="payments JSON → fraud filter (seed 002)",
    generate=lambda count, seed: samples.payments(count, seed),
    sql=_w1_sql,
    reference=_w1_reference,
    quix=_w1_quix,
)

# --- W3: keyed sensor readings → SUM per key per 1-minute tumbling window (EMIT FINAL) -----------

W3_WINDOW_MS = 60_000
W3_GRACE_MS = 10_000


def w3_keys(count: int) -> int:
    """Distinct keys for ``count`` records: 1,000 at scale, fewer for smoke runs (about 50 records
    per key, so every key spans several windows)."""
    return max(1, min(1000, count // 50))


def w3_readings(count: int, seed: int = 3) -> Iterator[Record]:
    """``count`` records: readings 1 ms apart over ``w3_keys(count)`` sensors, then one sentinel per
    sensor just past the last reading window's end + grace. The sentinels close every earlier
    window (stream time moves past window end + grace), so an EMIT FINAL pipeline is done when it
    has emitted one row per (sensor, window) of the readings; their own windows stay open. Not
    later: a jump beyond the window store's retention drops the open windows unemitted, as Kafka
    Streams' segmented store does (and so does streamsql)."""
    rng = random.Random(seed)
    keys = w3_keys(count)
    readings = max(0, count - keys)
    for i in range(readings):
        ts = samples.BASE_TIME_MS + i
        sensor = f"sensor-{rng.randrange(keys):04d}"
        value = {"reading": round(rng.uniform(0.0, 100.0), 3), "ts": ts}
        yield sensor.encode(), json.dumps(value, separators=(",", ":")).encode(), ts
    last = samples.BASE_TIME_MS + max(readings - 1, 0)
    end = last // W3_WINDOW_MS * W3_WINDOW_MS + W3_WINDOW_MS + W3_GRACE_MS + 1
    for k in range(min(keys, count)):
        value = {"reading": 0.0, "ts": end, "sentinel": True}
        yield f"sensor-{k:04d}".encode(), json.dumps(value, separators=(",", ":")).encode(), end


def _w3_sql(input_topic: str, output_topic: str) -> str:
    return f"""SET 'auto.offset.reset' = 'earliest';
CREATE STREAM readings (sensor VARCHAR KEY, reading DOUBLE, ts BIGINT)
  WITH (KAFKA_TOPIC='{input_topic}', VALUE_FORMAT='JSON', TIMESTAMP='ts');
CREATE TABLE reading_sums WITH (KAFKA_TOPIC='{output_topic}') AS
  SELECT sensor, SUM(reading) AS total, COUNT(*) AS readings
  FROM readings WINDOW TUMBLING (SIZE {W3_WINDOW_MS // 1000} SECONDS, GRACE PERIOD {W3_GRACE_MS // 1000} SECONDS)
  GROUP BY sensor EMIT FINAL;
"""


def _w3_reference() -> Callable[[bytes | None, bytes | None], int]:
    """One output per (sensor, window) first seen among the readings (sentinels emit nothing)."""
    loads = json.loads
    seen: set[tuple[bytes | None, int]] = set()

    def process(key: bytes | None, value: bytes | None) -> int:
        if value is None:
            return 0
        v = loads(value)
        if v.get("sentinel"):
            return 0
        pair = (key, v["ts"] // W3_WINDOW_MS)
        if pair in seen:
            return 0
        seen.add(pair)
        return 1

    return process


def _w3_quix(sdf: Any, output_topic: Any) -> Any:
    sdf = sdf.apply(lambda v: v["reading"])
    sdf = sdf.tumbling_window(duration_ms=W3_WINDOW_MS, grace_ms=W3_GRACE_MS).sum().final()
    sdf.to_topic(output_topic)
    return sdf


W3 = Workload(
    name="W3",
    title="keyed readings → SUM per key per 1-min tumbling window, EMIT FINAL",
    generate=lambda count, seed: w3_readings(count, seed),
    sql=_w3_sql,
    reference=_w3_reference,
    quix=_w3_quix,
    seed=3,
    latency=False,
)


# --- W2: log lines → words → heavy hitters per service per minute (seed 000) --------------------

W2_SERVICES = ("api", "auth", "billing", "search")
W2_VOCABULARY = 2000


def w2_log_lines(count: int, seed: int = 0) -> Iterator[Record]:
    """Log lines ``{"service", "msg"}`` keyed by service, 3-12 words from a Zipf-like vocabulary,
    10 ms apart (so a run spans many 1-minute windows)."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(W2_VOCABULARY)]
    weights = [1.0 / (rank ** 1.1) for rank in range(1, W2_VOCABULARY + 1)]
    for i in range(count):
        service = W2_SERVICES[rng.randrange(len(W2_SERVICES))]
        msg = " ".join(rng.choices(words, weights=weights, k=rng.randint(3, 12)))
        yield service.encode(), json.dumps({"service": service, "msg": msg}, separators=(",", ":")).encode(), \
            samples.BASE_TIME_MS + 10 * i


def _w2_sql(input_topic: str, output_topic: str) -> str:
    """Statements 1 and 2 of queries/heavy_hitters.sql (cutter, heavy hitters) on the run's topics;
    the rest (the top 10 of every line per minute and its search documents) is left out so every
    system does the same work. The cutter's topic is
    the system's own (named after its output topic): shared, a second system's aggregation read
    the first one's words as well."""
    topics = (("log_lines", input_topic), ("log_words", f"{output_topic}_words"), ("heavy_hitters", output_topic))
    text = seed_sql("heavy_hitters.sql", "W2", [(rf"KAFKA_TOPIC\s*=\s*'{name}'", f"KAFKA_TOPIC = '{topic}'")
                                                for name, topic in topics], stop_at="-- 3.")
    return text.replace("PARTITIONS = 1", "PARTITIONS = 2")


def _w2_reference() -> Callable[[bytes | None, bytes | None], int]:
    """One heavy-hitters update per word (what the table emits without a record cache)."""
    loads = json.loads

    def process(_key: bytes | None, value: bytes | None) -> int:
        return len(loads(value)["msg"].lower().split()) if value is not None else 0

    return process


def _seed_module(name: str) -> Any:
    """A module of the repo's udfs/ directory (the seed functions the SQL calls), for the peer."""
    import importlib.util

    path = FUNCTIONS_DIR / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"bench_udfs_{name}", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


W2_WINDOW_MS = 60_000


def windowed_key(key: bytes, window_start: int) -> bytes:
    """Kafka Streams' windowed key (what ksqlDB writes for a tumbling window): the key's bytes, then
    the window start as an 8-byte big-endian long."""
    return key + struct.pack(">q", window_start)


class _W2Final:
    """The final heavy hitters per (service, 1-minute window): the seed ``HeavyHitters`` (the class
    behind the ``HEAVY_HITTERS`` UDAF) fed every word of the window in input order. Its estimates
    are count-min counts (integers, independent of the order); the top 10 could in principle
    depend on the order in which the candidate set saw the words, which the unit tests rule out
    for this input (shuffling a window's words gives the same top 10)."""

    def __init__(self) -> None:
        self._sketches = _seed_module("sketches")
        self._windows: dict[str, Any] = {}
        self._loads = json.loads

    def add(self, _key: bytes | None, value: bytes | None, timestamp: int) -> None:
        if value is None:
            return
        v = self._loads(value)
        service = v.get("service") or "all"
        out_key = f"{service}@{timestamp // W2_WINDOW_MS * W2_WINDOW_MS}"
        hh = self._windows.get(out_key)
        if hh is None:
            hh = self._windows[out_key] = self._sketches.HeavyHitters(10)
        for word in v["msg"].lower().split():
            hh.add(word)

    def result(self) -> dict[str, Any]:
        return {k: [[item, est] for item, est in hh.top()] for k, hh in self._windows.items()}


def _w2_output_state(key: bytes | None, value: bytes | None) -> tuple[str, Any]:
    """``service + 8-byte window start`` key (both systems) and ``{"TOP_WORDS": [{"ITEM",
    "ESTIMATE"}, ...]}`` → ``("service@start", [[item, estimate], ...])``."""
    if key is None or len(key) < 8:
        raise ValueError(f"W2 output key {key!r} is not a windowed key")
    (start,) = struct.unpack(">q", key[-8:])
    out_key = f"{key[:-8].decode()}@{start}"
    if value is None:
        return out_key, None
    return out_key, [[t["ITEM"], t["ESTIMATE"]] for t in json.loads(value)["TOP_WORDS"]]


def _w2_quix(sdf: Any, output_topic: Any) -> Any:
    """The same cutter and the same count-min heavy hitters (udfs/sketches.py) per message key
    (the service) per 1-minute tumbling window; window state kept JSON-serialisable. Written as
    ksqlDB writes the table: key ``service + 8-byte window start``, value ``{"TOP_WORDS": ...}``."""
    sketches = _seed_module("sketches")

    def restore(state: dict[str, Any]) -> Any:
        hh = sketches.HeavyHitters(10)
        hh.sketch.rows, hh.sketch.total, hh.candidates = state["rows"], state["n"], state["c"]
        return hh

    def save(hh: Any) -> dict[str, Any]:
        return {"rows": hh.sketch.rows, "n": hh.sketch.total, "c": hh.candidates}

    def reducer(state: dict[str, Any], word: str) -> dict[str, Any]:
        hh = restore(state)
        hh.add(word)
        return save(hh)

    def initializer(word: str) -> dict[str, Any]:
        hh = sketches.HeavyHitters(10)
        hh.add(word)
        return save(hh)

    # to_topic's key function sees only the value: the windowed key of the record being processed
    # (the app processes one record at a time through the whole pipeline) is kept here
    current_key: list[bytes] = [b""]

    def top_words(window: dict[str, Any], key: bytes, _timestamp: int, _headers: Any) -> dict[str, Any]:
        current_key[0] = windowed_key(key, window["start"])
        return {"TOP_WORDS": [{"ITEM": i, "ESTIMATE": e} for i, e in restore(window["value"]).top()]}

    sdf = sdf.apply(lambda v: v["msg"].lower().split(), expand=True)
    sdf = sdf.tumbling_window(duration_ms=W2_WINDOW_MS).reduce(reducer=reducer, initializer=initializer).current()
    sdf = sdf.apply(top_words, metadata=True)
    sdf.to_topic(output_topic, key=lambda _value: current_key[0])
    return sdf


W2 = Workload(
    name="W2",
    title="log lines → words → heavy hitters per service per minute (seed 000, Python UDF + UDAF)",
    generate=lambda count, seed: w2_log_lines(count, seed),
    sql=_w2_sql,
    reference=_w2_reference,
    quix=_w2_quix,
    seed=0,
    latency=False,
    final=_W2Final,
    output_state=_w2_output_state,
)


# --- W4: flight searches (gzipped CSV batches) → enriched batches → cheapest quote per batch (seed 003)

def _w4_sql(input_topic: str, output_topic: str) -> str:
    """queries/cheapest_flight.sql as shipped (the transform, the enriched batches, the cheapest
    quote per batch) on the run's topics: the intermediate ones named after the output topic."""
    return seed_sql("cheapest_flight.sql", "W4", [
        (r"KAFKA_TOPIC\s*=\s*'cflight_searches'", f"KAFKA_TOPIC = '{input_topic}'"),
        (r"KAFKA_TOPIC\s*=\s*'cflight_batches'", f"KAFKA_TOPIC = '{output_topic}_batches'"),
        *[(rf"KAFKA_TOPIC\s*=\s*'cflight_enriched'(,\s*VALUE_FORMAT\s*=\s*'{fmt}')",
           rf"KAFKA_TOPIC = '{output_topic}_enriched'\1") for fmt in ("KAFKA", "DELIMITED")],
        (r"KAFKA_TOPIC\s*=\s*'cflight_cheapest'", f"KAFKA_TOPIC = '{output_topic}'")])


def _w4_reference() -> Callable[[bytes | None, bytes | None], int]:
    """Decompress, split lines, parse the price: one update per quote (what the table emits
    without a record cache)."""

    def process(_key: bytes | None, value: bytes | None) -> int:
        if value is None:
            return 0
        return sum(1 for line in gzip.decompress(value).decode().split("\n") if line.strip())

    return process


class W4Final:
    """Per batch uuid: its number of quotes and its cheapest price (``QUOTES``, ``CHEAPEST_QUOTE``;
    a minimum of parsed prices is one of them, so it compares exactly). The batch uuid is the
    transform's (``samples.enrich_flight_batch``): W4's input has one partition, so a message's
    offset is the number of messages before it. Over ``partitions`` partitions (the scale-out
    benchmark) the messages are written round robin: the n-th goes to partition n % partitions
    at offset n // partitions."""

    def __init__(self, partitions: int = 1) -> None:
        self._state: dict[str, list[Any]] = {}
        self._partitions = partitions
        self._offset = 0

    def add(self, _key: bytes | None, value: bytes | None, timestamp: int) -> None:
        if value is None:
            return
        partition, offset = self._offset % self._partitions, self._offset // self._partitions
        for line in samples.enrich_flight_batch(value, partition, offset, timestamp):
            fields = line.split(",")
            price, batch = float(fields[3]), fields[6]
            s = self._state.get(batch)
            if s is None:
                self._state[batch] = [1, price]
            else:
                s[0] += 1
                if price < s[1]:
                    s[1] = price
        self._offset += 1

    def result(self) -> dict[str, Any]:
        return self._state


def _w4_output_state(key: bytes | None, value: bytes | None) -> tuple[str, Any]:
    """Key: the batch uuid (streamsql: the GROUP BY column as a KAFKA-format string; quixstreams:
    the key it writes, the same uuid). Value → ``[QUOTES, CHEAPEST_QUOTE]``, from streamsql's
    ``BATCH_UUID,CHEAPEST_QUOTE,QUOTES`` (the table inherits its source's DELIMITED value format,
    as in ksqlDB; DOUBLE as Java prints it, which ``float`` reads) or quixstreams'
    ``{"BATCH_UUID", "CHEAPEST_QUOTE", "QUOTES"}`` (JSON)."""
    if key is None:
        raise ValueError("W4 output record without a key")
    if value is None:
        return key.decode(), None
    if value.startswith(b"{"):
        v = json.loads(value)
        return key.decode(), [v["QUOTES"], v["CHEAPEST_QUOTE"]]
    _batch, cheapest, quotes = value.decode().split(",")
    return key.decode(), [int(quotes), float(cheapest)]


def _w4_quix(sdf: Any, output_topic: Any) -> Any:
    """The same transform per message (its partition and offset from Quix Streams' message
    context), the enriched batch gzipped, and the batch's cheapest quote: a message holds a whole
    batch, so the minimum needs no state. The gzipped enriched batch is made but not written (the
    peer has one output topic); streamsql writes it to Kafka as well."""
    from quixstreams import message_context

    def cheapest(value: bytes, _key: Any, timestamp: int, _headers: Any) -> dict[str, Any] | None:
        ctx = message_context()
        lines = samples.enrich_flight_batch(value, ctx.partition, ctx.offset, timestamp)
        if not lines:
            return None
        gzip.compress("\n".join(lines).encode(), mtime=0)  # the compressor's work
        fields = [line.split(",") for line in lines]
        return {"BATCH_UUID": fields[0][6], "CHEAPEST_QUOTE": min(float(f[3]) for f in fields),
                "QUOTES": len(fields)}

    sdf = sdf.apply(cheapest, metadata=True).filter(lambda v: v is not None)
    sdf.to_topic(output_topic, key=lambda v: v["BATCH_UUID"].encode())
    return sdf


W4 = Workload(
    name="W4",
    title="flight searches (gzipped CSV batches) → enriched batches → cheapest quote per batch (seed 003)",
    generate=lambda count, seed: samples.flight_batches(count, seed),
    sql=_w4_sql,
    reference=_w4_reference,
    quix=_w4_quix,
    seed=3,
    partitions=1,  # the batch uuid comes from the offset: the reference knows it with one partition
    latency=False,
    quix_value_format="bytes",
    final=W4Final,
    output_state=_w4_output_state,
)


# --- W5: orders enriched with their customer (stream-table LEFT JOIN) -------------------------------

def w5_customers_for(count: int) -> int:
    return max(1, min(10_000, count // 20))


def w5_customers(count: int) -> Iterator[Record]:
    """The customers table for ``count`` orders: one row per customer, all older than every order."""
    rng = random.Random(5)
    for c in range(w5_customers_for(count)):
        value = {"name": f"customer {c}", "tier": ("gold", "silver", "bronze")[rng.randrange(3)],
                 "country": ("GB", "TR", "US", "DE", "FR")[rng.randrange(5)]}
        yield f"cust-{c:05d}".encode(), json.dumps(value, separators=(",", ":")).encode(), samples.BASE_TIME_MS - 1000


def w5_orders(count: int, seed: int = 5) -> Iterator[Record]:
    """Orders keyed by customer id (co-partitioned with the table); 1 in 50 names an unknown
    customer (a LEFT join emits it with nulls)."""
    rng = random.Random(seed)
    customers = w5_customers_for(count)
    for i in range(count):
        cust = rng.randrange(customers + max(1, customers // 50))
        value = {"orderId": f"o-{i:08d}", "amount": round(rng.lognormvariate(3.0, 1.0), 2)}
        yield f"cust-{cust:05d}".encode(), json.dumps(value, separators=(",", ":")).encode(), samples.BASE_TIME_MS + i


def _w5_sql(input_topic: str, output_topic: str) -> str:
    return f"""SET 'auto.offset.reset' = 'earliest';
CREATE TABLE customers (cid VARCHAR PRIMARY KEY, name VARCHAR, tier VARCHAR, country VARCHAR)
  WITH (KAFKA_TOPIC='{input_topic}_table', VALUE_FORMAT='JSON');
CREATE STREAM orders (cid VARCHAR KEY, orderId VARCHAR, amount DOUBLE)
  WITH (KAFKA_TOPIC='{input_topic}', VALUE_FORMAT='JSON');
CREATE STREAM enriched_orders WITH (KAFKA_TOPIC='{output_topic}') AS
  SELECT o.cid, o.orderId AS order_id, o.amount AS amount, c.name AS name, c.tier AS tier, c.country AS country
  FROM orders o LEFT JOIN customers c ON o.cid = c.cid EMIT CHANGES;
"""


def _w5_reference() -> Callable[[bytes | None, bytes | None], int]:
    """Decode, look the customer up (a dict: the table), emit one enriched order per order."""
    loads = json.loads
    table = {k: loads(v) for k, v, _ in w5_customers(10**9)}

    def process(key: bytes | None, value: bytes | None) -> int:
        if value is None:
            return 0
        order = loads(value)
        customer = table.get(key) or {}
        order.update(customer)
        return 1

    return process


def _w5_quix(sdf: Any, output_topic: Any, table: Any = None) -> Any:
    """Quix Streams' stream-table enrichment: ``join_asof`` (the table's latest row per key at
    or before the order's timestamp), LEFT."""
    sdf = sdf.join_asof(table, how="left", on_merge=lambda order, customer: {**order, **(customer or {})})
    sdf.to_topic(output_topic)
    return sdf


W5 = Workload(
    name="W5",
    title="orders → LEFT JOIN customers table (stream-table enrichment)",
    generate=lambda count, seed: w5_orders(count, seed),
    sql=_w5_sql,
    reference=_w5_reference,
    quix=_w5_quix,
    seed=5,
    latency=False,
    table=w5_customers,
)


# --- Nexmark q0–q2 over a bid stream (stateless) -------------------------------------------------

NEXMARK_CHANNELS = ("Google", "Facebook", "Baidu", "Apple")
#: q2's auction filter, as in the Flink/Arroyo Nexmark suites (``auction % 123 = 0``)
Q2_MODULUS = 123


def nexmark_bids(count: int, seed: int = 4) -> Iterator[Record]:
    """Nexmark ``Bid`` events (auction, bidder, price, channel, url, dateTime, extra) as JSON, in
    the shape of the Nexmark generator: hot auctions and bidders (about half the bids go to a small
    hot set), prices in cents, one bid per millisecond. Deterministic for a seed."""
    rng = random.Random(seed)
    first_auction, first_person = 1000, 1000
    for i in range(count):
        open_auctions = first_auction + i // 10  # auctions open over time, as people bid on recent ones
        if rng.random() < 0.5:
            auction = open_auctions - (rng.randrange(100) // 10) * 10  # hot auctions
        else:
            auction = open_auctions - rng.randrange(min(open_auctions - first_auction, 1000) + 1)
        bidder = first_person + (rng.randrange(50) if rng.random() < 0.5 else rng.randrange(10 + i // 20))
        channel = NEXMARK_CHANNELS[rng.randrange(len(NEXMARK_CHANNELS))]
        ts = samples.BASE_TIME_MS + i
        value = {"auction": auction, "bidder": bidder, "price": int(rng.lognormvariate(7.0, 1.0)) + 1,
                 "channel": channel, "url": f"https://www.nexmark.com/{channel.lower()}/item.htm?query=1&id={auction}",
                 "dateTime": ts, "extra": "x" * rng.randrange(8, 40)}
        yield None, json.dumps(value, separators=(",", ":")).encode(), ts


_BID_DDL = """SET 'auto.offset.reset' = 'earliest';
CREATE STREAM bid (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR,
  dateTime BIGINT, extra VARCHAR) WITH (KAFKA_TOPIC='{input_topic}', VALUE_FORMAT='JSON');
"""


def _nexmark_sql(select: str) -> Callable[[str, str], str]:
    def sql(input_topic: str, output_topic: str) -> str:
        return _BID_DDL.format(input_topic=input_topic) + (
            f"CREATE STREAM nexmark_out WITH (KAFKA_TOPIC='{output_topic}') AS {select} EMIT CHANGES;\n")

    return sql


def _count_all() -> Callable[[bytes | None, bytes | None], int]:
    loads = json.loads

    def process(_key: bytes | None, value: bytes | None) -> int:
        return 1 if value is not None and loads(value) is not None else 0

    return process


def _q2_reference() -> Callable[[bytes | None, bytes | None], int]:
    loads = json.loads

    def process(_key: bytes | None, value: bytes | None) -> int:
        return 1 if value is not None and loads(value)["auction"] % Q2_MODULUS == 0 else 0

    return process


def _q0_quix(sdf: Any, output_topic: Any) -> Any:
    sdf.to_topic(output_topic)
    return sdf


def _q1_quix(sdf: Any, output_topic: Any) -> Any:
    sdf = sdf.apply(lambda v: {"AUCTION": v["auction"], "BIDDER": v["bidder"], "PRICE": 0.908 * v["price"],
                               "DATETIME": v["dateTime"], "EXTRA": v["extra"]})
    sdf.to_topic(output_topic)
    return sdf


def _q2_quix(sdf: Any, output_topic: Any) -> Any:
    sdf = sdf.filter(lambda v: v["auction"] % Q2_MODULUS == 0)
    sdf = sdf.apply(lambda v: {"AUCTION": v["auction"], "PRICE": v["price"]})
    sdf.to_topic(output_topic)
    return sdf


Q0 = Workload(name="Q0", title="Nexmark q0: pass-through of bids", generate=lambda c, s: nexmark_bids(c, s),
              sql=_nexmark_sql("SELECT * FROM bid"), reference=_count_all, quix=_q0_quix, seed=4,
              flink_per_core=155_000)
Q1 = Workload(name="Q1", title="Nexmark q1: currency conversion (price × 0.908)",
              generate=lambda c, s: nexmark_bids(c, s),
              sql=_nexmark_sql("SELECT auction, bidder, 0.908 * price AS price, dateTime, extra FROM bid"),
              reference=_count_all, quix=_q1_quix, seed=4, flink_per_core=158_000)
Q2 = Workload(name="Q2", title=f"Nexmark q2: bids of auctions with id % {Q2_MODULUS} = 0",
              generate=lambda c, s: nexmark_bids(c, s),
              sql=_nexmark_sql(f"SELECT auction, price FROM bid WHERE auction % {Q2_MODULUS} = 0"),
              reference=_q2_reference, quix=_q2_quix, seed=4, flink_per_core=175_000)


# --- Nexmark q3-q8 over the person / auction / bid event stream ------------------------------------
#
# Nexmark's generator writes one stream of events, 1 person : 3 auctions : 46 bids in every 50, and
# the Flink suite reads it through three views (person, auction, bid). Here the events are one
# topic of JSON ``{"event_type": 0|1|2, "person": {...}, "auction": {...}, "bid": {...}}`` (the
# other two members null), and each query derives the streams it reads with ``CREATE STREAM … AS
# SELECT … WHERE event_type = …`` — what a ksqlDB user writes for a view. Records/s count every
# input event, as Flink's per-core figures do. The queries are ksqlDB's dialect of Flink's
# (nexmark/nexmark's ``queries/q*.sql``); where ksqlDB cannot say the same thing the workload says
# what it measures instead (landscape.md §2.2); q6 (``ROW_NUMBER`` and ``OVER``) has no ksqlDB form.

NEXMARK_STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
NEXMARK_CITIES = ("Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Seattle", "Kent")
#: a person sells and bids on the auctions of the last persons and auctions made (recent, hot)
_RECENT = 20


def _mix(x: int) -> int:
    """A fixed integer hash (Knuth's multiplicative): attributes that are a function of an id, so
    a reference can check an event without having seen the others (the ceiling reads the two
    partitions in another order than they were produced)."""
    return (x * 2654435761) & 0xFFFFFFFF


_FIRST_ID = 1000


def nexmark_person_time(pid: int) -> int:
    """When person ``pid`` joined: people are every 50th event, from the first."""
    return samples.BASE_TIME_MS + (pid - _FIRST_ID) * 50


def nexmark_person_state(pid: int) -> str:
    return NEXMARK_STATES[_mix(pid) % len(NEXMARK_STATES)]


def nexmark_auction_range(aid: int) -> tuple[int, int]:
    """When auction ``aid`` opens (events 1-3 of every 50) and expires (2-20 s later)."""
    k = aid - _FIRST_ID
    opens = samples.BASE_TIME_MS + 50 * (k // 3) + 1 + k % 3
    return opens, opens + 2_000 + _mix(aid) % 18_000


def nexmark_events(count: int, seed: int = 6) -> Iterator[Record]:
    """Nexmark events in the generator's proportions (per 50 events: 1 person, 3 auctions, 46
    bids), one per millisecond. A seller is one of the last 20 people, so every auction's seller
    exists before it; a bid goes to one of the last 20 auctions. A person's state and an
    auction's time range are functions of their ids (``nexmark_person_state``,
    ``nexmark_auction_range``). Deterministic for a seed; unkeyed, as the generator writes."""
    rng = random.Random(seed)
    people = auctions = 0
    for i in range(count):
        ts = samples.BASE_TIME_MS + i
        slot = i % 50
        event: dict[str, Any] = {"event_type": 0, "person": None, "auction": None, "bid": None}
        if slot == 0:
            pid = _FIRST_ID + people
            people += 1
            event["person"] = {"id": pid, "name": f"person {pid}", "emailAddress": f"p{pid}@nexmark.com",
                               "creditCard": f"{rng.randrange(10**15, 10**16)}",
                               "city": NEXMARK_CITIES[rng.randrange(len(NEXMARK_CITIES))],
                               "state": nexmark_person_state(pid), "dateTime": ts,
                               "extra": "x" * rng.randrange(8, 40)}
        elif slot <= 3:
            aid = _FIRST_ID + auctions
            auctions += 1
            opens, expires = nexmark_auction_range(aid)
            assert opens == ts
            initial = int(rng.lognormvariate(6.0, 1.0)) + 1
            event.update(event_type=1, auction={
                "id": aid, "itemName": f"item {aid}", "description": "an item", "initialBid": initial,
                "reserve": initial * 2, "dateTime": ts, "expires": expires,
                "seller": _FIRST_ID + people - 1 - rng.randrange(min(people, _RECENT)),
                "category": 10 + rng.randrange(5), "extra": "x" * rng.randrange(8, 40)})
        else:
            auction = _FIRST_ID + auctions - 1 - rng.randrange(min(auctions, _RECENT))
            channel = NEXMARK_CHANNELS[rng.randrange(len(NEXMARK_CHANNELS))]
            event.update(event_type=2, bid={
                "auction": auction, "bidder": _FIRST_ID + rng.randrange(people),
                "price": int(rng.lognormvariate(7.0, 1.0)) + 1,
                "channel": channel, "url": f"https://www.nexmark.com/{channel.lower()}/item.htm?query=1&id={auction}",
                "dateTime": ts, "extra": "x" * rng.randrange(8, 40)})
        yield None, json.dumps(event, separators=(",", ":")).encode(), ts


_EVENTS_DDL = """SET 'auto.offset.reset' = 'earliest';
CREATE STREAM nexmark (event_type INT,
  person STRUCT<id BIGINT, name VARCHAR, emailAddress VARCHAR, creditCard VARCHAR, city VARCHAR, state VARCHAR,
                dateTime BIGINT, extra VARCHAR>,
  auction STRUCT<id BIGINT, itemName VARCHAR, description VARCHAR, initialBid BIGINT, reserve BIGINT,
                 dateTime BIGINT, expires BIGINT, seller BIGINT, category BIGINT, extra VARCHAR>,
  bid STRUCT<auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, dateTime BIGINT,
             extra VARCHAR>)
  WITH (KAFKA_TOPIC='{input_topic}', VALUE_FORMAT='JSON');
"""

#: the Flink suite's views, as derived streams (each one its own persistent query), on topics named
#: after the system's output topic: a second system or workload of the run must not read them
_VIEWS = {
    "person": "CREATE STREAM person WITH (KAFKA_TOPIC='{output_topic}_person') AS "
              "SELECT person->id AS id, person->name AS name, person->city AS city, person->state AS state, "
              "person->dateTime AS dateTime FROM nexmark WHERE event_type = 0 EMIT CHANGES;",
    "auction": "CREATE STREAM auction WITH (KAFKA_TOPIC='{output_topic}_auction') AS "
               "SELECT auction->id AS id, auction->seller AS seller, auction->category AS category, "
               "auction->dateTime AS dateTime, auction->expires AS expires "
               "FROM nexmark WHERE event_type = 1 EMIT CHANGES;",
    "bid": "CREATE STREAM bid WITH (KAFKA_TOPIC='{output_topic}_bid') AS "
           "SELECT bid->auction AS auction, bid->bidder AS bidder, bid->price AS price, bid->dateTime AS dateTime "
           "FROM nexmark WHERE event_type = 2 EMIT CHANGES;",
}


def _nexmark_events_sql(views: tuple[str, ...], query: str) -> Callable[[str, str], str]:
    """The events stream, the views ``views`` and ``query`` (``{output_topic}`` filled in)."""
    def sql(input_topic: str, output_topic: str) -> str:
        return (_EVENTS_DDL.format(input_topic=input_topic)
                + "".join(_VIEWS[v].format(output_topic=output_topic) + "\n" for v in views)
                + query.format(output_topic=output_topic) + "\n")

    return sql


def _nexmark_workload(name: str, title: str, views: tuple[str, ...], query: str, flink_per_core: int,
                      **completion: Any) -> Workload:
    """A Nexmark q3-q8 workload: the event stream, the views and the query; no peer version (its
    reference is Flink's per-core figure); ``completion``: the reference and, for an aggregation,
    ``final`` and ``output_state``."""
    return Workload(name=name, title=title, generate=lambda c, s: nexmark_events(c, s),
                    sql=_nexmark_events_sql(views, query), quix=None, seed=6, latency=False,
                    flink_per_core=flink_per_core, **completion)


def _events(value: bytes | None) -> dict[str, Any] | None:
    return json.loads(value) if value is not None else None


def _bids_times(updates: int) -> Callable[[bytes | None, bytes | None], int]:
    """A windowed aggregation of bids without a record cache: ``updates`` per bid (one per window
    it falls in)."""
    def process(_key: bytes | None, value: bytes | None) -> int:
        e = _events(value)
        return updates if e is not None and e["event_type"] == 2 else 0

    return process


# q3 -- local item suggestion: auctions of category 10 by sellers in OR, ID or CA. Flink joins the
# two streams without a bound; ksqlDB's stream-stream join needs WITHIN, and one hour covers every
# pair of the input (a seller is a recent person), so the output is Flink's.

def _q3_reference() -> Callable[[bytes | None, bytes | None], int]:
    def process(_key: bytes | None, value: bytes | None) -> int:
        e = _events(value)
        if e is None or e["event_type"] != 1 or e["auction"]["category"] != 10:
            return 0
        return 1 if nexmark_person_state(e["auction"]["seller"]) in ("OR", "ID", "CA") else 0

    return process


Q3 = _nexmark_workload(
    "Q3", "Nexmark q3: local item suggestion (auction ⋈ person, stream-stream WITHIN 1 HOUR)", ("person", "auction"), (
        "CREATE STREAM nexmark_out WITH (KAFKA_TOPIC='{output_topic}') AS "
        "SELECT P.id AS seller, P.name AS name, P.city AS city, P.state AS state, A.id AS id "
        "FROM auction A JOIN person P WITHIN 1 HOURS ON A.seller = P.id "
        "WHERE A.category = 10 AND (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA') EMIT CHANGES;"),
    152_000, reference=_q3_reference)


# q4 -- average closing price per category: the highest bid of each auction within its time range
# (a join and a MAX per auction), then the average of those per category, a table aggregation
# that retracts an auction's old maximum when it rises. Flink's join has no time bound but the
# auction's own range; ksqlDB's needs WITHIN: 20 s, the longest an auction is open.

def _long(data: bytes) -> int:
    return struct.unpack(">q", data[:8])[0]


class _Q4Final:
    """The average of each auction's highest in-range bid, per category."""

    def __init__(self) -> None:
        self._auctions: dict[int, tuple[int, int, int]] = {}  # id -> (category, opens, expires)
        self._best: dict[int, int] = {}

    def add(self, _key: bytes | None, value: bytes | None, _timestamp: int) -> None:
        e = _events(value)
        if e is None:
            return
        if e["event_type"] == 1:
            a = e["auction"]
            self._auctions[a["id"]] = (a["category"], a["dateTime"], a["expires"])
        elif e["event_type"] == 2:
            b = e["bid"]
            a = self._auctions.get(b["auction"])
            if a is not None and a[1] <= b["dateTime"] <= a[2]:
                self._best[b["auction"]] = max(self._best.get(b["auction"], b["price"]), b["price"])

    def result(self) -> dict[str, Any]:
        per: dict[int, list[int]] = {}
        for auction, price in self._best.items():
            per.setdefault(self._auctions[auction][0], []).append(price)
        return {str(c): round(sum(p) / len(p), 6) for c, p in per.items()}


def _q4_reference() -> Callable[[bytes | None, bytes | None], int]:
    """Updates of the average table without a record cache, approximately: one per in-range bid
    (each changes or confirms its auction's maximum, and so its category's average)."""
    def process(_key: bytes | None, value: bytes | None) -> int:
        e = _events(value)
        if e is None or e["event_type"] != 2:
            return 0
        opens, expires = nexmark_auction_range(e["bid"]["auction"])
        return 1 if opens <= e["bid"]["dateTime"] <= expires else 0

    return process


def _q4_output_state(key: bytes | None, value: bytes | None) -> tuple[str, Any]:
    if key is None:
        raise ValueError("Q4 output without a key")
    return str(_long(key)), None if value is None else round(json.loads(value)["AVG_PRICE"], 6)


Q4 = _nexmark_workload(
    "Q4", "Nexmark q4: average closing price per category (bid ⋈ auction, MAX per auction, AVG per category)",
    ("auction", "bid"), (
        "CREATE TABLE q4_closing WITH (KAFKA_TOPIC='{output_topic}_closing', KEY_FORMAT='JSON') AS "
        "SELECT A.id AS id, A.category AS category, MAX(B.price) AS final_price "
        "FROM bid B JOIN auction A WITHIN 20 SECONDS ON B.auction = A.id "
        "WHERE B.dateTime >= A.dateTime AND B.dateTime <= A.expires GROUP BY A.id, A.category EMIT CHANGES;\n"
        "CREATE TABLE nexmark_out WITH (KAFKA_TOPIC='{output_topic}', KEY_FORMAT='KAFKA') AS "
        "SELECT category, AVG(final_price) AS avg_price FROM q4_closing GROUP BY category EMIT CHANGES;"),
    34_000, reference=_q4_reference, final=_Q4Final, output_state=_q4_output_state)


# q5 -- hot items: bids per auction over 10-second windows advancing by 2 seconds. Flink then
# keeps the auctions whose count is the window's largest, a join of two aggregations on the
# window bounds that ksqlDB cannot express; this measures the hopping count, its heavy part.

Q5_SIZE_MS, Q5_ADVANCE_MS = 10_000, 2_000


class _Q5Final:
    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

    def add(self, _key: bytes | None, value: bytes | None, timestamp: int) -> None:
        e = _events(value)
        if e is None or e["event_type"] != 2:
            return
        auction = e["bid"]["auction"]
        start = max(0, timestamp - Q5_SIZE_MS + Q5_ADVANCE_MS) // Q5_ADVANCE_MS * Q5_ADVANCE_MS
        while start <= timestamp:
            k = f"{auction}@{start}"
            self._counts[k] = self._counts.get(k, 0) + 1
            start += Q5_ADVANCE_MS

    def result(self) -> dict[str, Any]:
        return dict(self._counts)


def _windowed_long_state(column: str) -> Callable[[bytes | None, bytes | None], tuple[str, Any]]:
    """A windowed table's output (BIGINT key + 8-byte window start) → ("key@start", column)."""
    def state(key: bytes | None, value: bytes | None) -> tuple[str, Any]:
        if key is None or len(key) != 16:
            raise ValueError(f"output key {key!r} is not a windowed BIGINT key")
        out_key = f"{_long(key)}@{_long(key[8:])}"
        return out_key, None if value is None else json.loads(value)[column]

    return state


Q5 = _nexmark_workload(
    "Q5", "Nexmark q5: hot items (bids per auction, HOPPING 10 s by 2 s)", ("bid",), (
        "CREATE TABLE nexmark_out WITH (KAFKA_TOPIC='{output_topic}') AS SELECT auction, COUNT(*) AS num FROM bid "
        "WINDOW HOPPING (SIZE 10 SECONDS, ADVANCE BY 2 SECONDS) GROUP BY auction EMIT CHANGES;"),
    22_000, reference=lambda: _bids_times(Q5_SIZE_MS // Q5_ADVANCE_MS), final=_Q5Final,
    output_state=_windowed_long_state("NUM"))


# q7 -- highest bid: the largest price of every 10-second window. Flink joins it back to the bids
# to return the winning bid's row; ksqlDB has no MAX_BY, so this measures the windowed maximum,
# grouped on one constant key (a global aggregation, as Flink's is).

Q7_SIZE_MS = 10_000


class _Q7Final:
    def __init__(self) -> None:
        self._max: dict[str, int] = {}

    def add(self, _key: bytes | None, value: bytes | None, timestamp: int) -> None:
        e = _events(value)
        if e is None or e["event_type"] != 2:
            return
        k = f"2@{timestamp // Q7_SIZE_MS * Q7_SIZE_MS}"
        self._max[k] = max(self._max.get(k, 0), e["bid"]["price"])

    def result(self) -> dict[str, Any]:
        return dict(self._max)


def _q7_output_state(key: bytes | None, value: bytes | None) -> tuple[str, Any]:
    """INT key (4 bytes) + window start."""
    if key is None or len(key) != 12:
        raise ValueError(f"Q7 output key {key!r} is not a windowed INT key")
    out_key = f"{struct.unpack('>i', key[:4])[0]}@{_long(key[4:])}"
    return out_key, None if value is None else json.loads(value)["MAXPRICE"]


Q7 = _nexmark_workload(
    "Q7", "Nexmark q7: highest bid per 10-second window (TUMBLING MAX)", (), (
        "CREATE TABLE nexmark_out WITH (KAFKA_TOPIC='{output_topic}') AS "
        "SELECT event_type, MAX(bid->price) AS maxprice FROM nexmark WINDOW TUMBLING (SIZE 10 SECONDS) "
        "WHERE event_type = 2 GROUP BY event_type EMIT CHANGES;"),
    12_000, reference=lambda: _bids_times(1), final=_Q7Final, output_state=_q7_output_state)


# q8 -- monitor new users: people who created an auction within 10 seconds of joining. Flink joins
# 10-second tumbling windows of each side on their bounds; ksqlDB's stream-stream join is a
# sliding WITHIN 10 SECONDS, one output per (person, auction) pair.

def _q8_reference() -> Callable[[bytes | None, bytes | None], int]:
    def process(_key: bytes | None, value: bytes | None) -> int:
        e = _events(value)
        if e is None or e["event_type"] != 1:
            return 0
        return 1 if abs(e["auction"]["dateTime"] - nexmark_person_time(e["auction"]["seller"])) <= 10_000 else 0

    return process


Q8 = _nexmark_workload(
    "Q8", "Nexmark q8: new users who sold within 10 s (person ⋈ auction WITHIN 10 SECONDS)", ("person", "auction"), (
        "CREATE STREAM nexmark_out WITH (KAFKA_TOPIC='{output_topic}') AS "
        "SELECT P.id AS id, P.name AS name, A.id AS auction FROM person P JOIN auction A WITHIN 10 SECONDS "
        "ON P.id = A.seller EMIT CHANGES;"),
    146_000, reference=_q8_reference)



# --- FT / FS: the same filter over a TABLE and over a STREAM of one topic (issue #56) ----------------

#: the filter both run: a row passes when ``V % FILTER_MODULUS <> 0``
FILTER_MODULUS = 3


def filter_changes(count: int, seed: int = 6, keys: int | None = None) -> Iterator[Record]:
    """``count`` changes of a keyed JSON table ``{"V": n}`` over ``keys`` keys (default count ÷ 10,
    so each key changes about ten times), every tenth a tombstone, 1 ms apart. Read as a TABLE,
    a change replaces (or deletes) its key's row; read as a STREAM, each is an event (tombstones
    carry no row)."""
    rng = random.Random(seed)
    keys = keys or max(1, count // 10)
    for i in range(count):
        key = f"k{rng.randrange(keys)}".encode()
        value = None if i % 10 == 9 else json.dumps({"V": rng.randrange(1_000_000)}).encode()
        yield key, value, samples.BASE_TIME_MS + i


def filter_passes(value: bytes | None) -> bool:
    return value is not None and json.loads(value)["V"] % FILTER_MODULUS != 0


def _filter_sql(kind: str) -> Callable[[str, str], str]:
    key = "PRIMARY KEY" if kind == "TABLE" else "KEY"

    def sql(input_topic: str, output_topic: str) -> str:
        return f"""SET 'auto.offset.reset' = 'earliest';
CREATE {kind} changes (k VARCHAR {key}, v BIGINT) WITH (KAFKA_TOPIC='{input_topic}', VALUE_FORMAT='JSON');
CREATE {kind} changes_out WITH (KAFKA_TOPIC='{output_topic}') AS
  SELECT * FROM changes WHERE v % {FILTER_MODULUS} <> 0;
"""

    return sql


def table_filter_reference() -> Callable[[bytes | None, bytes | None], int]:
    """A filtered table's changelog: an upsert per passing row, and a tombstone when a key the
    filtered table holds is deleted or changes to a row that fails (physical/table_changes.py's
    present bit); nothing for a key it does not hold."""
    present: set[bytes | None] = set()

    def process(key: bytes | None, value: bytes | None) -> int:
        if filter_passes(value):
            present.add(key)
            return 1
        if key in present:
            present.discard(key)
            return 1
        return 0

    return process


def stream_filter_reference() -> Callable[[bytes | None, bytes | None], int]:
    """A filtered stream: one output per passing event (a tombstone is no event)."""
    return lambda _key, value: 1 if filter_passes(value) else 0


FT = Workload(
    name="FT",
    title="a filter over a TABLE (changes, tombstones for rows that stop passing)",
    generate=lambda count, seed: filter_changes(count, seed),
    sql=_filter_sql("TABLE"),
    reference=table_filter_reference,
    quix=None,
    seed=6,
    latency=False,  # keys repeat: outputs cannot be matched to their sends
    twin="FS",
)
FS = Workload(
    name="FS",
    title="the same filter over a STREAM of the same changes (FT's twin)",
    generate=lambda count, seed: filter_changes(count, seed),
    sql=_filter_sql("STREAM"),
    reference=stream_filter_reference,
    quix=None,
    seed=6,
    latency=False,
)

#: every workload, in run order
WORKLOADS: dict[str, Workload] = {w.name: w for w in (W1, W2, W3, W4, W5, FT, FS, Q0, Q1, Q2, Q3, Q4, Q5, Q7, Q8)}
