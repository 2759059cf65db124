"""A minimal Kafka producer speaking the wire protocol directly, for the conformance runner.

Why not confluent-kafka: librdkafka treats a record timestamp of ``0`` as "now", and most QTT
inputs are at timestamp 0 (their expected outputs too). This module sends ``Produce`` (v3, record
batch format v2, no compression) with exactly the timestamp it is given. It talks to the
bootstrap broker only, so it is meant for a single-broker cluster (the embedded broker); partition
choice follows the Java client (murmur2 of the key bytes, positive, modulo partitions; null keys
go to partition 0).
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterable

from streamsql.errors import KafkaError

# --- CRC-32C (Castagnoli), table-driven ------------------------------------------------------

_CRC_TABLE: list[int] = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC_TABLE.append(_c)


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    table = _CRC_TABLE
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


# --- murmur2 as in org.apache.kafka.common.utils.Utils ----------------------------------------


def murmur2(data: bytes) -> int:
    length = len(data)
    seed = 0x9747B28C
    m = 0x5BD1E995
    r = 24
    h = (seed ^ length) & 0xFFFFFFFF
    length4 = length // 4
    for i in range(length4):
        i4 = i * 4
        k = ((data[i4] & 0xFF) + ((data[i4 + 1] & 0xFF) << 8) + ((data[i4 + 2] & 0xFF) << 16)
             + ((data[i4 + 3] & 0xFF) << 24))
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    extra = length % 4
    idx = length & ~3
    if extra == 3:
        h ^= (data[idx + 2] & 0xFF) << 16
    if extra >= 2:
        h ^= (data[idx + 1] & 0xFF) << 8
    if extra >= 1:
        h ^= data[idx] & 0xFF
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h


def partition_for(key: bytes | None, partitions: int) -> int:
    if partitions <= 1 or key is None:
        return 0
    return (murmur2(key) & 0x7FFFFFFF) % partitions


# --- encoding helpers --------------------------------------------------------------------------


def _varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)  # zigzag (64-bit)
    z &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while True:
        b = z & 0x7F
        z >>= 7
        if z:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _bytes_field(b: bytes | None) -> bytes:
    return _varint(-1) if b is None else _varint(len(b)) + b


def _string(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    raw = s.encode()
    return struct.pack(">h", len(raw)) + raw


def record_batch(key: bytes | None, value: bytes | None, timestamp_ms: int,
                 headers: Iterable[tuple[str, bytes | None]] = ()) -> bytes:
    """One record in a v2 record batch."""
    hdrs = list(headers)
    body = bytearray()
    body += b"\x00"  # attributes
    body += _varint(0)  # timestamp delta
    body += _varint(0)  # offset delta
    body += _bytes_field(key)
    body += _bytes_field(value)
    body += _varint(len(hdrs))
    for hk, hv in hdrs:
        body += _bytes_field(hk.encode())
        body += _bytes_field(hv)
    record = _varint(len(body)) + bytes(body)
    after_crc = (struct.pack(">hiqqqhii", 0, 0, timestamp_ms, timestamp_ms, -1, -1, -1, 1) + record)
    crc = crc32c(after_crc)
    after_length = struct.pack(">ibI", -1, 2, crc) + after_crc
    return struct.pack(">qi", 0, len(after_length)) + after_length


class RawProducer:
    """Synchronous, one connection to the (single) bootstrap broker."""

    def __init__(self, bootstrap_servers: str, timeout_s: float = 15.0) -> None:
        host, port = bootstrap_servers.split(",")[0].rsplit(":", 1)
        self._addr = (host, int(port))
        self._timeout = timeout_s
        self._sock: socket.socket | None = None
        self._corr = 0
        self._lock = threading.Lock()

    def _connect(self) -> socket.socket:
        if self._sock is None:
            self._sock = socket.create_connection(self._addr, timeout=self._timeout)
        return self._sock

    def _recv(self, n: int) -> bytes:
        sock = self._connect()
        buf = bytearray()
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise KafkaError("broker closed the connection")
            buf += chunk
        return bytes(buf)

    def produce(self, topic: str, partition: int, key: bytes | None, value: bytes | None, timestamp_ms: int,
                headers: Iterable[tuple[str, bytes | None]] = ()) -> int:
        """Write one record; returns its offset. Raises KafkaError on a broker error."""
        batch = record_batch(key, value, int(timestamp_ms), headers)
        with self._lock:
            self._corr += 1
            corr = self._corr
            header = struct.pack(">hhi", 0, 3, corr) + _string("streamsql-qtt")
            body = (_string(None) + struct.pack(">hi", -1, int(self._timeout * 1000)) + struct.pack(">i", 1)
                    + _string(topic) + struct.pack(">i", 1) + struct.pack(">ii", partition, len(batch)) + batch)
            msg = header + body
            try:
                self._connect().sendall(struct.pack(">i", len(msg)) + msg)
                size = struct.unpack(">i", self._recv(4))[0]
                resp = self._recv(size)
            except OSError as e:
                self.close()
                raise KafkaError(f"cannot produce to topic '{topic}': {e}") from None
        (rcorr,) = struct.unpack_from(">i", resp, 0)
        if rcorr != corr:
            self.close()
            raise KafkaError("produce: correlation id mismatch")
        pos = 4
        (ntopics,) = struct.unpack_from(">i", resp, pos)
        pos += 4
        offset = -1
        for _ in range(ntopics):
            (nlen,) = struct.unpack_from(">h", resp, pos)
            pos += 2 + nlen
            (nparts,) = struct.unpack_from(">i", resp, pos)
            pos += 4
            for _ in range(nparts):
                _p, err, base, _lat = struct.unpack_from(">ihqq", resp, pos)
                pos += 22
                if err != 0:
                    raise KafkaError(f"cannot produce to topic '{topic}' partition {partition}: Kafka error code {err}")
                offset = base
        return offset

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None
