"""Seed aggregate functions: a count-min sketch and heavy hitters (top-N) built on it.

Count-min sketch (Cormode & Muthukrishnan): ``depth`` rows of ``width`` counters; an item adds 1
to one counter per row (row ``i`` picks column ``h_i(x)`` from a pairwise-independent family
``((a_i·x + b_i) mod p) mod width``, ``p`` the Mersenne prime 2^61−1); its estimate is the
smallest of its counters. Every estimate is ≥ the true count, and with ``width = ⌈e/ε⌉``,
``depth = ⌈ln(1/δ)⌉`` an estimate exceeds the true count by more than ε·N (N = items added) with
probability at most δ. Memory is width×depth counters whatever the number of distinct items.

Heavy hitters keeps the sketch plus a small candidate set of the items with the largest
estimates (an item enters when its estimate beats the smallest candidate), and reports the top
N with their estimates.

SQL:
    COUNT_MIN_SKETCH(item)                      -> BYTES   (ε=0.001, δ=0.01)
    COUNT_MIN_SKETCH(item, epsilon, delta)      -> BYTES
    CMS_ESTIMATE(sketch, item)                  -> BIGINT
    HEAVY_HITTERS(item, n)                      -> ARRAY<STRUCT<ITEM VARCHAR, ESTIMATE BIGINT>>
    HEAVY_HITTERS(item, n, epsilon, delta)      -> same
"""

from __future__ import annotations

import hashlib
import heapq
import json
import math
import random
from collections.abc import Iterable

from streamsql.udf import udaf, udf

MERSENNE_P = (1 << 61) - 1
DEFAULT_EPSILON = 0.001
DEFAULT_DELTA = 0.01


def _item_key(item: object) -> int:
    data = item if isinstance(item, bytes) else str(item).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big") % MERSENNE_P


class CountMinSketch:
    """A count-min sketch; ``seed`` fixes the hash functions (sketches merge only with equal seeds
    and dimensions)."""

    def __init__(self, width: int, depth: int, seed: int = 7) -> None:
        if width < 1 or depth < 1:
            raise ValueError(f"count-min sketch needs width >= 1 and depth >= 1, got {width}x{depth}")
        self.width, self.depth, self.seed = width, depth, seed
        rng = random.Random(seed)
        self._hashes = [(rng.randrange(1, MERSENNE_P), rng.randrange(0, MERSENNE_P)) for _ in range(depth)]
        self.rows = [[0] * width for _ in range(depth)]
        self.total = 0

    @classmethod
    def from_error(cls, epsilon: float, delta: float, seed: int = 7) -> CountMinSketch:
        """Dimensions for: estimate ≤ true + ε·N with probability ≥ 1−δ."""
        if not (0 < epsilon < 1 and 0 < delta < 1):
            raise ValueError(f"epsilon and delta must be in (0, 1), got {epsilon}, {delta}")
        return cls(math.ceil(math.e / epsilon), math.ceil(math.log(1 / delta)), seed)

    def _columns(self, item: object) -> Iterable[int]:
        x = _item_key(item)
        w = self.width
        return (((a * x + b) % MERSENNE_P) % w for a, b in self._hashes)

    def add(self, item: object, count: int = 1) -> int:
        """Add ``count`` occurrences; returns the item's new estimate."""
        self.total += count
        est = None
        for row, col in zip(self.rows, self._columns(item)):
            row[col] += count
            est = row[col] if est is None else min(est, row[col])
        return int(est or 0)

    def estimate(self, item: object) -> int:
        return min(row[col] for row, col in zip(self.rows, self._columns(item)))

    def merge(self, other: CountMinSketch) -> CountMinSketch:
        if (other.width, other.depth, other.seed) != (self.width, self.depth, self.seed):
            raise ValueError("cannot merge count-min sketches of different dimensions or seeds")
        out = CountMinSketch(self.width, self.depth, self.seed)
        out.rows = [[a + b for a, b in zip(r1, r2)] for r1, r2 in zip(self.rows, other.rows)]
        out.total = self.total + other.total
        return out

    def to_bytes(self) -> bytes:
        return json.dumps({"w": self.width, "d": self.depth, "s": self.seed, "n": self.total,
                           "rows": self.rows}, separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes) -> CountMinSketch:
        d = json.loads(bytes(data).decode("utf-8"))
        out = cls(d["w"], d["d"], d["s"])
        out.rows, out.total = d["rows"], d["n"]
        return out


class HeavyHitters:
    """Top-``n`` items by count-min estimate, with ``capacity`` candidates tracked (≥ n)."""

    def __init__(self, n: int, epsilon: float = DEFAULT_EPSILON, delta: float = DEFAULT_DELTA,
                 capacity: int | None = None) -> None:
        if n < 1:
            raise ValueError(f"heavy hitters needs n >= 1, got {n}")
        self.n = n
        self.capacity = capacity or max(4 * n, n + 10)
        self.sketch = CountMinSketch.from_error(epsilon, delta)
        self.candidates: dict[object, int] = {}

    def add(self, item: object) -> None:
        est = self.sketch.add(item)
        if item in self.candidates or len(self.candidates) < self.capacity:
            self.candidates[item] = est
            return
        smallest = min(self.candidates, key=self.candidates.__getitem__)
        if est > self.candidates[smallest]:
            del self.candidates[smallest]
            self.candidates[item] = est

    def merge(self, other: HeavyHitters) -> HeavyHitters:
        out = HeavyHitters(self.n, capacity=self.capacity)
        out.sketch = self.sketch.merge(other.sketch)
        for item in set(self.candidates) | set(other.candidates):
            out.candidates[item] = out.sketch.estimate(item)
        out.candidates = dict(heapq.nlargest(out.capacity, out.candidates.items(), key=lambda kv: kv[1]))
        return out

    def top(self) -> list[tuple[object, int]]:
        """The top n as (item, estimate), largest first (ties by item, for a stable order)."""
        ranked = sorted(((item, self.sketch.estimate(item)) for item in self.candidates),
                        key=lambda kv: (-kv[1], str(kv[0])))
        return ranked[: self.n]


# --- SQL functions -------------------------------------------------------------------------------


@udaf(name="COUNT_MIN_SKETCH", returns="BYTES", params=["VARCHAR"],
      description="A count-min sketch of the values (ε=0.001, δ=0.01), for CMS_ESTIMATE.")
class CountMinSketchAgg:
    def __init__(self, epsilon: float = DEFAULT_EPSILON, delta: float = DEFAULT_DELTA) -> None:
        self.epsilon, self.delta = epsilon, delta

    def initialize(self) -> CountMinSketch:
        return CountMinSketch.from_error(self.epsilon, self.delta)

    def aggregate(self, value: str | None, acc: CountMinSketch) -> CountMinSketch:
        if value is not None:
            acc.add(value)
        return acc

    def merge(self, a: CountMinSketch, b: CountMinSketch) -> CountMinSketch:
        return a.merge(b)

    def map(self, acc: CountMinSketch) -> bytes:
        return acc.to_bytes()


@udaf(name="COUNT_MIN_SKETCH", returns="BYTES", params=["VARCHAR"], literals=["DOUBLE", "DOUBLE"],
      description="A count-min sketch with the given epsilon and delta.")
class CountMinSketchErrorAgg(CountMinSketchAgg):
    pass


@udf(name="CMS_ESTIMATE", returns="BIGINT", params=["BYTES", "VARCHAR"],
     description="The count-min estimate of an item in a sketch made by COUNT_MIN_SKETCH.")
def cms_estimate(sketch: bytes | None, item: str | None) -> int | None:
    if sketch is None or item is None:
        return None
    return CountMinSketch.from_bytes(sketch).estimate(item)


@udaf(name="HEAVY_HITTERS", returns="ARRAY<STRUCT<ITEM VARCHAR, ESTIMATE BIGINT>>", params=["VARCHAR"],
      literals=["INT"], description="The n most frequent values with count-min estimates (ε=0.001, δ=0.01).")
class HeavyHittersAgg:
    def __init__(self, n: int, epsilon: float = DEFAULT_EPSILON, delta: float = DEFAULT_DELTA) -> None:
        self.n, self.epsilon, self.delta = n, epsilon, delta

    def initialize(self) -> HeavyHitters:
        return HeavyHitters(self.n, self.epsilon, self.delta)

    def aggregate(self, value: str | None, acc: HeavyHitters) -> HeavyHitters:
        if value is not None:
            acc.add(value)
        return acc

    def merge(self, a: HeavyHitters, b: HeavyHitters) -> HeavyHitters:
        return a.merge(b)

    def map(self, acc: HeavyHitters) -> list[dict]:
        return [{"ITEM": item, "ESTIMATE": est} for item, est in acc.top()]


@udaf(name="HEAVY_HITTERS", returns="ARRAY<STRUCT<ITEM VARCHAR, ESTIMATE BIGINT>>", params=["VARCHAR"],
      literals=["INT", "DOUBLE", "DOUBLE"], description="The n most frequent values, sketch with epsilon and delta.")
class HeavyHittersErrorAgg(HeavyHittersAgg):
    pass
