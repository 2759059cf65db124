"""The config a command runs with, and the Kafka cluster it talks to: shared by the commands
(``surfaces/cli.py``) and the shell's embedded engine (``surfaces/shell.py``)."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from streamsql.runtime.config import EngineConfig, default_data_dir, resolve_config

if TYPE_CHECKING:
    from streamsql.kafka.broker import BrokerRecord


@contextlib.contextmanager
def kafka_cluster(config: EngineConfig) -> Iterator[EngineConfig]:
    """Yield a config with bootstrap servers: the given ones, else the data directory's local
    broker (started in the background if none runs, and left running for the next command)."""
    if config.bootstrap_servers:
        from streamsql.kafka import settings as kafka_settings

        # every client of the cluster, the engine's and a command's own (produce), gets them
        kafka_settings.check(config.bootstrap_servers, config.client_settings())
        kafka_settings.register(config.bootstrap_servers, config.client_settings())
        yield config
        return
    from streamsql.kafka.broker import LocalBroker

    record, started = LocalBroker(config.data_dir).ensure()
    if started:
        where = "" if config.data_dir == default_data_dir() else f" --data-dir {config.data_dir}"
        note = topics_note(record, config.data_dir)
        print(f"streamsql: no bootstrap servers given; started the local broker of {config.data_dir} at "
              f"{record.bootstrap_servers} in the background (pid {record.pid}; {note}; it keeps running for "
              f"the next command: `streamsql broker stop{where}` stops it)", file=sys.stderr, flush=True)
    else:
        print(f"streamsql: using the local broker of {config.data_dir} at {record.bootstrap_servers} "
              f"(pid {record.pid})", file=sys.stderr, flush=True)
    if config.kafka:
        print(f"streamsql: the Kafka client settings given ({', '.join(sorted(config.kafka))}) are for a cluster "
              f"named with --bootstrap-servers; the local broker does not use them", file=sys.stderr, flush=True)
        config.kafka = {}
    config.bootstrap_servers = record.bootstrap_servers
    config.ephemeral_kafka = True
    try:
        yield config
    finally:
        from streamsql.runtime.spark import stop_spark

        stop_spark()


def command_config(args: argparse.Namespace) -> EngineConfig:
    """The engine config of a command's arguments (flags over environment over config file),
    with the Spark settings it names applied to the session the command will start."""
    conf = list(getattr(args, "conf", None) or [])
    if getattr(args, "spark_ui", False):
        conf.append("spark.ui.enabled=true")
    config = resolve_config(args.bootstrap_servers, args.data_dir, args.config, args.spark_master, conf,
                            getattr(args, "kafka_property", None))
    if config.spark_conf:
        from streamsql.runtime.spark import configure

        configure(config.spark_conf)
    return config


def topics_note(record: BrokerRecord, data_dir: Path) -> str:
    """Where the local broker keeps its topics, for the commands' messages."""
    from streamsql.kafka.broker import TOPICS_DIR

    if record.durable:
        return f"topics kept in {Path(data_dir) / TOPICS_DIR} across stop and start"
    return "topics not kept: gone when it stops"
