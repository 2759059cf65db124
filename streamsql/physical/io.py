"""Connect catalog sources to the Kafka data source: options for reading and writing a source,
and the scan's streaming DataFrame (the builder's ``Scan`` step and a table's store use them).

This is the only place that turns a catalog :class:`Source` into the Kafka data source's options
(format specs from ``catalog/source_formats.py``, topic, offsets), so the planner never knows
option names and the Kafka package never knows the catalog.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

from streamsql import types as t
from streamsql.arrow_map import map_in_arrow
from streamsql.catalog import Source
from streamsql.catalog.source_formats import key_spec, value_spec
from streamsql.formats import schema_registry_settings as registry_settings
from streamsql.kafka import settings as kafka_settings
from streamsql.kafka.options import PIPE_OPTION
from streamsql.kafka.processing_log import LogTarget as PLogTarget
from streamsql.planner.expressions import quote, string_literal

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

DATA_SOURCE = "streamsql_kafka"
#: the reader option of ``processing.guarantee=exactly_once_v2`` (Kafka Streams' consumers read
#: committed records only under it, uncommitted ones under at_least_once)
READ_COMMITTED = {"kafka.isolation.level": "read_committed"}


def kafka_options(bootstrap_servers: str, source: Source) -> dict[str, str]:
    options = {
        "kafka.bootstrap.servers": bootstrap_servers,
        **kafka_settings.as_options(bootstrap_servers),
        "topic": source.topic,
        "keySpec": key_spec(source).to_json(),
        "valueSpec": value_spec(source).to_json(),
        **registry_settings.as_option([b.url for b in (source.key_schema, source.value_schema) if b is not None]),
    }
    if source.window_type:  # keys carry Kafka Streams' window suffix, read and written
        options["windowType"] = source.window_type
        if source.window_size_ms:
            options["windowSizeMs"] = str(source.window_size_ms)
    return options


def stream_options(bootstrap_servers: str, source: Source, *, starting_offsets: str,
                   pinned: Mapping[int, int] | None = None, query_id: str, max_records: int | None = None,
                   processing_log_topic: str | None = None, processing_log_rows: bool = False,
                   throw_on_invalid_timestamp: bool = False, read_committed: bool = False,
                   source_filter: str | None = None, pipe: str | None = None) -> dict[str, str]:
    """The Kafka reader's options for ``source`` (:func:`read_stream` says what each means): one
    home for what a stream read is, whether Spark's source reads it or the server follows it
    (``runtime/push.py``)."""
    options = kafka_options(bootstrap_servers, source)
    options["startingOffsets"] = starting_offsets if pinned is None else json.dumps(
        {source.topic: {str(p): int(o) for p, o in sorted(pinned.items())}})
    options["queryId"] = query_id
    if source.header_columns:
        options["headerColumns"] = json.dumps(
            [[c.name, str(c.type), c.role, c.header_key] for c in source.header_columns])
    if max_records:
        options["maxRecordsPerBatch"] = str(max_records)
    if source_filter:  # the WHERE conjuncts the reader applies (planner/pushdown.py)
        options["sourceFilter"] = source_filter
    if pipe:
        options[PIPE_OPTION] = pipe
    if read_committed:  # exactly_once_v2: records of aborted transactions are never read
        options.update(READ_COMMITTED)

    if processing_log_topic:
        options["processingLogTopic"] = processing_log_topic
        options["processingLogRows"] = str(processing_log_rows).lower()
    if source.timestamp_column and not _parsed_timestamp(source):
        options["timestampColumn"] = source.timestamp_column
        options["timestampThrowOnInvalid"] = str(throw_on_invalid_timestamp).lower()
    return options


def read_stream(spark: SparkSession, bootstrap_servers: str, source: Source, *, starting_offsets: str,
                pinned: Mapping[int, int] | None = None, query_id: str, max_records: int | None = None,
                processing_log_topic: str | None = None, processing_log_rows: bool = False,
                throw_on_invalid_timestamp: bool = False, read_committed: bool = False,
                source_filter: str | None = None, pipe: str | None = None) -> DataFrame:
    """The streaming DataFrame of ``source``: its columns plus ROWTIME/ROWPARTITION/ROWOFFSET and
    the internal ``__HEADERS``/``__TOMBSTONE``. ``pinned``: the offsets (partition → offset)
    a query without a checkpoint begins at, instead of ``starting_offsets``. With a TIMESTAMP
    column, ROWTIME is that column (a BIGINT or TIMESTAMP one read by the Kafka reader, a string
    one parsed here); records without a usable time go to the processing log
    (``kafka/timestamps.py``). ``source_filter``: the WHERE conjuncts the reader applies to each
    decoded batch (``planner/pushdown.py``). ``pipe``: the query's stateless step and sink, run
    by the reader's tasks (``kafka/pipe.py``): the DataFrame then has no columns, a row per
    record written."""
    reader = spark.readStream.format(DATA_SOURCE)
    options = stream_options(bootstrap_servers, source, starting_offsets=starting_offsets, pinned=pinned,
                             query_id=query_id, max_records=max_records, processing_log_topic=processing_log_topic,
                             processing_log_rows=processing_log_rows,
                             throw_on_invalid_timestamp=throw_on_invalid_timestamp, read_committed=read_committed,
                             source_filter=source_filter, pipe=pipe)
    parsed = _parsed_timestamp(source)
    df = reader.options(**options).load()
    if parsed:
        df = checked_times(df, source, PLogTarget(bootstrap_servers, processing_log_topic), query_id,
                           at_sink=False, throw_on_invalid=throw_on_invalid_timestamp)
    return df


def _parsed_timestamp(source: Source) -> bool:
    """Whether ``source``'s TIMESTAMP column is text parsed with its TIMESTAMP_FORMAT."""
    col = source.column(source.timestamp_column or "")
    return col is not None and col.type.kind == t.Kind.STRING


def checked_times(df: DataFrame, table: Source, log: PLogTarget, query_id: str, *, at_sink: bool,
                  throw_on_invalid: bool = False) -> DataFrame:
    """``df`` with ROWTIME from ``table``'s TIMESTAMP column (:func:`rowtime_sql`) and the rows
    without a usable time dropped to the processing log (``kafka/timestamps.CheckedTimes``)."""
    from pyspark.sql import functions as F

    from streamsql.kafka.timestamps import COMPUTED_TIME, CheckedTimes

    column = table.column(table.timestamp_column or "")
    assert column is not None
    check = CheckedTimes(column.name, table.timestamp_format, at_sink, query_id, log, throw_on_invalid)
    return map_in_arrow(df.withColumn(COMPUTED_TIME, F.expr(rowtime_sql(table))), check, df.schema)


def rowtime_sql(source: Source) -> str:
    """Spark SQL: a row's time from ``source``'s TIMESTAMP column (BIGINT milliseconds, a
    TIMESTAMP, or a string in its TIMESTAMP_FORMAT), as milliseconds."""
    col = source.column(source.timestamp_column or "")
    assert col is not None
    ref = quote(col.name)
    if col.type.kind == t.Kind.TIMESTAMP:
        return f"unix_millis({ref})"
    if col.type.kind == t.Kind.STRING:
        fmt = source.timestamp_format or "yyyy-MM-dd'T'HH:mm:ss.SSSX"
        return f"unix_millis(to_timestamp({ref}, {string_literal(fmt)}))"
    return f"CAST({ref} AS BIGINT)"
