"""The Kafka data source's options, parsed in one place: what ``spark.readStream.format(
"streamsql_kafka")`` (``SourceOptions``) and its writer (``SinkOptions``) are given.

Options are strings (Spark's data source API), parsed once into frozen, picklable dataclasses
that travel to the executors inside a reader or writer. Spark lower-cases option names, so each
is looked up case-insensitively (:func:`option`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from streamsql.errors import ConfigError
from streamsql.formats import schema_registry_settings as registry_settings
from streamsql.kafka.transactions import OPTION as EXACTLY_ONCE_OPTION

#: the source option that carries the query's stateless step and sink run in the reading task
#: (a ``kafka/pipe.ReaderPipe`` as JSON)
PIPE_OPTION = "pipe"
#: the sink option of a stateful step whose rows reach the sink packed (``kafka/sink.unpacked``):
#: the rows' Arrow schema, serialized and base64-encoded
PACKED_OPTION = "packedSchema"


def option(options: Mapping[str, str], name: str, default: str | None = None) -> str | None:
    """Spark lower-cases option names; look them up case-insensitively either way."""
    low = {k.lower(): v for k, v in options.items()}
    return low.get(name.lower(), default)


def librdkafka_settings(options: Mapping[str, str]) -> dict[str, str]:
    """Pass-through ``kafka.*`` options (minus the bootstrap servers) as librdkafka settings.

    Spark lower-cases option names, which is harmless: librdkafka's names are lower case."""
    return {k[len("kafka."):]: v for k, v in options.items()
            if k.lower().startswith("kafka.") and k.lower() != "kafka.bootstrap.servers"}


@dataclass(frozen=True)
class SourceOptions:
    """Everything a source needs, parsed once; picklable (it travels inside partitions)."""

    bootstrap: str
    topic: str
    #: where a query without a checkpoint begins: ``earliest``, ``latest``, or ``pinned`` at
    #: ``start_at`` (partition → offset; Spark's -2/-1 mean earliest/latest for one partition)
    starting: str = "latest"
    start_at: dict[int, int] | None = None
    max_records: int | None = None
    key_spec: str | None = None
    value_spec: str | None = None
    header_columns: tuple[tuple[str, str, str, str | None], ...] = ()
    processing_log_topic: str | None = None
    #: ``ksql.logging.processing.rows.include``: an undecodable record's bytes go into its
    #: processing-log entry (``recordB64``); off by default, as in ksqlDB
    log_rows: bool = False
    query_id: str = "streamsql"
    batch_rows: int = 20000
    poll_timeout_s: float = 120.0
    kafka: dict[str, str] = field(default_factory=dict)
    #: a windowed source (TUMBLING/HOPPING/SESSION): keys end with Kafka Streams' window suffix,
    #: exposed as WINDOWSTART/WINDOWEND; time windows' ends are start + size
    window_type: str | None = None
    window_size_ms: int | None = None
    #: a BIGINT or TIMESTAMP column that is the record's time (ksqlDB's TIMESTAMP property);
    #: ``timestamp_throw``: a record without a usable time fails the query instead of being dropped
    timestamp_column: str | None = None
    timestamp_throw: bool = False
    #: the Schema Registry client configurations the formats need (formats/schema_registry_settings.py)
    registry_clients: str | None = None
    #: the WHERE conjuncts applied to each decoded batch (``planner/pushdown.py``'s JSON tree);
    #: Spark still applies the whole WHERE after the reader
    source_filter: str | None = None
    #: the query's whole stateless step and its sink, run in the reading task (``kafka/pipe.py``)
    pipe: str | None = None

    @staticmethod
    def parse(options: Mapping[str, str]) -> SourceOptions:
        bootstrap = option(options, "kafka.bootstrap.servers")
        topic = option(options, "topic")
        if not bootstrap:
            raise ConfigError("the Kafka source needs option 'kafka.bootstrap.servers'")
        if not topic:
            raise ConfigError("the Kafka source needs option 'topic'")
        starting, start_at = _starting_offsets(option(options, "startingOffsets", "latest") or "latest", topic)
        max_records = option(options, "maxRecordsPerBatch")
        if max_records is not None and int(max_records) < 1:
            raise ConfigError(f"maxRecordsPerBatch must be at least 1, not {max_records}")
        headers = json.loads(option(options, "headerColumns", "[]") or "[]")
        return SourceOptions(
            bootstrap=bootstrap, topic=topic, starting=starting, start_at=start_at,
            max_records=int(max_records) if max_records else None,
            key_spec=option(options, "keySpec"), value_spec=option(options, "valueSpec"),
            header_columns=tuple((n, t, r, h) for n, t, r, h in headers),
            processing_log_topic=option(options, "processingLogTopic") or None,
            log_rows=(option(options, "processingLogRows") or "").lower() == "true",
            query_id=option(options, "queryId", "streamsql") or "streamsql",
            batch_rows=int(option(options, "arrowBatchRows", "20000") or 20000),
            poll_timeout_s=float(option(options, "pollTimeoutMs", "120000") or 120000) / 1000.0,
            kafka=librdkafka_settings(options),
            window_type=(option(options, "windowType") or "").upper() or None,
            window_size_ms=int(option(options, "windowSizeMs") or 0) or None,
            timestamp_column=option(options, "timestampColumn") or None,
            timestamp_throw=(option(options, "timestampThrowOnInvalid") or "").lower() == "true",
            registry_clients=option(options, registry_settings.OPTION),
            source_filter=option(options, "sourceFilter") or None,
            pipe=option(options, PIPE_OPTION) or None,
        )

    @property
    def decoded(self) -> bool:
        return self.key_spec is not None or self.value_spec is not None


def _starting_offsets(text: str, topic: str) -> tuple[str, dict[int, int] | None]:
    """``earliest``, ``latest``, or Spark's JSON form ``{"topic": {"0": 23, "1": -1}}`` (offsets
    of this source's topic; -2 earliest, -1 latest) pinned."""
    value = text.strip()
    if value.lower() in ("earliest", "latest"):
        return value.lower(), None
    form = json.dumps({topic: {"<partition>": "<offset>"}}).replace('"<offset>"', "<offset>")
    problem = f"startingOffsets must be 'earliest', 'latest' or {form}, not '{value}'"
    try:
        given = json.loads(value)
    except ValueError:
        raise ConfigError(problem) from None
    offsets = given.get(topic) if isinstance(given, dict) and set(given) == {topic} else None
    if not isinstance(offsets, dict):
        raise ConfigError(problem)
    try:
        start_at = {int(p): int(o) for p, o in offsets.items()}
    except (TypeError, ValueError):
        raise ConfigError(problem) from None
    if any(p < 0 or o < -2 for p, o in start_at.items()):
        raise ConfigError(problem)
    return "pinned", start_at


@dataclass(frozen=True)
class SinkOptions:
    """Everything the sink needs, parsed once; picklable (it travels inside the writer)."""

    bootstrap: str
    topic: str
    key_spec: str | None = None
    value_spec: str | None = None
    kafka: dict[str, str] = field(default_factory=dict)
    #: TUMBLING/HOPPING/SESSION: keys are windowed (bounds in ``__WINDOWSTART``/``__WINDOWEND``)
    window_type: str | None = None
    #: the key is computed by the query (PARTITION BY): a multi-column key whose columns are all
    #: null is still an object of nulls; a key passed through from the source that was null stays null
    computed_key: bool = False
    #: the Schema Registry client configurations the formats need (formats/schema_registry_settings.py)
    registry_clients: str | None = None
    #: ``processing.guarantee=exactly_once_v2``: each task's rows are one Kafka transaction
    exactly_once: bool = False
    #: the rows come packed (:data:`PACKED_OPTION`): their Arrow schema as base64 text
    packed_schema: str | None = None

    @staticmethod
    def parse(options: Mapping[str, str]) -> SinkOptions:
        bootstrap = option(options, "kafka.bootstrap.servers")
        topic = option(options, "topic")
        if not bootstrap:
            raise ConfigError("the Kafka sink needs option 'kafka.bootstrap.servers'")
        if not topic:
            raise ConfigError("the Kafka sink needs option 'topic'")
        window = option(options, "windowType")
        return SinkOptions(bootstrap, topic, option(options, "keySpec"), option(options, "valueSpec"),
                           librdkafka_settings(options), window.upper() if window else None,
                           (option(options, "computedKey") or "").lower() == "true",
                           option(options, registry_settings.OPTION),
                           (option(options, EXACTLY_ONCE_OPTION) or "").lower() == "true",
                           option(options, PACKED_OPTION) or None)
