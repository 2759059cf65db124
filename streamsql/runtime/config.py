"""Engine settings: where Kafka is, where state lives, and ksqlDB-style properties.

Bootstrap servers are resolved in this order: the ``--bootstrap-servers`` flag, the
``STREAMSQL_BOOTSTRAP_SERVERS`` environment variable, ``bootstrap.servers`` in the config file
(``--config FILE``, else ``streamsql.properties`` in the working directory). None of them set
means: the data directory's local broker (``kafka/broker.LocalBroker``).

Every property and environment variable streamsql reads is listed below with what it does
(:data:`PROPERTY_DOCS`, :data:`ENVIRONMENT_DOCS`); ``docs/reference.md`` is generated from them and
from the argument parser (``python -m streamsql.surfaces.reference``), and a test fails when the
code reads a name these lists do not document.

Spark settings: ``spark.master`` and every other ``spark.*`` key of the config file go to Spark, not
to the ksqlDB properties; ``--conf key=value`` flags (repeatable) override the file's. The data
directory may be a shared path (NFS and the like, mounted at the same place on every node): it is
only ever named by its path, and on a cluster the query checkpoints under it must be reachable
from every executor, since Spark's state stores write there.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from streamsql.errors import ConfigError

#: ksqlDB properties we honour, with their defaults.
DEFAULT_PROPERTIES: dict[str, str] = {
    "auto.offset.reset": "latest",
    "ksql.service.id": "default_",
    "ksql.output.topic.name.prefix": "",
    "ksql.persistence.wrap.single.values": "true",
    "ksql.streams.max.records.per.batch": "100000",
    "ksql.streams.commit.interval.ms": "500",
    "ksql.query.pull.table.scan.enabled": "true",
    "ksql.query.pull.range.scan.enabled": "true",
    "ksql.timestamp.throw.on.invalid": "false",
    "ksql.logging.processing.rows.include": "false",
    "ksql.assert.topic.default.timeout.ms": "1000",
    "ksql.assert.schema.default.timeout.ms": "1000",
}
VALID_OFFSET_RESETS = {"earliest", "latest"}
#: ksqlDB reads a Kafka Streams property with or without this prefix
STREAMS_PREFIX = "ksql.streams."


def property_names(name: str) -> tuple[str, str]:
    """``name`` and its other spelling: ``ksql.streams.cache.max.bytes.buffering`` and
    ``cache.max.bytes.buffering`` are one setting in ksqlDB, whichever a config file, a ``SET``
    or a REST request's ``streamsProperties`` uses (the server strips the prefix)."""
    if name.startswith(STREAMS_PREFIX):
        return name, name[len(STREAMS_PREFIX):]
    return name, STREAMS_PREFIX + name


def same_property(a: str, b: str) -> bool:
    return b in property_names(a)


COMMIT_INTERVAL_PROPERTY = "ksql.streams.commit.interval.ms"


def commit_interval_ms(text: str) -> int:
    """``ksql.streams.commit.interval.ms`` as milliseconds (ksqlDB's message for a bad one)."""
    try:
        ms = int(text.strip())
    except ValueError:
        raise ConfigError(f"Invalid value {text} for configuration commit.interval.ms: "
                          f"Not a number of type LONG") from None
    if ms < 0:
        raise ConfigError(f"Invalid value {text} for configuration commit.interval.ms: Value must be at least 0")
    return ms

#: every property streamsql reads: name -> (default, what it does). Set in the config file, with
#: SET in a session, or as a request's ``streamsProperties`` (``ksql.streams.`` may prefix a name).
PROPERTY_DOCS: dict[str, tuple[str, str]] = {
    "bootstrap.servers": ("", "Kafka to use (config file only; `--bootstrap-servers` and "
                              "`STREAMSQL_BOOTSTRAP_SERVERS` come first); none: the data directory's local broker"),
    "streamsql.data.dir": ("./.streamsql", "the data directory: catalog (command log), checkpoints, table "
                                           "stores, the local broker's record (config file only; `--data-dir` first)"),
    "spark.*": ("", "any Spark setting (config file, or `--conf key=value`); `spark.master` as `--spark-master`"),
    "auto.offset.reset": ("latest", "where a new query without committed offsets starts: `earliest` or `latest`"),
    "ksql.service.id": ("default_", "prefix of the processing-log topic and of the consumer-group names shown"),
    "ksql.output.topic.name.prefix": ("", "prefix of the topic a CREATE ... AS SELECT names after its source"),
    "ksql.persistence.wrap.single.values": ("true", "whether a single value column is written wrapped in a "
                                                    "record (JSON, Avro, Protobuf)"),
    "ksql.persistence.default.format.key": ("KAFKA", "KEY_FORMAT when a statement names none"),
    "ksql.persistence.default.format.value": ("", "VALUE_FORMAT when a statement names none (none: required)"),
    "ksql.streams.cache.max.bytes.buffering": ("10485760", "ksqlDB's record cache: > 0 emits an aggregation's "
                                                           "latest value per key per micro-batch, 0 every update"),
    "ksql.streams.max.records.per.batch": ("100000", "most Kafka records a query reads per micro-batch"),
    "ksql.streams.commit.interval.ms": ("500", "with the record cache on, a persistent aggregation or table "
                                               "runs a micro-batch at most this often while records trickle in "
                                               "(a backlog is read in batches back to back); 0: whenever records "
                                               "arrive"),
    "processing.guarantee": ("at_least_once", "`at_least_once` (a micro-batch replayed after a crash is written "
                                              "again) or `exactly_once_v2` (each task's output is one Kafka "
                                              "transaction a replay does not repeat; readers read committed "
                                              "records only); taken when a query starts"),
    "ksql.query.pull.table.scan.enabled": ("true", "pull queries may scan a whole table"),
    "ksql.sink.partitions": ("", "(legacy) partitions of a CREATE … AS SELECT's new topic when its WITH clause "
                                 "sets none (else the source's)"),
    "ksql.sink.replicas": ("", "(legacy) replicas of a CREATE … AS SELECT's new topic when its WITH clause "
                               "sets none (else 1)"),
    "ksql.assert.topic.default.timeout.ms": ("1000", "how long ASSERT TOPIC waits without a TIMEOUT clause"),
    "ksql.assert.schema.default.timeout.ms": ("1000", "how long ASSERT SCHEMA waits without a TIMEOUT clause"),
    "ksql.query.pull.range.scan.enabled": ("true", "pull queries may scan a key range"),
    "ksql.timestamp.throw.on.invalid": ("false", "fail the query (instead of logging and dropping the record) "
                                                 "on a record whose TIMESTAMP column is null, unparsable or negative"),
    "ksql.logging.processing.rows.include": ("false", "an undecodable record's bytes go into its processing-log "
                                                      "entry (`recordB64`)"),
    "ksql.extension.dir": ("", "a directory of Python function files loaded beside the seed functions"),
    "ksql.schema.registry.url": ("", "Schema Registry for AVRO, PROTOBUF and JSON_SR"),
    "ksql.schema.registry.basic.auth.credentials.source": ("", "`USER_INFO` (the user and password in "
                                                               "`…basic.auth.user.info`) or `URL` (in the URL)"),
    "ksql.schema.registry.basic.auth.user.info": ("", "`<user>:<password>` for the registry (never shown)"),
    "ksql.schema.registry.bearer.auth.credentials.source": ("", "`STATIC_TOKEN` (`…bearer.auth.token`) or "
                                                                "`OAUTHBEARER` (`…bearer.auth.issuer.endpoint.url`, "
                                                                "`…client.id`, `…client.secret`, `…scope`)"),
    "ksql.schema.registry.ssl.truststore.location": ("", "a PEM file with the CA the registry's certificate is "
                                                         "checked against (`ssl.truststore.type=PEM`; JKS is refused)"),
    "ksql.schema.registry.ssl.keystore.location": ("", "a PEM file with the client certificate and key for a "
                                                       "registry asking for one (`…ssl.key.password` if encrypted)"),
    "ksql.internal.topic.replicas": ("1", "replication factor of the engine's own topics"),
    "ksql.internal.topic.min.insync.replicas": ("1", "min.insync.replicas of the engine's own topics"),
    "ksql.functions.collect_list.limit": ("", "most elements COLLECT_LIST keeps (none: no limit)"),
    "ksql.functions.collect_set.limit": ("", "most elements COLLECT_SET keeps (none: no limit)"),
    "ksql.max.push.queries": ("100", "push queries open at once across the server (server config only; clients "
                                     "sharing one Spark query count each); one more is refused"),
    "ksql.query.persistent.active.limit": ("2147483647", "persistent queries at once (server config only); a request "
                                                         "that would start more is refused whole"),
    "ksql.query.pull.max.qps": ("2147483647", "pull queries per second across the server (server config only); "
                                              "past it they are answered 429"),
    "streamsql.aggregation.buckets": ("", "state buckets of a new aggregation (none: one per source partition; "
                                          "frozen in its checkpoint)"),
    "streamsql.statement.max.bytes": ("262144", "most bytes (UTF-8) one statement may have, before and after "
                                                 "`${variable}` substitution; a longer one is refused with a "
                                                 "syntax error (config file only: a client cannot raise it)"),
    "streamsql.aggregation.operator": ("auto", "`auto` (Spark's own aggregation where it is exact, else the "
                                               "Python operator) or `python` (always the Python operator)"),
    "ksql.properties.overrides.denylist": ("", "(server configuration only) more properties, comma-separated, that "
                                               "a server's clients may not set with SET or `streamsProperties` "
                                               "(docs/security.md lists those refused always)"),
    "streamsql.connect.file.dir": ("<data dir>/files", "(server configuration only) the directory a FileStream "
                                                       "sink connector's `file` must be under (a relative `file` is "
                                                       "taken under it); never a directory code is loaded from"),
    "streamsql.connect.url.allowlist": ("", "(server configuration only) where connectors may send data: "
                                            "comma-separated URL prefixes (`https://es.example.com:9200/`) or "
                                            "`host[:port]` entries, checked against Elasticsearch's "
                                            "`connection.url`, S3's `store.url` and a converter's "
                                            "`schema.registry.url`; none: anywhere"),
}

#: every environment variable streamsql reads: name -> what it does
ENVIRONMENT_DOCS: dict[str, str] = {
    "STREAMSQL_BOOTSTRAP_SERVERS": "Kafka to use when `--bootstrap-servers` is not given",
    "STREAMSQL_KAFKA_*": "a Kafka client setting for every client, e.g. `STREAMSQL_KAFKA_SASL_PASSWORD` for "
                         "`sasl.password` (underscores become dots; over the config file's, under "
                         "`--kafka-property`)",
    "STREAMSQL_SCHEMA_REGISTRY_*": "a Schema Registry setting, e.g. `STREAMSQL_SCHEMA_REGISTRY_BASIC_AUTH_USER_INFO` "
                                   "for `ksql.schema.registry.basic.auth.user.info` (over the config file's)",
    "STREAMSQL_RANDOM_ORDER": "`1`: `./test.sh` runs the suite in a random order (pytest-randomly)",
    "STREAMSQL_SPARK_MASTER": "Spark master when neither `--spark-master` nor `spark.master` is given "
                              "(default `local[2]`)",
    "STREAMSQL_LOG_LEVEL": "Python logging level of the command (default WARNING)",
    "STREAMSQL_SPARK_LOG_LEVEL": "Spark's log level (default ERROR)",
    "STREAMSQL_CLASS_ARCHIVE": "the driver JVM's class-data sharing archive (default "
                               "`<python environment>/share/streamsql/spark-classes.jsa`, built by "
                               "`scripts/setup.sh` or `python -m streamsql.setup.class_archive`); empty: none",
    "STREAMSQL_WARM_UP": "`0`: a server or interactive shell does not warm its local Spark session in the "
                         "background while it waits for the first statement (default on; `streamsql run` and "
                         "`test` never warm: docs/performance.md, \"A warmed session\")",
    "STREAMSQL_ZYGOTE": "`0`: a local Spark session starts its Python processes (the worker and planning "
                        "daemons, each streaming query's source runner) as new interpreters instead of forking "
                        "them from one pre-imported process (default on; off too when `spark.pyspark.python` or "
                        "`PYSPARK_PYTHON` names another interpreter: docs/performance.md, \"Python processes "
                        "forked, not started\")",
    "STREAMSQL_TANSU": "path of a tansu binary to use instead of the `broker` extra's",
    "STREAMSQL_QTT_DIR": "(tests) the directory holding ksqlDB's query-validation tests `qtt/` folder",
    "STREAMSQL_QTT_RATCHET": "(tests) which ids of the conformance ratchet the suite re-runs: unset or `sample` "
                             "every file's first id and the last of the largest, `third` a deterministic third "
                             "(every file's first and last id and every third between), `full` every id",
    "STREAMSQL_DRILL_RECORDS": "(drills) input records of the crash drills at scale (default 200000)",
    "STREAMSQL_FUZZ_SCALE": "(tests) the REST fuzzer runs this many times longer than its suite budget (default 1)",
    "PYSPARK_PYTHON": "the Python Spark's workers run (default: the driver's, in local mode)",
    "RUST_LOG": "the embedded broker's (tansu's) log level (default warn)",
    "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION": "S3 sink connector credentials "
    "when its `aws.*` keys do not give them",
}


def switched_on(variable: str) -> bool:
    """An environment switch that is on unless set to ``0``, ``false``, ``no`` or ``off`` (any case)."""
    return os.environ.get(variable, "1").strip().lower() not in ("0", "false", "no", "off")


def default_data_dir() -> Path:
    """``./.streamsql``: the data directory when neither a flag nor the config file names one."""
    return Path.cwd() / ".streamsql"


@dataclass
class EngineConfig:
    bootstrap_servers: str | None = None
    data_dir: Path = field(default_factory=default_data_dir)
    spark_master: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    #: Spark settings (``spark.*``) for the session this process creates
    spark_conf: dict[str, str] = field(default_factory=dict)
    #: the Kafka cluster's client settings (security, client id) in librdkafka's names, for
    #: every client (kafka/settings.py); settings of this kind in ``properties`` are added to them
    kafka: dict[str, str] = field(default_factory=dict)
    #: the cluster is a broker whose topics end with it (the data directory's local broker, an
    #: embedded one): state written against it may be reset when the cluster changes
    ephemeral_kafka: bool = False
    #: statements come from a server's untrusted clients: their SET is held to the client
    #: property policy (runtime/property_policy.py); embedded use runs as the operator
    untrusted_clients: bool = False

    def property(self, name: str) -> str:
        """The config file's value of ``name`` (either spelling), else its default."""
        for spelling in property_names(name):
            if spelling in self.properties:
                return self.properties[spelling]
        return next((DEFAULT_PROPERTIES[s] for s in property_names(name) if s in DEFAULT_PROPERTIES), "")

    def statement_max_bytes(self) -> int:
        """``streamsql.statement.max.bytes`` from the config file (never a client's SET: the
        limit guards the server against its clients), for ``sql.parse(max_statement_bytes=)``."""
        text = self.property("streamsql.statement.max.bytes") or PROPERTY_DOCS["streamsql.statement.max.bytes"][0]
        try:
            value = int(text.strip())
        except ValueError:
            value = 0
        if value <= 0:
            raise ConfigError(f"streamsql.statement.max.bytes must be a positive number of bytes, got '{text}'")
        return value

    def client_settings(self) -> dict[str, str]:
        """The Kafka client settings: :attr:`kafka` over those among the properties (a config
        made in Python, e.g. ``streamsql.connect(properties=...)``)."""
        from streamsql.kafka import settings as kafka_settings

        return {**kafka_settings.from_sources(self.properties), **self.kafka}


def read_properties_file(path: Path) -> dict[str, str]:
    """Java-style ``key=value`` lines; ``#`` comments."""
    props: dict[str, str] = {}
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        if "=" not in line:
            raise ConfigError(f"{path}:{number}: expected key=value, got '{line}'")
        key, value = line.split("=", 1)
        props[key.strip()] = value.strip()
    return props


def parse_spark_conf(pairs: list[str] | None) -> dict[str, str]:
    """``--conf key=value`` flags: Spark settings (keys start with ``spark.``); later ones win."""
    conf: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--conf expects key=value, got '{pair}'")
        if not key.startswith("spark."):
            raise ConfigError(f"--conf '{key}': only Spark settings (spark.*) can be given with --conf; "
                              f"ksqlDB properties go in the config file or a SET statement")
        conf[key] = value.strip()
    return conf


def resolve_config(bootstrap_servers: str | None = None, data_dir: str | None = None,
                   config_file: str | None = None, spark_master: str | None = None,
                   spark_conf: list[str] | dict[str, str] | None = None,
                   kafka_properties: list[str] | None = None) -> EngineConfig:
    props: dict[str, str] = {}
    path = Path(config_file) if config_file else Path.cwd() / "streamsql.properties"
    if config_file and not path.exists():
        raise ConfigError(f"config file not found: {path}")
    if path.exists():
        props = read_properties_file(path)
    from streamsql.formats import schema_registry_settings as registry_settings

    props.update(registry_settings.from_environment(os.environ))  # STREAMSQL_SCHEMA_REGISTRY_*
    servers = bootstrap_servers or os.environ.get("STREAMSQL_BOOTSTRAP_SERVERS") or props.pop("bootstrap.servers", None)
    directory = Path(data_dir or props.pop("streamsql.data.dir", None) or default_data_dir())
    flags = spark_conf if isinstance(spark_conf, dict) else parse_spark_conf(spark_conf)
    conf = {k: props.pop(k) for k in [k for k in props if k.startswith("spark.")]}
    conf.update(flags)
    conf_master = conf.pop("spark.master", None)
    master = spark_master or conf_master
    from streamsql.kafka import settings as kafka_settings

    kafka = kafka_settings.from_sources(props, os.environ, kafka_properties)
    props = {k: v for k, v in props.items() if not kafka_settings.is_client_setting(k)}
    return EngineConfig(servers or None, directory, master, props, conf, kafka=kafka)
