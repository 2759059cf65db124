"""Confluent's S3 sink (``io.confluent.connect.s3.S3SinkConnector``) as streamsql runs it: objects
in an S3 bucket (any S3-compatible server through ``store.url``), or in a local directory
(``store.url = file:///path``: the bucket is a directory under it).

Objects are named as Connect names them::

    <topics.dir>/<topic>/partition=<p>/<topic>+<p>+<first offset, 10 digits>.<ext>

and hold the records of one partition in offset order, at most ``flush.size`` of them. Connect
also closes a file on ``rotate.interval.ms``; here every micro-batch's end closes the partition's
open object (a micro-batch is the commit unit: an object that outlived its batch could not be
rebuilt after a crash). Because a batch is replayed with the same offsets after a failure, the
same objects get the same names and content: exactly one object per flushed range, overwritten
and never duplicated (Connect's own exactly-once rule for the S3 sink).

Formats (``format.class``): JSON (one JSON value per line, ``.json``; ``s3.compression.type=gzip``
→ ``.json.gz``), ByteArray (the raw value bytes, each followed by
``format.bytearray.separator``, default a newline; ``.bin``), Avro (an Avro container file with
the value's writer schema from Schema Registry — needs ``value.converter`` = AvroConverter; the
schema changes → a new object).
"""

from __future__ import annotations

import gzip
import io
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from streamsql.connectors import config as c
from streamsql.connectors.converters import Converter, RecordError, avro_decode_with_schema, to_json_value
from streamsql.connectors.sink import BadRecords, RawRecord

CLASS_NAME = "io.confluent.connect.s3.S3SinkConnector"
KEYS = frozenset({
    "s3.bucket.name", "s3.region", "store.url", "topics.dir", "flush.size", "rotate.interval.ms",
    "rotate.schedule.interval.ms", "format.class", "storage.class", "partitioner.class", "s3.part.size",
    "s3.compression.type", "aws.access.key.id", "aws.secret.access.key", "schema.compatibility",
    "behavior.on.null.values", "format.bytearray.separator", "format.bytearray.extension",
    "filename.offset.zero.pad.width", "s3.path.style.access.enabled", "s3.ssea.name", "timezone", "locale",
    "schema.generator.class", "directory.delim", "file.delim",
})
FORMATS = {
    "io.confluent.connect.s3.format.json.JsonFormat": "JSON",
    "io.confluent.connect.s3.format.bytearray.ByteArrayFormat": "BYTEARRAY",
    "io.confluent.connect.s3.format.avro.AvroFormat": "AVRO",
}
_DEFAULT_PARTITIONER = "io.confluent.connect.storage.partitioner.DefaultPartitioner"
_DEFAULT_STORAGE = "io.confluent.connect.s3.storage.S3Storage"


@dataclass(frozen=True)
class S3SinkConfig:
    name: str
    topics: tuple[str, ...]
    key_converter: Converter
    value_converter: Converter
    bucket: str
    flush_size: int
    format: str  # JSON | BYTEARRAY | AVRO
    region: str = "us-west-2"
    store_url: str | None = None
    topics_dir: str = "topics"
    gzip: bool = False
    separator: bytes = b"\n"
    extension: str = ".bin"
    pad: int = 10
    #: Connect's ``directory.delim`` (between the path's parts) and ``file.delim`` (between a
    #: file name's topic, partition and offset)
    directory_delim: str = "/"
    file_delim: str = "+"
    null_values: str = "FAIL"
    access_key: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)

    def object_path(self, topic: str, partition: int, offset: int) -> str:
        extensions = {"JSON": ".json.gz" if self.gzip else ".json", "AVRO": ".avro", "BYTEARRAY": self.extension}
        ext = extensions[self.format]
        d, f = self.directory_delim, self.file_delim
        return (f"{self.bucket}/{self.topics_dir}{d}{topic}{d}partition={partition}{d}"
                f"{topic}{f}{partition}{f}{offset:0{self.pad}d}{ext}")

    def writer(self) -> ObjectWriter:
        return ObjectWriter(self)

    def describe_writes(self) -> str:
        """One line for DESCRIBE CONNECTOR: what each record becomes."""
        return describe_writes(self)


def parse(settings: c.SinkSettings, config: Mapping[str, str]) -> S3SinkConfig:
    bucket = (config.get("s3.bucket.name") or "").strip()
    if not bucket:
        raise c.ConnectorError('Missing required configuration "s3.bucket.name" which has no default value.')
    if "flush.size" not in config:
        raise c.ConnectorError('Missing required configuration "flush.size" which has no default value.')
    format_class = config.get("format.class") or ""
    fmt = FORMATS.get(format_class)
    if fmt is None:
        raise c.ConnectorError(f"Invalid value {format_class or '(none)'} for configuration format.class: "
                               f"streamsql writes {', '.join(sorted(FORMATS))}")
    for key, default in (("partitioner.class", _DEFAULT_PARTITIONER), ("storage.class", _DEFAULT_STORAGE)):
        if (config.get(key) or default) != default:
            raise c.ConnectorError(f"Invalid value {config[key]} for configuration {key}: streamsql supports "
                                   f"{default} only")
    if fmt == "AVRO" and settings.value_converter.kind != "avro":
        raise c.ConnectorError("format.class AvroFormat needs value.converter=io.confluent.connect.avro.AvroConverter "
                               "(the objects carry the value's Avro schema)")
    store_url = config.get("store.url") or None
    if store_url is not None and urlparse(store_url).scheme not in ("http", "https", "file"):
        raise c.ConnectorError(f"Invalid value {store_url} for configuration store.url: expected http(s):// "
                               f"(an S3-compatible endpoint) or file:///directory")
    compression = (config.get("s3.compression.type") or "none").strip().lower()
    if compression not in ("none", "gzip"):
        raise c.ConnectorError(f"Invalid value {compression} for configuration s3.compression.type: "
                               f"String must be one of: none, gzip")
    separator = config.get("format.bytearray.separator")
    return S3SinkConfig(
        name=settings.name, topics=settings.topics, key_converter=settings.key_converter,
        value_converter=settings.value_converter, bucket=bucket,
        flush_size=c.integer(config, "flush.size", 0, minimum=1), format=fmt,
        region=config.get("s3.region") or "us-west-2", store_url=store_url,
        topics_dir=(config.get("topics.dir") or "topics").strip("/"), gzip=compression == "gzip",
        separator=(separator.encode().decode("unicode_escape").encode() if separator is not None else b"\n"),
        extension=config.get("format.bytearray.extension") or ".bin",
        pad=c.integer(config, "filename.offset.zero.pad.width", 10, minimum=1),
        directory_delim=_delimiter(config, "directory.delim", "/"), file_delim=_delimiter(config, "file.delim", "+"),
        null_values=c.choice(config, "behavior.on.null.values", "FAIL", ("IGNORE", "FAIL")),
        # the keys, else the AWS environment of the process that starts the connector: the
        # executors (other processes, other machines) get the credentials with the configuration
        access_key=config.get("aws.access.key.id") or os.environ.get("AWS_ACCESS_KEY_ID"),
        secret_key=config.get("aws.secret.access.key") or os.environ.get("AWS_SECRET_ACCESS_KEY"),
        session_token=None if config.get("aws.access.key.id") else os.environ.get("AWS_SESSION_TOKEN"),
    )


def _delimiter(config: Mapping[str, str], key: str, default: str) -> str:
    """A delimiter of object names: Connect's default when absent; never empty (parts would run
    together and two objects could get one name)."""
    value = config.get(key)
    if value is None:
        return default
    if not value:
        raise c.ConnectorError(f"Invalid value '' for configuration {key}: a delimiter cannot be empty")
    return value


CONNECTOR = c.ConnectorClass(CLASS_NAME, ("S3SinkConnector", "S3Sink"), "SINK", KEYS, parse)


class WriteFailed(Exception):
    """A record the configuration says must stop the connector, or a store that refused an object."""


@dataclass
class _OpenObject:
    topic: str
    partition: int
    first_offset: int
    schema_id: int | None = None
    schema: Any = None
    values: list[Any] = field(default_factory=list)


class ObjectWriter:
    """One task's writer: the open object of each (topic, partition), closed at ``flush.size``
    records, on an Avro schema change, and at the task's end (the micro-batch's end)."""

    def __init__(self, cfg: S3SinkConfig) -> None:
        self.cfg = cfg
        self.open: dict[tuple[str, int], _OpenObject] = {}
        self.fs = _filesystem(cfg)

    def write(self, record: RawRecord, bad: BadRecords) -> None:
        cfg = self.cfg
        if record.value is None:
            if cfg.null_values == "FAIL":
                raise WriteFailed(f"Null valued records are not writeable with current behavior.on.null.values "
                                  f"'fail' setting ({record.where()})")
            return
        schema_id, schema = None, None
        try:
            if cfg.format == "BYTEARRAY":
                value: Any = record.value
            elif cfg.format == "AVRO":
                schema_id, schema, value = avro_decode_with_schema(cfg.value_converter.registry_url or "",
                                                                    record.value)
            else:
                value = to_json_value(cfg.value_converter.decode(record.value))
        except RecordError as e:
            bad.unreadable(record, "value", str(e))
            return
        slot = (record.topic, record.partition)
        current = self.open.get(slot)
        if current is not None and current.schema_id != schema_id:
            self._close(slot)
            current = None
        if current is None:
            current = self.open[slot] = _OpenObject(record.topic, record.partition, record.offset, schema_id, schema)
        current.values.append(value)
        if len(current.values) >= cfg.flush_size:
            self._close(slot)

    def close(self, bad: BadRecords) -> None:
        for slot in list(self.open):
            self._close(slot)

    def _close(self, slot: tuple[str, int]) -> None:
        obj = self.open.pop(slot)
        cfg = self.cfg
        if cfg.format == "BYTEARRAY":
            body = b"".join(v + cfg.separator for v in obj.values)
        elif cfg.format == "AVRO":
            import fastavro

            buffer = io.BytesIO()
            fastavro.writer(buffer, obj.schema, obj.values)
            body = buffer.getvalue()
        else:
            body = b"".join(json.dumps(v, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
                            for v in obj.values)
            if cfg.gzip:
                body = gzip.compress(body, mtime=0)  # the same records give the same bytes
        path = cfg.object_path(obj.topic, obj.partition, obj.first_offset)
        try:
            if cfg.store_url is not None and cfg.store_url.startswith("file:"):
                self.fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
            with self.fs.open_output_stream(path, compression=None) as out:
                out.write(body)
        except OSError as e:
            raise WriteFailed(f"could not write object {path}: {e}") from None


_FILESYSTEMS: dict[S3SinkConfig, Any] = {}


def _filesystem(cfg: S3SinkConfig) -> Any:
    """pyarrow's S3 (or local) filesystem, rooted so that paths start with the bucket."""
    fs = _FILESYSTEMS.get(cfg)
    if fs is None:
        from pyarrow import fs as pafs

        url = urlparse(cfg.store_url) if cfg.store_url else None
        if url is not None and url.scheme == "file":
            root = url.path or "/"
            os.makedirs(root, exist_ok=True)
            fs = pafs.SubTreeFileSystem(root, pafs.LocalFileSystem())
        else:
            options: dict[str, Any] = {"region": cfg.region}
            if cfg.access_key:
                options.update(access_key=cfg.access_key, secret_key=cfg.secret_key or "")
                if cfg.session_token:
                    options["session_token"] = cfg.session_token
            if url is not None:
                options.update(endpoint_override=url.netloc, scheme=url.scheme)
            fs = pafs.S3FileSystem(**options)
        _FILESYSTEMS[cfg] = fs
    return fs


def describe_writes(cfg: S3SinkConfig) -> str:
    where = c.url_without_password(cfg.store_url) if cfg.store_url else f"s3 ({cfg.region})"
    return (f"S3 bucket {cfg.bucket} at {where}: {cfg.format.lower()} objects of at most {cfg.flush_size} "
            f"records under {cfg.topics_dir}/<topic>/partition=<p>/")
