"""The seed count-min sketch and heavy hitters (udfs/sketches.py), checked against exact counts
on seeded Zipf streams. Pure Python: no Spark, no broker."""

from __future__ import annotations

import math
import random
from collections import Counter
from pathlib import Path

import pytest

from streamsql.functions.python.loader import SEED_FUNCTIONS_DIR, load_file


@pytest.fixture(scope="module")
def sketches():  # type: ignore[no-untyped-def]
    import sys

    load_file(SEED_FUNCTIONS_DIR / "sketches.py")
    return next(m for name, m in sys.modules.items() if name.startswith("streamsql_udfs_sketches_"))


def zipf_stream(n_items: int, n_distinct: int, s: float, seed: int) -> list[str]:
    rng = random.Random(seed)
    weights = [1 / (rank ** s) for rank in range(1, n_distinct + 1)]
    return [f"w{i}" for i in rng.choices(range(n_distinct), weights=weights, k=n_items)]


@pytest.mark.parametrize("epsilon,delta,seed", [(0.01, 0.05, 1), (0.002, 0.01, 2), (0.02, 0.1, 3)])
def test_count_min_bounds_on_zipf(sketches, epsilon: float, delta: float, seed: int) -> None:  # type: ignore[no-untyped-def]
    stream = zipf_stream(20_000, 5_000, 1.1, seed)
    exact = Counter(stream)
    cms = sketches.CountMinSketch.from_error(epsilon, delta, seed=seed)
    assert cms.width == math.ceil(math.e / epsilon) and cms.depth == math.ceil(math.log(1 / delta))
    for w in stream:
        cms.add(w)
    n = len(stream)
    assert cms.total == n
    errors = [cms.estimate(w) - c for w, c in exact.items()]
    assert min(errors) >= 0, "a count-min estimate is never below the true count"
    over = sum(1 for e in errors if e > epsilon * n) / len(errors)
    # per item the bound fails with probability <= delta; over thousands of items the observed
    # rate stays below delta (a generous margin for sampling noise)
    assert over <= delta * 1.5, f"{over:.4f} of items exceed eps*N (delta={delta})"
    # an estimate is exactly the smallest, over the rows, of the true counts of the items that share
    # the item's counter in that row (computed here from the exact counts, not from the sketch's
    # counters); for items never added, the same eps*N bound holds with probability 1-delta
    mass: list[Counter[int]] = [Counter() for _ in range(cms.depth)]  # per row: column -> true count
    for w, c in exact.items():
        for row, col in enumerate(cms._columns(w)):
            mass[row][col] += c
    for w in exact:
        assert cms.estimate(w) == min(mass[row][col] for row, col in enumerate(cms._columns(w))), w
    unseen = [f"never-seen-{i}" for i in range(2000)]
    for u in unseen:
        assert cms.estimate(u) == min(mass[row][col] for row, col in enumerate(cms._columns(u))), u
    over_unseen = sum(1 for u in unseen if cms.estimate(u) > epsilon * n) / len(unseen)
    assert over_unseen <= delta * 1.5, f"{over_unseen:.4f} of unseen items exceed eps*N (delta={delta})"


def test_count_min_merge_and_bytes_round_trip(sketches) -> None:  # type: ignore[no-untyped-def]
    a_items, b_items = zipf_stream(3000, 300, 1.2, 10), zipf_stream(3000, 300, 1.2, 11)
    a = sketches.CountMinSketch(200, 4)
    b = sketches.CountMinSketch(200, 4)
    whole = sketches.CountMinSketch(200, 4)
    for w in a_items:
        a.add(w)
        whole.add(w)
    for w in b_items:
        b.add(w)
        whole.add(w)
    merged = sketches.CountMinSketch.from_bytes(a.merge(b).to_bytes())
    assert merged.rows == whole.rows and merged.total == whole.total
    with pytest.raises(ValueError, match="different dimensions"):
        a.merge(sketches.CountMinSketch(100, 4))
    with pytest.raises(ValueError, match="width >= 1"):
        sketches.CountMinSketch(0, 3)


@pytest.mark.parametrize("seed", [5, 6, 7])
def test_heavy_hitters_recall_on_zipf(sketches, seed: int) -> None:  # type: ignore[no-untyped-def]
    stream = zipf_stream(30_000, 10_000, 1.2, seed)
    exact = Counter(stream)
    hh = sketches.HeavyHitters(10, epsilon=0.001, delta=0.01)
    for w in stream:
        hh.add(w)
    top = hh.top()
    assert len(top) == 10
    true_top = {w for w, _ in exact.most_common(10)}
    found = {w for w, _ in top}
    assert len(found & true_top) / 10 >= 0.9, f"recall {len(found & true_top)}/10"
    for w, est in top:
        assert est >= exact[w]
        assert est - exact[w] <= 0.001 * len(stream) * 3
    assert [e for _, e in top] == sorted((e for _, e in top), reverse=True)


def test_udaf_classes_fold_like_the_engine(sketches) -> None:  # type: ignore[no-untyped-def]
    """The SQL-facing classes: initialize/aggregate/merge/map, as the finaliser drives them."""
    agg = sketches.HeavyHittersAgg(2)
    acc = agg.initialize()
    for w in ["a", "b", "a", None, "c", "a", "b"]:
        acc = agg.aggregate(w, acc)
    assert agg.map(acc) == [{"ITEM": "a", "ESTIMATE": 3}, {"ITEM": "b", "ESTIMATE": 2}]
    other = agg.aggregate("c", agg.aggregate("c", agg.initialize()))
    merged = agg.map(agg.merge(acc, other))
    assert merged == [{"ITEM": "a", "ESTIMATE": 3}, {"ITEM": "c", "ESTIMATE": 3}]
    cms = sketches.CountMinSketchAgg(0.01, 0.01)
    sketch = cms.map(cms.aggregate("x", cms.aggregate("x", cms.initialize())))
    assert sketches.cms_estimate(sketch, "x") == 2 and sketches.cms_estimate(None, "x") is None


def test_text_and_compression_seed_functions() -> None:
    import sys

    load_file(SEED_FUNCTIONS_DIR / "text.py")
    load_file(SEED_FUNCTIONS_DIR / "compression.py")
    text = next(m for n, m in sys.modules.items() if n.startswith("streamsql_udfs_text_"))
    comp = next(m for n, m in sys.modules.items() if n.startswith("streamsql_udfs_compression_"))
    assert text.split_words("  a  bb\tc\n") == ["a", "bb", "c"]
    assert text.split_words(None) is None
    assert text.split_words_case("A b", True) == ["a", "b"]
    assert comp.gunzip_bytes(comp.gzip_text("héllo")) == "héllo"
    with pytest.raises(OSError):
        comp.gunzip_bytes(b"not gzip")
    assert Path(SEED_FUNCTIONS_DIR) == Path(__file__).resolve().parents[3] / "streamsql" / "seeds" / "functions"
