"""Kafka records → Arrow batches of the source's schema: the raw fields, or the key and value
decoded with their formats, header columns, window bounds and ROWTIME; what does not decode, or
has no usable time, goes to the processing log and is dropped.

Runs in the executors' range reads (``kafka/reading.py``); the schema (:func:`source_schema`)
is also what the driver declares for the source.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from streamsql import types as T
from streamsql.errors import ConfigError
from streamsql.formats import schema_registry_settings as registry_settings
from streamsql.kafka import processing_log as plog
from streamsql.kafka.clients import common_settings
from streamsql.kafka.filters import compile_filter
from streamsql.kafka.options import SourceOptions
from streamsql.types import HEADERS_COL, TOMBSTONE_COL

if TYPE_CHECKING:
    from confluent_kafka import Message

    from streamsql.formats import FormatSpec, Serde

#: Pseudo columns appended after the user's columns in decoded mode.

_HEADERS_TYPE = T.Array(T.Struct((T.StructField("KEY", T.STRING), T.StructField("VALUE", T.BYTES))))

RAW_SCHEMA = StructType([
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", LongType()),
    StructField("headers", ArrayType(StructType([StructField("key", StringType()),
                                                 StructField("value", BinaryType())]))),
])


def _spec(text: str | None) -> FormatSpec:
    """The FormatSpec of one side (no columns when absent). Imported lazily: raw mode must work
    without loading the formats package."""
    from streamsql.formats.base import FormatSpec

    return FormatSpec.from_json(text) if text else FormatSpec("NONE", ())


def header_type(role: str) -> T.SqlType:
    """Header columns have fixed types, whatever the type text says (ksqlDB enforces them)."""
    if role == "headers":
        return _HEADERS_TYPE
    if role == "header":
        return T.BYTES
    raise ConfigError(f"header column role must be 'headers' or 'header', not '{role}'")


def source_schema(opts: SourceOptions) -> StructType:
    """Raw mode: Kafka's own fields. Decoded mode: key columns, value columns, header columns,
    then ROWTIME, ROWPARTITION, ROWOFFSET, __HEADERS, __TOMBSTONE."""
    if not opts.decoded:
        return RAW_SCHEMA
    fields = [StructField(c.name, T.to_spark(c.type)) for spec in (_spec(opts.key_spec), _spec(opts.value_spec))
              for c in spec.columns]
    fields += [StructField(n, T.to_spark(header_type(role))) for n, _t, role, _k in opts.header_columns]
    if opts.window_type:
        fields += [StructField(T.WINDOWSTART, LongType()), StructField(T.WINDOWEND, LongType())]
    fields += [StructField(T.ROWTIME, LongType()), StructField(T.ROWPARTITION, IntegerType()),
               StructField(T.ROWOFFSET, LongType()), StructField(HEADERS_COL, T.to_spark(_HEADERS_TYPE)),
               StructField(TOMBSTONE_COL, BooleanType())]
    return StructType(fields)


class BatchBuilder:
    """Turns confluent-kafka messages into Arrow batches of the source schema."""

    def __init__(self, opts: SourceOptions, schema: StructType, partition: int) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        self.opts = opts
        self.partition = partition
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")
        if opts.decoded:
            self.key_spec = _spec(opts.key_spec)
            self.value_spec = _spec(opts.value_spec)
        self._serdes: tuple[Serde | None, Serde | None] | None = None
        #: the rows a pushed WHERE keeps (tombstones always), applied after decoding, the
        #: processing log and the record times, so a dropped row has had all three
        self.kept = compile_filter(opts.source_filter) if opts.source_filter else None

    @property
    def splits_records(self) -> bool:
        """True when one Kafka record decodes to many rows (``VALUE_COMPRESSION``: a batch of lines)."""
        if not self.opts.decoded:
            return False
        value_serde = self._serde_pair()[1]
        return value_serde is not None and hasattr(value_serde, "inner")

    def build(self, msgs: list[Any]) -> Iterator[pa.RecordBatch]:
        if self.opts.decoded:
            batch = self._decoded(msgs)
        else:
            batch = self._raw(msgs)
        if batch is not None and batch.num_rows:
            yield batch

    # -- raw ------------------------------------------------------------------------------------

    def _raw(self, msgs: list[Any]) -> pa.RecordBatch:
        n = len(msgs)
        s = self.arrow_schema
        arrays = [
            pa.array([m.key() for m in msgs], pa.binary()),
            pa.array([m.value() for m in msgs], pa.binary()),
            pa.repeat(pa.scalar(self.opts.topic, pa.string()), n),
            pa.repeat(pa.scalar(self.partition, pa.int32()), n),
            pa.array([m.offset() for m in msgs], pa.int64()),
            pa.array([m.timestamp()[1] for m in msgs], pa.int64()),
            headers_array([m.headers() for m in msgs], s.field("headers").type),
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=s)

    # -- decoded --------------------------------------------------------------------------------

    def _serde_pair(self) -> tuple[Serde | None, Serde | None]:
        if self._serdes is None:
            from streamsql.formats import serde_for

            registry_settings.configure_from_option(self.opts.registry_clients)
            self._serdes = (serde_for(self.key_spec) if self.key_spec.columns else None,
                            serde_for(self.value_spec) if self.value_spec.columns else None)
        return self._serdes

    def _decoded(self, msgs: list[Any]) -> pa.RecordBatch | None:
        key_serde, value_serde = self._serde_pair()
        if value_serde is not None and hasattr(value_serde, "inner"):  # VALUE_COMPRESSION: batches of lines
            msgs = self._split_compressed(msgs)
            value_serde = value_serde.inner
        n = len(msgs)
        s = self.arrow_schema
        keys = [m.key() for m in msgs]
        values = [m.value() for m in msgs]
        raw_headers = [m.headers() for m in msgs]
        arrays: list[pa.Array] = []
        bad: dict[int, tuple[str, str]] = {}  # row -> (target, reason)
        if self.opts.window_type:
            keys, starts, ends = split_windowed_keys(keys, self.opts.window_type, self.opts.window_size_ms, bad)
        for serde, spec, data, target in ((key_serde, self.key_spec, keys, "key"),
                                          (value_serde, self.value_spec, values, "value")):
            if serde is None:
                continue
            result = serde.decode(data)
            for i, err in enumerate(result.errors):
                if err is not None and i not in bad:
                    bad[i] = (target, err)
            arrays.extend(result.columns[:len(spec.columns)])
        for name, _t, role, hkey in self.opts.header_columns:
            ftype = s.field(name).type
            if role == "headers":
                arrays.append(headers_array(raw_headers, ftype))
            else:
                arrays.append(pa.array([_last_header(h, hkey) for h in raw_headers], ftype))
        if self.opts.window_type:
            arrays += [pa.array(starts, pa.int64()), pa.array(ends, pa.int64())]
        arrays += [
            pa.array([m.timestamp()[1] for m in msgs], pa.int64()),
            pa.repeat(pa.scalar(self.partition, pa.int32()), n),
            pa.array([m.offset() for m in msgs], pa.int64()),
            headers_array(raw_headers, s.field(HEADERS_COL).type),
            pa.array([v is None for v in values], pa.bool_()),
        ]
        arrays = [a if a.type == f.type else a.cast(f.type) for a, f in zip(arrays, s)]
        batch = pa.RecordBatch.from_arrays(arrays, schema=s)
        if bad:
            report_bad_records(self.opts, [(msgs[i], *bad[i]) for i in sorted(bad)])
        untimed: dict[int, str] = {}
        if self.opts.timestamp_column:
            batch, untimed = self._column_times(batch, [v is None for v in values], bad)
        if bad or untimed:
            batch = batch.filter(pa.array([i not in bad and i not in untimed for i in range(n)], pa.bool_()))
        if self.kept is not None:
            batch = batch.filter(self.kept)
        return batch

    def _column_times(self, batch: pa.RecordBatch, tombstones: list[bool], bad: Mapping[int, Any],
                      ) -> tuple[pa.RecordBatch, dict[int, str]]:
        """ROWTIME from the TIMESTAMP column; the rows without a usable time (besides the
        undecodable ones and tombstones, which keep their record's time) go to the processing
        log (kafka/timestamps.py)."""
        import pyarrow.compute as pc

        from streamsql.kafka import timestamps

        column = self.opts.timestamp_column or ""
        values = batch.column(batch.schema.get_field_index(column))
        times = timestamps.column_times(values)
        kept = pa.array(tombstones, pa.bool_())
        rowtime = batch.schema.get_field_index(T.ROWTIME)
        times = pc.if_else(kept, batch.column(rowtime), times)
        untimed = {i: why for i, why in timestamps.problems(times, values, column, None).items() if i not in bad}
        batch = batch.set_column(rowtime, T.ROWTIME, times)
        if untimed:
            entries = timestamps.entries(batch, untimed, self.opts.query_id, at_sink=False)
            publish(self.opts, entries)
            if self.opts.timestamp_throw:
                timestamps.fail_if_unextractable(times, untimed, entries)
        return batch, untimed

    def _split_compressed(self, msgs: list[Any]) -> list[Any]:
        """Each message becomes one record per line of its decompressed value; messages that
        do not decompress go to the processing log."""
        from streamsql.formats.compression import split_batches

        records, origin, failed = split_batches([m.value() for m in msgs])
        if failed:
            report_bad_records(self.opts, [(msgs[i], "value", reason) for i, reason in sorted(failed.items())])
        return [_BatchedRecord(msgs[i], rec) for rec, i in zip(records, origin)]


class _BatchedRecord:
    """One line of a compressed batch: the message's metadata with the line as its value."""

    __slots__ = ("_msg", "_value")

    def __init__(self, msg: Message, value: bytes | None) -> None:
        self._msg, self._value = msg, value

    def value(self) -> bytes | None:
        return self._value

    def __getattr__(self, name: str) -> Any:  # key(), offset(), timestamp(), headers(), ...
        return getattr(self._msg, name)


def split_windowed_keys(
        keys: list[bytes | None], window_type: str, size_ms: int | None, bad: dict[int, tuple[str, str]],
) -> tuple[list[bytes | None], list[int | None], list[int | None]]:
    """Kafka Streams' windowed keys: inner key bytes, then the window start (8 bytes, time
    windows) or the window end and start (16 bytes, session windows)."""
    session = window_type == "SESSION"
    suffix = 16 if session else 8
    inner: list[bytes | None] = []
    starts: list[int | None] = []
    ends: list[int | None] = []
    for i, k in enumerate(keys):
        if k is None or len(k) < suffix:
            if k is not None and i not in bad:
                bad[i] = ("key", f"windowed key of {len(k)} bytes is shorter than its {suffix}-byte window suffix")
            inner.append(None)
            starts.append(None)
            ends.append(None)
            continue
        if session:
            end, start = struct.unpack(">qq", k[-16:])
        else:
            (start,) = struct.unpack(">q", k[-8:])
            end = start + size_ms if size_ms else None
        inner.append(k[:-suffix])
        starts.append(start)
        ends.append(end)
    return inner, starts, ends


def _last_header(headers: list[tuple[str, bytes | None]] | None, key: str | None) -> bytes | None:
    """ksqlDB's ``HEADER('k')`` column: the value of the last header named ``k``."""
    found = None
    for k, v in headers or ():
        if k == key:
            found = v
    return found


def headers_array(headers: Sequence[list[tuple[str, bytes | None]] | None], list_type: pa.DataType) -> pa.Array:
    """ARRAY<STRUCT<key, value>> of each record's headers; a record without headers gets an
    empty array (ksqlDB shows ``[]``)."""
    n = len(headers)
    if not any(headers):  # the common case, without building Python objects
        offsets = pa.array([0] * (n + 1), pa.int32())
        return pa.ListArray.from_arrays(offsets, pa.array([], list_type.value_type), type=list_type)
    kname, vname = (f.name for f in list_type.value_type)
    return pa.array([[{kname: k, vname: v} for k, v in (h or ())] for h in headers], list_type)


# ---------------------------------------------------------------------------------------------
# processing log
# ---------------------------------------------------------------------------------------------

def processing_log_record(opts: SourceOptions, msg: Any, target: str, reason: str) -> dict[str, Any]:
    """ksqlDB's processing-log shape for a deserialization error (research/ksqldb.md §1.10)."""
    raw = msg.key() if target == "key" else msg.value()
    return plog.entry(opts.query_id, plog.DESERIALIZATION_ERROR, {
        "target": target,
        "errorMessage": f"Failed to deserialize {target} from topic: {msg.topic()}. {reason}",
        "recordB64": base64.b64encode(raw).decode("ascii") if raw is not None and opts.log_rows else None,
        "cause": [reason],
        "topic": msg.topic(),
        "partition": msg.partition(),
        "offset": msg.offset(),
    })


def report_bad_records(opts: SourceOptions, bad: list[tuple[Any, str, str]]) -> None:
    """Log each undecodable record, and write it to the processing-log topic when configured."""
    publish(opts, [processing_log_record(opts, m, target, reason) for m, target, reason in bad])


def publish(opts: SourceOptions, entries: list[dict[str, Any]]) -> None:
    plog.LogTarget(opts.bootstrap, opts.processing_log_topic).publish(entries, common_settings(opts.kafka))
