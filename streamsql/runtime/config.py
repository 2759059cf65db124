"""Engine settings: where Kafka is, where state lives, and ksqlDB-style properties.

Bootstrap servers are resolved in this order: the ``--bootstrap-servers`` flag, the
``STREAMSQL_BOOTSTRAP_SERVERS`` environment variable, ``bootstrap.servers`` in the config file
(``--config FILE``, else ``streamsql.properties`` in the working directory). None of them set
means: start an embedded broker for the command's lifetime.

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
    "ksql.query.pull.table.scan.enabled": "true",
    "ksql.query.pull.range.scan.enabled": "true",
    "ksql.timestamp.throw.on.invalid": "false",
}
VALID_OFFSET_RESETS = {"earliest", "latest"}


@dataclass
class EngineConfig:
    bootstrap_servers: str | None = None
    data_dir: Path = field(default_factory=lambda: Path.cwd() / ".streamsql")
    spark_master: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    #: Spark settings (``spark.*``) for the session this process creates
    spark_conf: dict[str, str] = field(default_factory=dict)

    def property(self, name: str) -> str:
        return self.properties.get(name, DEFAULT_PROPERTIES.get(name, ""))


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
                   spark_conf: list[str] | dict[str, str] | None = None) -> EngineConfig:
    props: dict[str, str] = {}
    path = Path(config_file) if config_file else Path.cwd() / "streamsql.properties"
    if config_file and not path.exists():
        raise ConfigError(f"config file not found: {path}")
    if path.exists():
        props = read_properties_file(path)
    servers = bootstrap_servers or os.environ.get("STREAMSQL_BOOTSTRAP_SERVERS") or props.pop("bootstrap.servers", None)
    directory = Path(data_dir or props.pop("streamsql.data.dir", None) or Path.cwd() / ".streamsql")
    flags = spark_conf if isinstance(spark_conf, dict) else parse_spark_conf(spark_conf)
    conf = {k: props.pop(k) for k in [k for k in props if k.startswith("spark.")]}
    conf.update(flags)
    conf_master = conf.pop("spark.master", None)
    master = spark_master or conf_master
    return EngineConfig(servers or None, directory, master, props, conf)
