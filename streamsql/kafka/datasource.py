"""``KafkaDataSource``: streamsql's Kafka source and sink as a PySpark Python Data Source,
registered under the short name ``streamsql_kafka`` (see ``streamsql.runtime.spark``).

This class only parses options and hands out readers and writers; the work is in
``source.py`` (the readers; reading ranges, decoding and offsets beside it) and ``sink.py``
(encoding, producing); options in ``options.py``.
Topic existence is checked here, on the driver, so a missing topic fails ``load()`` /
``start()`` with ``Topic 'x' does not exist`` instead of a task failure deep in a worker.

The reader and writer modules are imported where they are used: Spark starts a fresh Python
process for every streaming query's offsets (its source runner), which imports this module and
then needs the reader only — not the writer, nor every format (docs/performance.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, DataSourceStreamWriter
from pyspark.sql.types import StructType

from streamsql.kafka.collector import shared_admin_client

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SHORT_NAME = "streamsql_kafka"
#: an option of :func:`warm_up`'s load only: the schema without a topic check (no broker needed)
WARM_UP_OPTION = "streamsqlWarmUp"


def check_topic(bootstrap: str, topic: str, settings: dict[str, str] | None = None) -> None:
    """Raise KafkaError ``Topic 'x' does not exist`` unless ``topic`` is in the cluster."""

    from streamsql.kafka.admin import topic_partitions
    from streamsql.kafka.clients import client_config, common_settings

    topic_partitions(shared_admin_client(client_config(bootstrap, common_settings(settings))), topic)


def warm_up(spark: SparkSession) -> None:
    """Load this source once, reading nothing, when a session starts. The first ``load()`` of a
    Python data source in a JVM costs ~2.3 s (Spark's classes for Python sources, the Python
    planner process importing PySpark and this module), every later one ~0.05–0.1 s (measured on
    2 cores): paid here, a session's first CREATE … AS SELECT or push query does not wait for it
    (docs/performance.md)."""
    spark.readStream.format(SHORT_NAME).options(**{
        "kafka.bootstrap.servers": "warm-up.invalid:9092", "topic": "warm-up", WARM_UP_OPTION: "true"}).load()


def read_stream(spark: SparkSession, options: Mapping[str, str]) -> DataFrame:
    """``spark.readStream.format("streamsql_kafka")...load()``, but a missing topic or a bad
    option raises streamsql's own error here, on the driver (inside ``load()`` Spark would wrap
    it in an AnalysisException with a worker traceback)."""
    from streamsql.kafka.options import SourceOptions

    opts = SourceOptions.parse(options)
    check_topic(opts.bootstrap, opts.topic, opts.kafka)
    return spark.readStream.format(SHORT_NAME).options(**dict(options)).load()


class KafkaDataSource(DataSource):
    """Options are documented in ``options.SourceOptions`` and ``options.SinkOptions``."""

    @classmethod
    def name(cls) -> str:
        return SHORT_NAME

    def schema(self) -> StructType:
        from streamsql.kafka.decoding import source_schema
        from streamsql.kafka.options import SourceOptions

        opts = SourceOptions.parse(self.options)
        if self.options.get(WARM_UP_OPTION) != "true":
            check_topic(opts.bootstrap, opts.topic, opts.kafka)
        if opts.pipe is not None:  # rows are written by the reader's task, Spark counts them (kafka/pipe.py)
            return StructType([])
        return source_schema(opts)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from streamsql.kafka.options import SourceOptions
        from streamsql.kafka.source import KafkaStreamReader

        return KafkaStreamReader(SourceOptions.parse(self.options), schema)

    def reader(self, schema: StructType) -> DataSourceReader:
        from streamsql.kafka.options import SourceOptions
        from streamsql.kafka.source import KafkaBatchReader

        opts = SourceOptions.parse({"startingOffsets": "earliest", **dict(self.options)})
        return KafkaBatchReader(opts, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from streamsql.kafka.options import SinkOptions
        from streamsql.kafka.sink import KafkaStreamWriter

        opts = SinkOptions.parse(self.options)
        check_topic(opts.bootstrap, opts.topic, opts.kafka)
        return KafkaStreamWriter(opts)
