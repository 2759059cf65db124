"""The source's offsets on the driver: where a query begins, how much a micro-batch admits, and
the Spark tasks (one offset range of one partition) a batch is read in.

Offsets are ``{"<partition>": next_offset}``, partitions in ascending order, because Spark
compares offsets as JSON text: an unstable key order makes it plan an empty batch on every
trigger (research/spark.md §1.3). The end of each partition is :class:`~streamsql.kafka.admin.EndOffsets`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import InputPartition

from streamsql.kafka.options import SourceOptions

if TYPE_CHECKING:
    from streamsql.kafka.admin import EndOffsets


def encode_offsets(offsets: Mapping[int, int]) -> dict[str, int]:
    """``{"0": 5, "1": 7}``: string keys (JSON), ascending partition order (stable text)."""
    return {str(p): int(offsets[p]) for p in sorted(offsets)}


def decode_offsets(offsets: Mapping[str, Any] | None) -> dict[int, int]:
    return {int(p): int(o) for p, o in (offsets or {}).items()}


def rate_limit(start: Mapping[int, int], end: Mapping[int, int], max_rows: int) -> dict[int, int]:
    """Admit at most ``max_rows`` records, shared in proportion to each partition's backlog.

    Floors the proportional shares and hands the remainder out one record at a time (largest
    fractional share first), so a batch holds exactly ``min(max_rows, backlog)`` records and
    never stalls (Spark's own Kafka source rounds small shares up and can exceed the limit)."""
    backlog = {p: max(end[p] - start.get(p, 0), 0) for p in end}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(end)
    shares = {p: max_rows * n / total for p, n in backlog.items()}
    take = {p: int(s) for p, s in shares.items()}
    left = max_rows - sum(take.values())
    for p in sorted(backlog, key=lambda q: (-(shares[q] - take[q]), q)):
        if left <= 0:
            break
        if take[p] < backlog[p]:
            take[p] += 1
            left -= 1
    return {p: start.get(p, 0) + take[p] for p in end}


@dataclass
class KafkaInputPartition(InputPartition):
    """One Spark task: records ``[start, end)`` of one Kafka partition."""

    partition: int
    start: int
    end: int


class DriverOffsets:
    """Driver-side bookkeeping shared by the streaming and the batch reader."""

    opts: SourceOptions
    _ends: EndOffsets | None

    def _tracker(self) -> EndOffsets:
        from streamsql.kafka.admin import EndOffsets

        ends = getattr(self, "_ends", None)
        if ends is None:
            ends = self._ends = EndOffsets(self.opts.bootstrap, self.opts.topic, self.opts.kafka)
        return ends

    def __getstate__(self) -> dict[str, Any]:
        """Clients stay in the driver process; workers get options and schema only."""
        state = dict(self.__dict__)
        state["_ends"] = None
        return state

    def _start(self, tracker: EndOffsets, parts: list[int]) -> dict[int, int]:
        """Where a new query begins in each partition. Pinned offsets (resolved when the
        statement was accepted) name the partitions of that moment: one added since begins at
        its earliest offset, as one added while the query runs."""
        if self.opts.start_at is None:
            return tracker.earliest(parts) if self.opts.starting == "earliest" else tracker.ends(parts)
        given = self.opts.start_at
        latest = tracker.ends([p for p in parts if given.get(p) == -1])
        earliest = tracker.earliest([p for p in parts if given.get(p, -2) == -2])
        return {p: given[p] if given.get(p, -2) >= 0 else latest.get(p, earliest.get(p, 0)) for p in parts}

    def _partitions(self, start: Mapping[int, int], end: Mapping[int, int]) -> list[KafkaInputPartition]:
        # A partition missing from ``start`` appeared after the batch began: read it from 0
        # (earliest; the consumer skips to the oldest record if retention removed some).
        return [KafkaInputPartition(p, start.get(p, 0), e) for p, e in sorted(end.items()) if e > start.get(p, 0)]
