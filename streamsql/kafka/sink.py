"""The Kafka sink: encode Arrow batches with the key/value formats and produce them.

One code path, two entry points:

* :class:`KafkaStreamWriter` – ``df.writeStream.format("streamsql_kafka")`` for append-mode
  queries. ``write()`` runs per task on executor workers.
* :func:`write_arrow` / :func:`produce_dataframe` – for ``foreachBatch`` (update-mode queries,
  which Python sinks cannot take: research/spark.md §1.8).

Producers are idempotent (no duplicates from the client's own retries), partition keys like the
Java client (``murmur2_random``, so ksqlDB and Java producers agree on partitions) and are cached
per worker process (``kafka/clients.py``); records at timestamp 0 are written by
``kafka/exact_timestamps.py``. Options: ``kafka/options.SinkOptions``.
Delivery is at-least-once by default (a replayed micro-batch is written again); with
``processing.guarantee=exactly_once_v2`` each task's rows are one transaction that a replay does
not repeat (kafka/transactions.py).
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from streamsql.arrow_map import map_in_arrow
from streamsql.errors import KafkaError
from streamsql.formats import schema_registry_settings as registry_settings
from streamsql.kafka.clients import FLUSH_TIMEOUT_S, cached_producer, drop_producer, produce_waiting
from streamsql.kafka.exact_timestamps import require_topic, write_exact_timestamps
from streamsql.kafka.options import SinkOptions
from streamsql.types import HEADERS_COL, ROWTIME, TOMBSTONE_COL

if TYPE_CHECKING:
    from confluent_kafka import KafkaError as LibrdkafkaError
    from confluent_kafka import Message, Producer
    from pyspark.sql import DataFrame

    from streamsql.formats import FormatSpec, Serde

#: the settings of the sink's producers (besides :func:`~streamsql.kafka.clients.producer_config`'s):
#:
#: * ``delivery.report.only.error``: only failed deliveries are reported; a Python callback per
#:   acknowledged record cost ~0.5 µs of a record's ~3 µs in the sink (docs/performance.md).
#: * ``enable.sparse.connections=false``: the producer connects when it is created, so an
#:   idempotent producer has its producer id before the task's first rows arrive. Connected
#:   only by its first ``produce``, its first flush waited ~0.5 s for the id, once per Python
#:   worker process — in each of a new query's first two micro-batches (docs/performance.md).
SINK_PRODUCER_SETTINGS = {"delivery.report.only.error": True, "enable.sparse.connections": False}


def _column(batch: pa.RecordBatch, name: str) -> pa.Array | None:
    """Column by exact name, else case-insensitively (Spark may be case-insensitive)."""
    idx = batch.schema.get_field_index(name)
    if idx < 0:
        matches = [i for i, f in enumerate(batch.schema) if f.name.upper() == name.upper()]
        idx = matches[0] if len(matches) == 1 else -1
    return batch.column(idx) if idx >= 0 else None


class RecordEncoder:
    """Arrow batch → (keys, values, timestamps, headers) lists ready for ``produce``."""

    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts
        self.key_spec = self.value_spec = self.key_serde = self.value_serde = None
        if opts.key_spec or opts.value_spec:  # raw mode must not need the formats package
            from streamsql.formats import FormatSpec, serde_for

            registry_settings.configure_from_option(opts.registry_clients)
            self.key_spec = FormatSpec.from_json(opts.key_spec) if opts.key_spec else None
            self.value_spec = FormatSpec.from_json(opts.value_spec) if opts.value_spec else None
            self.key_serde = serde_for(self.key_spec) if self.key_spec and self.key_spec.columns else None
            self.value_serde = serde_for(self.value_spec) if self.value_spec and self.value_spec.columns else None

    @property
    def raw(self) -> bool:
        """No specs: the input is the raw source's shape (``key``/``value`` BINARY,
        ``timestamp``, ``headers``), e.g. a topic copy."""
        return self.key_spec is None and self.value_spec is None

    def _side(self, batch: pa.RecordBatch, spec: FormatSpec | None, serde: Serde | None,
              raw: str) -> list[bytes | None]:
        """Encode one side: its spec's columns by name; nothing (null) for a side without
        columns; the raw BINARY column in raw mode."""
        n = batch.num_rows
        if self.raw:
            col = _column(batch, raw)
            return [None] * n if col is None else col.cast(pa.binary()).to_pylist()
        if serde is None or spec is None:
            return [None] * n
        cols = []
        for c in spec.columns:
            arr = _column(batch, c.name)
            if arr is None:
                raise KafkaError(f"cannot write to topic '{self.opts.topic}': input has no column '{c.name}'")
            cols.append(arr)
        sub = pa.RecordBatch.from_arrays(cols, names=[c.name for c in spec.columns])
        try:
            encoded = serde.encode(sub)
        except (ValueError, TypeError, OverflowError) as e:
            # a record the sink's format or schema cannot hold fails the query, worded as Kafka
            # Streams' record collector words it (ksqlDB's cause for such a failure)
            raise KafkaError(f"Unable to serialize record. ProducerRecord(topic=[{self.opts.topic}]) {raw}: "
                             f"{e}") from None
        if raw == "key" and len(cols) > 1 and not self.opts.computed_key:
            # ksqlDB writes a null key, not an object of nulls, when a source's null key passes
            # through (every key column null); a PARTITION BY key is an object even of nulls
            all_null = functools.reduce(pc.and_, [pc.is_null(c) for c in cols]).to_pylist()
            encoded = [None if null else k for k, null in zip(encoded, all_null)]
        return encoded

    def encode(self, batch: pa.RecordBatch) -> tuple[list[bytes | None], list[bytes | None], list[int | None],
                                                      list[list[tuple[str, bytes | None]] | None]]:
        """Keys, values, timestamps (ms; None = broker time) and headers, one per row.
        ``__TOMBSTONE`` true forces a null value; ``ROWTIME`` sets the timestamp (ksqlDB: an
        output record keeps its input record's timestamp); ``__HEADERS`` the headers."""
        n = batch.num_rows
        keys = self._side(batch, self.key_spec, self.key_serde, "key")
        if self.opts.window_type:
            keys = self._windowed(batch, keys)
        values = self._side(batch, self.value_spec, self.value_serde, "value")
        tomb = _column(batch, TOMBSTONE_COL)
        if tomb is not None and pc.any(tomb).as_py():
            values = [None if t else v for v, t in zip(values, tomb.to_pylist())]
        ts_col = _column(batch, "timestamp" if self.raw else ROWTIME)
        timestamps = ts_col.cast(pa.int64()).to_pylist() if ts_col is not None else [None] * n
        h_col = _column(batch, "headers" if self.raw else HEADERS_COL)
        headers: list[Any] = [None] * n
        if h_col is not None and h_col.null_count < n:
            headers = [[tuple(e.values()) for e in h] if h else None for h in h_col.to_pylist()]
        return keys, values, timestamps, headers


    def _windowed(self, batch: pa.RecordBatch, keys: list[bytes | None]) -> list[bytes | None]:
        starts, ends = _column(batch, "__WINDOWSTART"), _column(batch, "__WINDOWEND")
        if starts is None:
            raise KafkaError(f"cannot write windowed keys to topic '{self.opts.topic}': input has no __WINDOWSTART")
        end_values = ends.to_pylist() if ends is not None else [None] * batch.num_rows
        return [None if k is None else k + window_suffix(self.opts.window_type, s, e)
                for k, s, e in zip(keys, starts.to_pylist(), end_values)]


def window_suffix(window_type: str | None, start: int | None, end: int | None) -> bytes:
    """Kafka Streams' windowed key layout (what ksqlDB writes): the key's bytes, then the window
    start as an 8-byte big-endian long (time windows), or the window end then start (session)."""
    if not window_type or start is None:
        return b""
    if window_type == "SESSION":
        return struct.pack(">qq", end if end is not None else start, start)
    return struct.pack(">q", start)


_ENCODERS: dict[tuple[str, str | None, str | None, str | None], RecordEncoder] = {}


def _encoder(opts: SinkOptions) -> RecordEncoder:
    """Encoders are reused per process: ``foreachBatch`` callers write every micro-batch."""
    key = (opts.topic, opts.key_spec, opts.value_spec, opts.window_type)
    enc = _ENCODERS.get(key)
    if enc is None:
        enc = _ENCODERS[key] = RecordEncoder(opts)
    return enc


def write_arrow(batches: Iterable[pa.RecordBatch], options: Mapping[str, str] | SinkOptions) -> int:
    """Encode and produce every row of ``batches``; returns the number of records written once
    Kafka acknowledged all of them. Raises KafkaError on any delivery failure. Under
    ``exactly_once_v2`` the task's rows are one transaction (kafka/transactions.py)."""
    opts = options if isinstance(options, SinkOptions) else SinkOptions.parse(options)
    encoder = _encoder(opts)
    if opts.exactly_once:
        from streamsql.kafka import transactions

        return transactions.write_once(opts.bootstrap, opts.topic, opts.kafka, batches,
                                       functools.partial(_produce_all, encoder=encoder, opts=opts, exact_zero=False))
    producer = cached_producer(opts.bootstrap, {**SINK_PRODUCER_SETTINGS, **opts.kafka})
    return _produce_all(producer, batches, encoder, opts, exact_zero=True)


def _produce_all(producer: Producer, batches: Iterable[pa.RecordBatch], encoder: RecordEncoder,
                 opts: SinkOptions, exact_zero: bool) -> int:
    """Produce every row of ``batches`` with ``producer`` and wait until Kafka acknowledged them.
    ``exact_zero``: records at timestamp 0 go through kafka-python (librdkafka writes "now" for
    0); a transaction cannot span two clients, so under exactly-once they take librdkafka's."""
    errors: list[Any] = []

    def on_delivery(err: LibrdkafkaError | None, _msg: Message) -> None:
        if err is not None:
            errors.append(err)

    count = 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        keys, values, timestamps, headers = encoder.encode(batch)
        if exact_zero and 0 in timestamps:
            # librdkafka cannot write timestamp 0 (it means "now" there); ksqlDB writes it as is.
            # Earlier records go first, so order within the partition is kept.
            _flush_or_raise(producer, opts.topic, errors)
            require_topic(producer, opts.topic)
            count += write_exact_timestamps(opts, keys, values, timestamps, headers)
            continue
        count += _produce_rows(producer, opts.topic, zip(keys, values, timestamps, headers), on_delivery)
        producer.poll(0)
        if errors:
            break
    _flush_or_raise(producer, opts.topic, errors)
    return count


def _produce_rows(producer: Producer, topic: str, rows: Iterable[tuple[bytes | None, bytes | None, int | None, Any]],
                  on_delivery: Callable[[Any, Any], None]) -> int:
    """Queue every (key, value, timestamp, headers) row; the sink's hot loop. One ``produce``
    call per row with positional arguments (no keyword dict built per record); only a full
    queue or an error takes the slower :func:`produce_waiting`. A timestamp of None or ≤ 0
    means the producer's clock, as librdkafka reads 0."""
    from confluent_kafka import KafkaException

    produce = producer.produce
    count = 0
    for k, v, ts, h in rows:
        stamp = ts if ts is not None and ts > 0 else 0
        try:
            produce(topic, v, k, on_delivery=on_delivery, timestamp=stamp, headers=h or None)
        except (BufferError, KafkaException):
            produce_waiting(producer, topic, {"key": k, "value": v, "on_delivery": on_delivery,
                                              "timestamp": stamp, "headers": h or None})
        count += 1
    return count


def _flush_or_raise(producer: Any, topic: str, errors: list[Any]) -> None:
    left = producer.flush(FLUSH_TIMEOUT_S)
    if errors or left:
        err = errors[0] if errors else None
        if err is not None and (err.fatal() if hasattr(err, "fatal") else False):
            drop_producer(producer)
        reason = err.str() if err is not None else f"{left} record(s) not acknowledged within {FLUSH_TIMEOUT_S:.0f}s"
        raise KafkaError(f"cannot write to topic '{topic}': {reason}")


def produce_dataframe(df: DataFrame, options: Mapping[str, str]) -> int:
    """Write a (batch) DataFrame to Kafka from the executors – the ``foreachBatch`` path for
    update-mode queries; same encoder and producer as the streaming sink."""
    opts = SinkOptions.parse(options)

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        n = write_arrow(batches, opts)
        yield pa.RecordBatch.from_pydict({"n": [n]}, schema=pa.schema([("n", pa.int64())]))

    rows = map_in_arrow(df, task, "n BIGINT").collect()
    return int(sum(r["n"] for r in rows))


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    records: int


def packed_schema_text(schema: pa.Schema) -> str:
    """The sink option (``options.PACKED_OPTION``) of rows that come packed with this schema."""
    import base64

    return base64.b64encode(schema.serialize().to_pybytes()).decode("ascii")


@functools.lru_cache(maxsize=64)
def _packed_schema(text: str) -> pa.Schema:
    import base64

    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))


def unpacked(batches: Iterable[pa.RecordBatch], schema: pa.Schema | str) -> Iterator[pa.RecordBatch]:
    """Packed rows (the first column of each batch: Arrow IPC streams, or nulls that only stand
    for a row each so that Spark counts the rows written) as typed batches of ``schema``: what a
    stateful step hands on without Spark converting every row to its own and back
    (``physical/table_changes.py``)."""
    typed = _packed_schema(schema) if isinstance(schema, str) else schema
    for batch in batches:
        for blob in batch.column(0).to_pylist():
            if blob:
                yield from pa.ipc.open_stream(blob).read_all().cast(typed).to_batches()


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("streamsql_kafka")`` (append mode). With
    ``SinkOptions.packed_schema`` its rows come packed (:func:`unpacked`)."""

    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        # write() must return a WriterCommitMessage instance; None fails the query (§1.8)
        batches = unpacked(iterator, self.opts.packed_schema) if self.opts.packed_schema else iterator
        return KafkaCommitMessage(write_arrow(batches, self.opts))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Records are already acknowledged by Kafka when write() returns."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo: at-least-once, a replayed batch is written again; exactly-once, each
        task's transaction is committed or aborted in the task."""

