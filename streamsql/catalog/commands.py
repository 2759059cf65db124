"""The command log: the ordered, durable list of statements that changed the catalog.

Each entry is one successful DDL/DML statement with its sequence number and the session
properties in force when it ran, so replaying the log on start rebuilds the same catalog and
restarts the same persistent queries (with the same query ids, hence the same checkpoints).

``FileCommandLog`` (JSON lines in the data directory) serves the headless runner and the shell.
A Kafka-topic-backed log with the same interface is how the server persists commands (ksqlDB's
``_confluent-ksql-<id>_command_topic``).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol


@dataclass
class Command:
    seq: int
    statement: str
    properties: dict[str, str] = field(default_factory=dict)
    #: set when a later statement undid this one (DROP, TERMINATE): kept for the sequence, not replayed
    query_id: str | None = None


class CommandLog(Protocol):
    def read_all(self) -> list[Command]: ...

    def append(self, statement: str, properties: dict[str, str], query_id: str | None = None) -> Command: ...

    def next_seq(self) -> int: ...


class FileCommandLog:
    """Commands as JSON lines; appends are flushed and fsynced before the statement is reported done."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._commands: list[Command] | None = None

    def read_all(self) -> list[Command]:
        if self._commands is None:
            self._commands = []
            if self.path.exists():
                for line in self.path.read_text(encoding="utf-8").splitlines():
                    if line.strip():
                        self._commands.append(Command(**json.loads(line)))
        return list(self._commands)

    def next_seq(self) -> int:
        cmds = self.read_all()
        return cmds[-1].seq + 1 if cmds else 0

    def append(self, statement: str, properties: dict[str, str], query_id: str | None = None) -> Command:
        cmd = Command(self.next_seq(), statement, dict(properties), query_id)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(asdict(cmd)) + "\n")
            f.flush()
            os.fsync(f.fileno())
        assert self._commands is not None
        self._commands.append(cmd)
        return cmd

    def reset(self) -> None:
        if self.path.exists():
            self.path.unlink()
        self._commands = []
