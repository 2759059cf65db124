"""Kafka Connect's file sink (``org.apache.kafka.connect.file.FileStreamSinkConnector``): each
record's value as one line appended to ``file``, on the machine of the task that writes it (a
local or shared path; in local mode, the machine streamsql runs on).

The value is written as the value converter reads it: a string as it is, bytes as UTF-8 text,
anything structured as compact JSON (Connect would print a Java ``toString``, ``{a=1}``). Tasks
append whole lines under an exclusive lock, so lines never interleave; like Connect's, this sink
is at-least-once: a batch replayed after a crash appends its lines again.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass

from streamsql.connectors import config as c
from streamsql.connectors.converters import Converter, RecordError, to_json_value
from streamsql.connectors.sink import BadRecords, RawRecord

CLASS_NAME = "org.apache.kafka.connect.file.FileStreamSinkConnector"
KEYS = frozenset({"file", "batch.size"})


@dataclass(frozen=True)
class FileSinkConfig:
    name: str
    topics: tuple[str, ...]
    key_converter: Converter
    value_converter: Converter
    file: str
    #: the directory ``file`` must stay in (the server's ``streamsql.connect.file.dir``, resolved;
    #: set by ``connectors.policy``): checked again when the executor writes
    root: str = ""

    def writer(self) -> LineWriter:
        return LineWriter(self)

    def describe_writes(self) -> str:
        return f"each value as a line appended to {self.file}"


def parse(settings: c.SinkSettings, config: Mapping[str, str]) -> FileSinkConfig:
    path = (config.get("file") or "").strip()
    if not path:
        raise c.ConnectorError("FileStreamSinkConnector needs 'file' (streamsql's tasks have no console to print to)")
    if not os.path.isabs(path):
        raise c.ConnectorError(f"Invalid value {path} for configuration file: give an absolute path (tasks run "
                               f"in Spark's executors, whose working directory is not yours)")
    return FileSinkConfig(settings.name, settings.topics, settings.key_converter, settings.value_converter, path)


CONNECTOR = c.ConnectorClass(CLASS_NAME, ("FileStreamSinkConnector", "FileStreamSink"), "SINK", KEYS, parse)


class LineWriter:
    """One task's lines, appended at the task's end in one locked write."""

    def __init__(self, cfg: FileSinkConfig) -> None:
        self.cfg = cfg
        self.lines: list[bytes] = []

    def write(self, record: RawRecord, bad: BadRecords) -> None:
        try:
            value = self.cfg.value_converter.decode(record.value)
        except RecordError as e:
            bad.unreadable(record, "value", str(e))
            return
        if value is None:
            text = "null"
        elif isinstance(value, str):
            text = value
        elif isinstance(value, (bytes, bytearray)):
            text = bytes(value).decode("utf-8", "replace")
        else:
            text = json.dumps(to_json_value(value), separators=(",", ":"), ensure_ascii=False)
        self.lines.append(text.encode("utf-8") + b"\n")

    def close(self, bad: BadRecords) -> None:
        if not self.lines:
            return
        directory = os.path.dirname(self.cfg.file)
        if directory:
            os.makedirs(directory, exist_ok=True)
        if self.cfg.root:  # a symlink made since the statement was checked must not lead out
            resolved = os.path.realpath(self.cfg.file)
            if os.path.commonpath([resolved, self.cfg.root]) != self.cfg.root:
                raise c.ConnectorError(f"Connector {self.cfg.name}: {self.cfg.file} resolves to {resolved}, "
                                       f"outside {self.cfg.root}; nothing was written")
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | (os.O_NOFOLLOW if self.cfg.root else 0)
        with os.fdopen(os.open(self.cfg.file, flags, 0o644), "ab") as out:
            fcntl.flock(out, fcntl.LOCK_EX)
            try:
                out.write(b"".join(self.lines))
                out.flush()
            finally:
                fcntl.flock(out, fcntl.LOCK_UN)
        self.lines.clear()
