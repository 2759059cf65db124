"""Workloads: a deterministic input, the streamsql SQL, and the same pipeline for every other system.

A workload carries everything each system needs, so adding W2–W5 means adding one
:class:`Workload` to :data:`WORKLOADS`:

* ``generate(count, seed)`` → ``(key, value, timestamp_ms)`` records (produced once per run);
* ``sql(input_topic, output_topic)`` → the statements streamsql runs (a persistent query);
* ``reference()`` → a fresh per-record function ``(key, value) -> outputs emitted`` in plain
  Python. It is the ``ceiling-json`` work, and summed over the input it gives the number of
  records the output topic must hold when a system is done;
* ``quix(sdf, output_topic)`` → the same pipeline on a Quix Streams ``StreamingDataFrame``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamsql import samples

QUERIES_DIR = Path(__file__).resolve().parents[1] / "queries"

Record = tuple[bytes | None, bytes | None, int]


@dataclass(frozen=True)
class Workload:
    name: str
    title: str
    generate: Callable[[int, int], Iterator[Record]]
    sql: Callable[[str, str], str]
    reference: Callable[[], Callable[[bytes | None, bytes | None], int]]
    quix: Callable[[Any, Any], Any]
    seed: int = 2
    partitions: int = 2


# --- W1: payments JSON → fraud filter (seed pipeline 002, queries/fraud_filter.sql) ---------------

def _w1_sql(input_topic: str, output_topic: str) -> str:
    """queries/fraud_filter.sql as shipped, pointed at the run's topics."""
    text = (QUERIES_DIR / "fraud_filter.sql").read_text()
    text, n_in = re.subn(r"KAFKA_TOPIC\s*=\s*'payments'", f"KAFKA_TOPIC = '{input_topic}'", text)
    text, n_out = re.subn(r"(CREATE STREAM fraudulent_payments)\s+AS",
                          rf"\1 WITH (KAFKA_TOPIC = '{output_topic}') AS", text, flags=re.IGNORECASE)
    if n_in != 1 or n_out != 1:
        raise RuntimeError("queries/fraud_filter.sql changed shape; update benchmarks/workloads.py W1")
    return text


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

#: every workload, in run order (W2–W5 go here)
WORKLOADS: dict[str, Workload] = {w.name: w for w in (W1,)}
