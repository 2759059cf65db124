"""The command log kept in a Kafka topic: how the REST server makes statements durable.

ksqlDB's design (``_confluent-ksql-<service id>_command_topic``): one partition, so the log is
totally ordered; every successful DDL/DML statement is one record; a starting server reads the
topic from the beginning and replays it, which rebuilds the catalog and restarts the persistent
queries with the same ids (so each resumes from its checkpoint). Here the topic is compacted and
each record's key is its own sequence number, so compaction never removes a command while still
bounding what a deleted-then-recreated topic name could leave behind.

The sequence number of a command is its position in the log (ksqlDB's
``commandSequenceNumber``), which the server returns and waits for.

The topic belongs to the server (``runtime/internal_topics.py``): clients can neither declare a
source over it, write, print nor delete it. A command never carries a secret in its properties:
clients cannot set secret-looking properties (``runtime/property_policy.py``), and
:meth:`KafkaCommandLog.append` leaves out any that still come (a property that looks like a secret
is server configuration, which a replay takes from the server's configuration again).
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict

from streamsql.catalog.commands import Command
from streamsql.errors import KafkaError
from streamsql.redaction import looks_secret


def command_topic_name(service_id: str) -> str:
    """``_streamsql-<service id>-command_topic`` (ksqlDB: ``_confluent-ksql-<id>_command_topic``)."""
    return f"_streamsql-{service_id.rstrip('_') or 'default'}-command_topic"


class KafkaCommandLog:
    """Same interface as :class:`~streamsql.catalog.commands.FileCommandLog`, over a compacted topic.

    Appends wait for the broker's acknowledgement before returning, so a statement is reported
    done only once it is durable. Reading happens once (at start); later appends are cached.
    """

    def __init__(self, bootstrap_servers: str, topic: str) -> None:
        from streamsql.kafka.admin import KafkaAdmin

        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self._admin = KafkaAdmin(bootstrap_servers)
        self._commands: list[Command] | None = None
        self._lock = threading.Lock()

    def ensure_topic(self) -> None:
        self._admin.create_topic(self.topic, 1, 1, {"cleanup.policy": "compact"})

    def read_all(self) -> list[Command]:
        with self._lock:
            if self._commands is None:
                self.ensure_topic()
                commands: list[Command] = []
                for rec in self._admin.read_all(self.topic):
                    if rec.value is None:
                        continue
                    try:
                        data = json.loads(rec.value)
                        commands.append(Command(int(data["seq"]), str(data["statement"]),
                                                dict(data.get("properties") or {}), data.get("query_id")))
                    except (ValueError, KeyError, TypeError) as e:
                        raise KafkaError(f"command topic '{self.topic}' offset {rec.offset}: unreadable "
                                         f"command ({e})") from None
                commands.sort(key=lambda c: c.seq)
                self._commands = commands
            return list(self._commands)

    def next_seq(self) -> int:
        cmds = self.read_all()
        return cmds[-1].seq + 1 if cmds else 0

    def last_seq(self) -> int:
        """The highest sequence number written (-1 for an empty log)."""
        return self.next_seq() - 1

    def append(self, statement: str, properties: dict[str, str], query_id: str | None = None) -> Command:
        seq = self.next_seq()
        cmd = Command(seq, statement, {k: v for k, v in properties.items() if not looks_secret(k)}, query_id)
        self._admin.produce(self.topic, str(seq).encode(), json.dumps(asdict(cmd)).encode(), flush=True)
        with self._lock:
            assert self._commands is not None
            self._commands.append(cmd)
        return cmd

    def truncate(self) -> None:
        """Empty the log (TERMINATE CLUSTER): the topic is deleted and created again."""
        with self._lock:
            try:
                self._admin.delete_topic(self.topic)
            except KafkaError:
                pass
            self.ensure_topic()
            self._commands = []

    def reset(self) -> None:
        """Forget the cache (the topic itself belongs to the cluster; a new cluster starts empty)."""
        with self._lock:
            self._commands = None

    def close(self) -> None:
        self._admin.close()
