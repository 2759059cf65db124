"""A partition's log as the broker stores it, and read as ``read_committed`` should read it.

tansu (the embedded broker) keeps transaction markers in the log but gives consumers neither the
aborted transactions nor a last stable offset, so librdkafka's ``read_committed`` returns aborted
records too (research/facts.md). The transaction tests therefore check the protocol itself: this
module fetches a partition's raw record batches (Fetch v4 over a socket, parsed by kafka-python's
record classes) and applies the markers as Kafka's consumers do: a transactional producer's
records are held until its COMMIT marker releases them or its ABORT marker drops them.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass, field

from kafka.record import MemoryRecords

_FETCH, _VERSION = 1, 4


@dataclass
class Batch:
    """One stored record batch: data, or a transaction's COMMIT/ABORT marker."""

    base_offset: int
    producer_id: int
    transactional: bool
    marker: str | None  # "COMMIT", "ABORT" or None (data)
    records: list[tuple[int, bytes | None, bytes | None]] = field(default_factory=list)  # offset, key, value


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def _fetch(sock: socket.socket, topic: str, partition: int, offset: int, correlation: int) -> tuple[int, bytes]:
    body = struct.pack(">hhi", _FETCH, _VERSION, correlation) + _string("committed-log")
    body += struct.pack(">iiiib", -1, 100, 1, 16 << 20, 0)  # replica, max wait, min bytes, max bytes, read_uncommitted
    body += struct.pack(">i", 1) + _string(topic) + struct.pack(">iiqi", 1, partition, offset, 16 << 20)
    sock.sendall(struct.pack(">i", len(body)) + body)
    size = struct.unpack(">i", _read(sock, 4))[0]
    data = _read(sock, size)
    pos = 4 + 4  # correlation id, throttle time
    (topics,) = struct.unpack_from(">i", data, pos)
    pos += 4
    assert topics == 1, topics
    (name_len,) = struct.unpack_from(">h", data, pos)
    pos += 2 + name_len + 4  # name, partition count (1)
    _part, error, high, _lso = struct.unpack_from(">ihqq", data, pos)
    pos += 4 + 2 + 8 + 8
    if error:
        raise RuntimeError(f"fetch of {topic}-{partition} at {offset} failed: error code {error}")
    (aborted,) = struct.unpack_from(">i", data, pos)
    pos += 4 + max(aborted, 0) * 16
    (length,) = struct.unpack_from(">i", data, pos)
    pos += 4
    return high, data[pos:pos + max(length, 0)]


def _read(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        out += chunk
    return out


def stored_batches(bootstrap: str, topic: str, partition: int = 0) -> list[Batch]:
    """Every record batch of ``topic``'s ``partition``, markers included, in log order (a
    single-broker cluster: ``bootstrap`` leads every partition)."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    out: list[Batch] = []
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        offset, correlation = 0, 0
        while True:
            correlation += 1
            high, raw = _fetch(sock, topic, partition, offset, correlation)
            records = MemoryRecords(raw)
            progressed = False
            while (batch := records.next_batch()) is not None:
                if batch.base_offset + batch.last_offset_delta < offset:
                    continue
                stored = Batch(batch.base_offset, batch.producer_id, batch.is_transactional, None)
                for record in batch:
                    if batch.is_control_batch:
                        stored.marker = "ABORT" if record.abort else "COMMIT"
                    else:
                        stored.records.append((record.offset, record.key, record.value))
                out.append(stored)
                offset = batch.base_offset + batch.last_offset_delta + 1
                progressed = True
            if offset >= high or not progressed:
                return out


def read_committed(bootstrap: str, topic: str, partition: int = 0) -> list[tuple[int, bytes | None, bytes | None]]:
    """The partition's records a ``read_committed`` consumer must return, in offset order: what
    a transaction's COMMIT marker released, plus every non-transactional record; a transaction
    still open at the end of the log is left out (it is not committed)."""
    pending: dict[int, list[tuple[int, bytes | None, bytes | None]]] = {}
    released: list[tuple[int, bytes | None, bytes | None]] = []
    for batch in stored_batches(bootstrap, topic, partition):
        if batch.marker == "COMMIT":
            released.extend(pending.pop(batch.producer_id, []))
        elif batch.marker == "ABORT":
            pending.pop(batch.producer_id, None)
        elif batch.transactional:
            pending.setdefault(batch.producer_id, []).extend(batch.records)
        else:
            released.extend(batch.records)
    return sorted(released)
