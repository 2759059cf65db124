"""PROTOBUF (Schema Registry framing) and PROTOBUF_NOSR (bare messages), as ksqlDB reads and writes them.

Schemas are .proto files. A source's columns generate one (:func:`proto_schema`: message
``ConnectDefault1``, a field per column numbered from 1, structs as nested messages, DECIMAL as
``confluent.type.Decimal``, TIMESTAMP as ``google.protobuf.Timestamp``, DATE as
``google.type.Date``, TIME as ``google.type.TimeOfDay``, MAP as ``map<string, V>``, ARRAY as
``repeated``); registered schemas, with the schemas they import (registry references), are
compiled by protoc itself (:func:`compile_proto`, grpcio-tools' compiler in process), so any file
protoc accepts is read, and parsing and serializing run in the protobuf runtime (upb), not in
Python loops. ``google.protobuf.Struct``/``Value``/``ListValue`` columns hold JSON text; other
well-known types (``Any``, ``Duration``…) are the structs they are.

Nulls follow ksqlDB's ``PROTOBUF_NULLABLE_REPRESENTATION``: by default proto3 has no null for
scalars, so a null scalar is written as its default and reads back as ``0``/``""``/``false``;
``OPTIONAL`` marks fields ``optional`` (presence kept), ``WRAPPER`` uses the
``google.protobuf.*Value`` wrappers. Message-typed fields (structs, decimals, timestamps) are
null when absent in every mode.

Both keys and values are always messages (ksqlDB does not unwrap single PROTOBUF columns).

The Confluent framing is: magic byte 0, 4-byte schema id, the message-index path (zig-zag
varints; a lone ``0`` byte for the first message), then the message.
"""

from __future__ import annotations

import ast
import datetime as dt
import functools
import json
import re
import tempfile
import threading
import warnings
from collections.abc import Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa

from streamsql import types as t
from streamsql.errors import ConfigError
from streamsql.formats.base import DecodeResult, FormatSpec, inferred_name
from streamsql.formats.coerce import FieldError, RecordError, field_failure
from streamsql.formats.columns import arrow_types, column_values, decode_records
from streamsql.formats.schema_registry import WriterSchemas, frame, split_header

DEFAULT_MESSAGE = "ConnectDefault1"
DEFAULT_DECIMAL_PRECISION = 64
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_EPOCH_DATE = dt.date(1970, 1, 1)

# --- well-known files every schema may import -------------------------------------------------

_DECIMAL_PROTO = ('syntax = "proto3"; package confluent.type; '
                  'message Decimal { bytes value = 1; uint32 precision = 2; int32 scale = 3; }')
_DATE_PROTO = 'syntax = "proto3"; package google.type; message Date { int32 year = 1; int32 month = 2; int32 day = 3; }'
_TIME_PROTO = ('syntax = "proto3"; package google.type; '
               'message TimeOfDay { int32 hours = 1; int32 minutes = 2; int32 seconds = 3; int32 nanos = 4; }')
_WELL_KNOWN_TEXT = {
    "confluent/type/decimal.proto": _DECIMAL_PROTO,
    "google/type/date.proto": _DATE_PROTO,
    "google/type/timeofday.proto": _TIME_PROTO,
    # Confluent's own: where its converter keeps a decimal's precision and scale (field_meta params)
    "confluent/meta.proto": (
        'syntax = "proto3"; package confluent; import "google/protobuf/descriptor.proto"; '
        'message Meta { string doc = 1; map<string, string> params = 2; repeated string tags = 3; } '
        'extend google.protobuf.FileOptions { Meta file_meta = 1088; } '
        'extend google.protobuf.MessageOptions { Meta message_meta = 1088; } '
        'extend google.protobuf.FieldOptions { Meta field_meta = 1088; } '
        'extend google.protobuf.EnumOptions { Meta enum_meta = 1088; } '
        'extend google.protobuf.EnumValueOptions { Meta enum_value_meta = 1088; }'),
}
_WRAPPERS = {
    "google.protobuf.BoolValue": t.BOOLEAN, "google.protobuf.Int32Value": t.INTEGER,
    "google.protobuf.UInt32Value": t.BIGINT, "google.protobuf.Int64Value": t.BIGINT,
    "google.protobuf.UInt64Value": t.BIGINT, "google.protobuf.DoubleValue": t.DOUBLE,
    "google.protobuf.FloatValue": t.DOUBLE, "google.protobuf.StringValue": t.STRING,
    "google.protobuf.BytesValue": t.BYTES,
}
#: protobuf's JSON values: a column of one holds its JSON text (their canonical JSON mapping)
_JSON_TYPES = frozenset({"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"})
_WRAPPER_OF = {t.Kind.BOOLEAN: "google.protobuf.BoolValue", t.Kind.INTEGER: "google.protobuf.Int32Value",
               t.Kind.BIGINT: "google.protobuf.Int64Value", t.Kind.DOUBLE: "google.protobuf.DoubleValue",
               t.Kind.STRING: "google.protobuf.StringValue", t.Kind.BYTES: "google.protobuf.BytesValue"}


# --- SQL → .proto text ----------------------------------------------------------------------------


def proto_schema(columns: Sequence[t.Column], *, full_name: str | None = None, nullable: str | None = None) -> str:
    """The proto3 file ksqlDB would register for these columns."""
    name = (full_name or DEFAULT_MESSAGE).strip()
    if not name:
        raise ConfigError("fullSchemaName cannot be empty")
    package, _, message = name.rpartition(".")
    imports: set[str] = set()
    body = _message(message, [(c.name, c.type) for c in columns], imports, (nullable or "").upper(), "  ")
    head = 'syntax = "proto3";\n'
    if package:
        head += f"package {package};\n"
    head += "".join(f'import "{i}";\n' for i in sorted(imports))
    return head + "\n" + body


def _message(name: str, fields: list[tuple[str, t.SqlType]], imports: set[str], nullable: str, indent: str) -> str:
    lines: list[str] = []
    nested: list[str] = []
    for number, (field, sql) in enumerate(fields, start=1):
        if not _IDENT.fullmatch(field):
            raise ConfigError(f"Schema is not compatible with Protobuf: illegal field name: {field}")
        label, type_name = _field_type(field, sql, imports, nullable, nested, indent)
        options = ""
        if isinstance(sql, t.Decimal):  # Confluent's converter keeps precision and scale here
            imports.add("confluent/meta.proto")
            options = (f' [(confluent.field_meta) = {{ params: [{{ key: "precision", value: "{sql.precision}" }}, '
                       f'{{ key: "scale", value: "{sql.scale}" }}] }}]')
        lines.append(f"{indent}{label}{type_name} {field} = {number}{options};")
    inner = "".join(nested)
    return f"{indent[:-2]}message {name} {{\n{inner}" + "\n".join(lines) + f"\n{indent[:-2]}}}\n"


def _field_type(field: str, sql: t.SqlType, imports: set[str], nullable: str, nested: list[str],
                indent: str) -> tuple[str, str]:
    if isinstance(sql, t.Array):
        if isinstance(sql.element, (t.Array, t.Map)):
            raise ConfigError(f"PROTOBUF cannot hold {sql} (a repeated field of repeated values)")
        _, element = _field_type(field, sql.element, imports, "", nested, indent)
        return "repeated ", element
    if isinstance(sql, t.Map):
        if sql.key.kind != t.Kind.STRING:
            raise ConfigError("PROTOBUF format only supports MAP types with STRING keys")
        _, value = _field_type(field, sql.value, imports, "", nested, indent)
        return "", f"map<string, {value}>"
    if isinstance(sql, t.Struct):
        type_name = f"{field}Struct" if not field.endswith("Struct") else f"{field}_"
        nested.append(_message(type_name, [(f.name, f.type) for f in sql.fields], imports, nullable, indent + "  "))
        return "", type_name
    if isinstance(sql, t.Decimal):
        imports.add("confluent/type/decimal.proto")
        return "", "confluent.type.Decimal"
    if sql.kind == t.Kind.TIMESTAMP:
        imports.add("google/protobuf/timestamp.proto")
        return "", "google.protobuf.Timestamp"
    if sql.kind == t.Kind.DATE:
        imports.add("google/type/date.proto")
        return "", "google.type.Date"
    if sql.kind == t.Kind.TIME:
        imports.add("google/type/timeofday.proto")
        return "", "google.type.TimeOfDay"
    if nullable == "WRAPPER":
        imports.add("google/protobuf/wrappers.proto")
        return "", _WRAPPER_OF[sql.kind]
    scalar = {t.Kind.BOOLEAN: "bool", t.Kind.INTEGER: "int32", t.Kind.BIGINT: "int64", t.Kind.DOUBLE: "double",
              t.Kind.STRING: "string", t.Kind.BYTES: "bytes"}[sql.kind]
    return ("optional " if nullable == "OPTIONAL" else ""), scalar


# --- .proto text → descriptors (protoc) ----------------------------------------------------------

_MAIN_FILE = "streamsql_schema.proto"
_META_EXTENSION = 1088  # confluent.field_meta (and its siblings) on the options messages
_compile_lock = threading.Lock()


def compile_proto(text: str, references: Mapping[str, str] | None = None) -> list[Any]:
    """The ``FileDescriptorProto``s of a schema and everything it imports, dependencies first.

    protoc itself compiles (grpcio-tools' compiler, in process), so whatever protoc accepts is
    read: proto2 and proto3, nested types, maps, oneofs, services, extensions, options, the
    well-known types shipped with protobuf (``google/protobuf/any.proto``, ``struct.proto``…),
    Confluent's and Google's types ksqlDB uses, and ``references`` (import name → text: the
    schemas a registry lists as references). ksqlDB's leniencies are kept: a file without a
    ``syntax`` is proto3, and Confluent's ``(confluent.field_meta)`` option needs no import.
    ``ConfigError`` with the file, line and column of the first problem."""
    from google.protobuf import descriptor_pb2

    compiled = _compiled(text, tuple(sorted((references or {}).items())))
    return [descriptor_pb2.FileDescriptorProto.FromString(data) for data in compiled]


@functools.lru_cache(maxsize=256)
def _compiled(text: str, references: tuple[tuple[str, str], ...]) -> tuple[bytes, ...]:
    """protoc's output for one schema, kept: a worker or a statement meets the same schema again."""
    from grpc_tools import _protoc_compiler as protoc  # type: ignore[import-untyped]

    files = {**_WELL_KNOWN_TEXT, **dict(references), _MAIN_FILE: _lenient(text)}
    with tempfile.TemporaryDirectory(prefix="streamsql-proto-") as directory:
        root = Path(directory)
        for name, body in files.items():
            path = (root / name).resolve()
            if not path.is_relative_to(root.resolve()) or not name.endswith(".proto"):
                raise ConfigError(f"Invalid Protobuf schema reference name '{name}' (a relative .proto path)")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body, encoding="utf-8")
        try:
            with _compile_lock, warnings.catch_warnings():
                warnings.simplefilter("ignore")  # protoc's warnings (an unused import) are not the user's problem
                generated = protoc.get_protos(_MAIN_FILE.encode(), [str(root).encode(), _protoc_include()])
        except protoc.ProtocErrors as e:
            raise ConfigError(f"Invalid Protobuf schema: {_protoc_problem(e.errors())}") from None
    return tuple(_descriptor_of(code) for _name, code in generated)


def _lenient(text: str) -> str:
    if not re.search(r"^\s*syntax\s*=", re.sub(r"//[^\n]*|/\*.*?\*/", "", text, flags=re.DOTALL)):
        text = 'syntax = "proto3"; ' + text  # same line: protoc's line numbers stay the user's
    if "(confluent." in text and "confluent/meta.proto" not in text:
        text += '\nimport "confluent/meta.proto";'
    return text


def _protoc_include() -> bytes:
    import grpc_tools

    return str(Path(grpc_tools.__file__).parent / "_proto").encode()


def _protoc_problem(errors: Sequence[Any]) -> str:
    first = errors[0]
    name = first.filename.decode(errors="replace")
    where = "" if name == _MAIN_FILE else f"in '{name}' "
    message = first.message.decode(errors="replace")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}line {first.line + 1}, column {first.column + 1}: {message}{more}"


_SERIALIZED_FILE = re.compile(rb"AddSerializedFile\((b'(?:[^'\\]|\\.)*')\)")


def _descriptor_of(code: bytes) -> bytes:
    """The serialized ``FileDescriptorProto`` inside protoc's generated Python module (its
    ``AddSerializedFile(b'...')`` argument), read as a literal: nothing of the module runs."""
    found = _SERIALIZED_FILE.search(code)
    if found is None:
        raise ConfigError("Invalid Protobuf schema: protoc produced no descriptor")
    data = ast.literal_eval(found.group(1).decode("ascii"))
    assert isinstance(data, bytes)
    return data


def _meta_params(options: Any) -> dict[str, str]:
    """The ``params`` of Confluent's ``Meta`` option (extension 1088) on an options message."""
    params: dict[str, str] = {}
    for meta in _length_delimited(options.SerializeToString(), _META_EXTENSION):
        for entry in _length_delimited(meta, 2):  # map<string, string> params = 2
            key = next(iter(_length_delimited(entry, 1)), b"").decode()
            params[key] = next(iter(_length_delimited(entry, 2)), b"").decode()
    return params


def _length_delimited(data: bytes, number: int) -> list[bytes]:
    """The values of the length-delimited field ``number`` in a serialized message."""
    out, pos = [], 0
    while pos < len(data):
        tag, pos = _varint(data, pos)
        wire = tag & 7
        if wire == 0:
            _, pos = _varint(data, pos)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            size, pos = _varint(data, pos)
            if tag >> 3 == number:
                out.append(data[pos:pos + size])
            pos += size
        else:  # groups do not occur in options
            break
    return out


def _varint(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    """A base-128 varint at ``pos``: (value, the position after it)."""
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


# --- descriptors and message classes ------------------------------------------------------------


class ProtoSchema:
    """A compiled schema (:func:`compile_proto`): its message classes, looked up by message-index
    path, in a descriptor pool of its own."""

    def __init__(self, text: str, references: Mapping[str, str] | None = None) -> None:
        from google.protobuf import descriptor_pool

        self.pool = descriptor_pool.DescriptorPool()
        files = compile_proto(text, references)
        for fdp in files:
            try:
                self.pool.Add(fdp)
            except Exception as e:  # noqa: BLE001 - what protoc accepts the runtime should too
                raise ConfigError(f"Invalid Protobuf schema: {e}") from None
        self.file = files[-1]
        self._decimal_params: dict[tuple[str, str], tuple[int | None, int | None]] = {}
        self._read_decimal_params(self.file.package, self.file.message_type)
        self.file_descriptor = self.pool.FindFileByName(_MAIN_FILE)

    def _read_decimal_params(self, scope: str, messages: Any) -> None:
        for md in messages:
            full = f"{scope}.{md.name}" if scope else md.name
            for f in md.field:
                if f.HasField("options"):
                    params = _meta_params(f.options)
                    p, s = params.get("precision"), params.get("scale")
                    if p or s:
                        self._decimal_params[(full, f.name)] = (int(p) if p else None, int(s) if s else None)
            self._read_decimal_params(full, md.nested_type)

    def decimal_params(self, message: Any, field: str) -> tuple[int | None, int | None]:
        return self._decimal_params.get((message.full_name, field), (None, None))

    def message(self, indexes: Sequence[int] = (0,)) -> Any:
        """The descriptor at a message-index path (``[0]``: the file's first message)."""
        desc = self.file_descriptor.message_types_by_name[self.file.message_type[indexes[0]].name]
        for i in indexes[1:]:
            desc = desc.nested_types[i]
        return desc

    def message_path(self, full_name: str | None) -> tuple[int, ...]:
        """The message-index path of the top-level message named ``full_name`` (with or without
        the file's package; ksqlDB's ``*_SCHEMA_FULL_NAME``), or the first message's."""
        if full_name:
            package = self.file.package
            for i, md in enumerate(self.file.message_type):
                if full_name.strip() in (md.name, f"{package}.{md.name}" if package else md.name):
                    return (i,)
        return (0,)

    def message_class(self, indexes: Sequence[int] = (0,)) -> Any:
        from google.protobuf import message_factory

        return message_factory.GetMessageClass(self.message(indexes))


def _repeated(f: Any) -> bool:
    flag = getattr(f, "is_repeated", None)
    if flag is None:
        from google.protobuf.descriptor import FieldDescriptor as FD

        return bool(f.label == FD.LABEL_REPEATED)
    return bool(flag() if callable(flag) else flag)


def _index_prefix(path: Sequence[int]) -> bytes:
    """Confluent's message-index prefix of ``path`` (zig-zag varints: count, then indexes; the
    first message, ``[0]``, is the single byte 0)."""
    if tuple(path) == (0,):
        return b"\x00"
    out = bytearray()
    for n in (len(path), *path):
        z = (n << 1) ^ (n >> 63)
        while z > 0x7F:
            out.append((z & 0x7F) | 0x80)
            z >>= 7
        out.append(z)
    return bytes(out)


def _message_indexes(payload: memoryview) -> tuple[list[int], int]:
    """(path, bytes read) of the message-index prefix (zig-zag varints)."""
    def varint(pos: int) -> tuple[int, int]:
        value, pos = _varint(payload, pos)
        return (value >> 1) ^ -(value & 1), pos
    count, pos = varint(0)
    if count == 0:
        return [0], pos
    path = []
    for _ in range(count):
        value, pos = varint(pos)
        path.append(value)
    return path, pos


# --- SQL types of a message (inference) ----------------------------------------------------------


def columns_from_proto(text: str, *, role: str, full_name: str | None = None,
                       references: Mapping[str, str] | None = None, keep_names: bool = False) -> list[t.Column]:
    """The columns of the schema's message ``full_name`` (its first message by default); field
    names upper-cased at every level unless ``keep_names`` (a schema named by its id)."""
    schema = ProtoSchema(text, references)
    desc = schema.message(schema.message_path(full_name))
    return [t.Column(inferred_name(f.name, keep_names),
                     _sql_type(schema, desc, f, (desc.full_name,), keep_names), role) for f in desc.fields]


def _sql_type(schema: ProtoSchema, owner: Any, f: Any, within: tuple[str, ...] = (),
              keep_names: bool = False) -> t.SqlType:
    """``within``: the messages enclosing this field, to refuse a recursive one by name."""
    if f.message_type is not None and f.message_type.GetOptions().map_entry:
        value = f.message_type.fields_by_name["value"]
        return t.Map(t.STRING, _sql_type(schema, f.message_type, value, within, keep_names))
    element = _element_type(schema, owner, f, within, keep_names)
    return t.Array(element) if _repeated(f) else element


def _element_type(schema: ProtoSchema, owner: Any, f: Any, within: tuple[str, ...],
                  keep_names: bool = False) -> t.SqlType:
    from google.protobuf.descriptor import FieldDescriptor as FD

    if f.message_type is not None:
        name = f.message_type.full_name
        if name in _JSON_TYPES:
            return t.STRING
        if name in within:
            raise ConfigError(f"Protobuf message '{name}' contains itself (field '{f.full_name}'): a recursive "
                              f"message cannot be a column type")
        if name == "confluent.type.Decimal":
            p, s = schema.decimal_params(owner, f.name)
            return t.Decimal(p or DEFAULT_DECIMAL_PRECISION, s or 0)
        if name == "google.protobuf.Timestamp":
            return t.TIMESTAMP
        if name == "google.type.Date":
            return t.DATE
        if name == "google.type.TimeOfDay":
            return t.TIME
        if name in _WRAPPERS:
            return _WRAPPERS[name]
        return t.Struct(tuple(t.StructField(inferred_name(x.name, keep_names),
                                            _sql_type(schema, f.message_type, x, (*within, name), keep_names))
                              for x in f.message_type.fields))
    if f.type == FD.TYPE_ENUM:
        return t.STRING
    return {FD.TYPE_BOOL: t.BOOLEAN, FD.TYPE_INT32: t.INTEGER, FD.TYPE_SINT32: t.INTEGER, FD.TYPE_SFIXED32: t.INTEGER,
            FD.TYPE_STRING: t.STRING, FD.TYPE_BYTES: t.BYTES, FD.TYPE_DOUBLE: t.DOUBLE, FD.TYPE_FLOAT: t.DOUBLE,
            }.get(f.type, t.BIGINT)


# --- message ↔ values ----------------------------------------------------------------------------


def message_to_data(msg: Any, *, json_like: bool = False) -> dict[str, Any]:
    """A message as a dict of its fields: absent message fields and unset optional/wrapper fields
    are None, absent proto3 scalars their defaults (as ksqlDB reads them). ``json_like`` gives
    what a QTT file writes (decimals as ``Decimal``, bytes base64, times as integers)."""
    out = {}
    for f in msg.DESCRIPTOR.fields:
        out[f.name] = _field_value(msg, f, json_like)
    return out


def _field_value(msg: Any, f: Any, json_like: bool) -> Any:
    from google.protobuf.descriptor import FieldDescriptor as FD

    value = getattr(msg, f.name)
    if f.message_type is not None and f.message_type.GetOptions().map_entry:
        vf = f.message_type.fields_by_name["value"]
        if vf.message_type is not None:
            return {k: _single(value[k], vf, json_like) for k in value}
        return {k: _scalar(value[k], vf, json_like) for k in value}
    if _repeated(f):
        return [_single(v, f, json_like) if f.message_type is not None else _scalar(v, f, json_like) for v in value]
    if f.message_type is not None:
        return _single(value, f, json_like) if msg.HasField(f.name) else None
    if f.has_presence and not msg.HasField(f.name):
        return None
    if value == b"" and f.type == FD.TYPE_BYTES:
        return None  # ksqlDB reads an unset proto3 bytes field as null (strings read as "")
    return _scalar(value, f, json_like)


def _scalar(v: Any, f: Any, json_like: bool) -> Any:
    from google.protobuf.descriptor import FieldDescriptor as FD

    if f.type == FD.TYPE_ENUM:
        ev = f.enum_type.values_by_number.get(v)
        return ev.name if ev is not None else str(v)
    if json_like and f.type == FD.TYPE_BYTES:
        import base64

        return base64.b64encode(v).decode()
    return v


def _single(m: Any, f: Any, json_like: bool) -> Any:
    name = m.DESCRIPTOR.full_name
    if name == "confluent.type.Decimal":
        unscaled = int.from_bytes(m.value, "big", signed=True) if m.value else 0
        return Decimal(unscaled).scaleb(-m.scale)
    if name == "google.protobuf.Timestamp":
        return m.seconds * 1000 + m.nanos // 1_000_000
    if name == "google.type.Date":
        if not m.year:
            return 0
        return (dt.date(m.year, m.month or 1, m.day or 1) - _EPOCH_DATE).days
    if name == "google.type.TimeOfDay":
        return ((m.hours * 60 + m.minutes) * 60 + m.seconds) * 1000 + m.nanos // 1_000_000
    if name in _WRAPPERS:
        return _scalar(m.value, m.DESCRIPTOR.fields_by_name["value"], json_like)
    if name in _JSON_TYPES:
        from google.protobuf import json_format

        return json.dumps(json_format.MessageToDict(m), separators=(",", ":"))
    return message_to_data(m, json_like=json_like)


def fill_message(msg: Any, data: dict[str, Any]) -> None:
    """Set ``msg``'s fields from a dict (names matched exactly, then case-insensitively); None
    leaves a field unset. Values are domain values or JSON data (numbers for DECIMAL, ...)."""
    by_upper = {f.name.upper(): f for f in msg.DESCRIPTOR.fields}
    for key, value in data.items():
        f = msg.DESCRIPTOR.fields_by_name.get(key) or by_upper.get(str(key).upper())
        if f is None or value is None:
            continue
        try:
            _set(msg, f, value)
        except (TypeError, ValueError) as e:
            raise FieldError(f"cannot write {value!r} to Protobuf field '{f.name}': {e}") from None


def _set(msg: Any, f: Any, value: Any) -> None:

    target = getattr(msg, f.name)
    if f.message_type is not None and f.message_type.GetOptions().map_entry:
        vf = f.message_type.fields_by_name["value"]
        items = value.items() if isinstance(value, dict) else value
        for k, v in items:
            if v is None:
                continue
            if vf.message_type is not None:
                _to_message(target[k], v)
            else:
                target[k] = _scalar_in(v, vf)
        return
    if _repeated(f):
        for v in value:
            if f.message_type is not None:
                _to_message(target.add(), v if v is not None else {})
            elif v is not None:
                target.append(_scalar_in(v, f))
        return
    if f.message_type is not None:
        _to_message(target, value)
        if not target.ListFields():
            target.SetInParent()
        return
    setattr(msg, f.name, _scalar_in(value, f))


def _to_message(m: Any, value: Any) -> None:
    name = m.DESCRIPTOR.full_name
    if name == "confluent.type.Decimal":
        d = value if isinstance(value, Decimal) else Decimal(str(value))
        exponent = d.as_tuple().exponent
        scale = -exponent if isinstance(exponent, int) and exponent < 0 else 0
        unscaled = int(d.scaleb(scale))
        m.value = unscaled.to_bytes(max(1, (unscaled.bit_length() + 8) // 8), "big", signed=True)
        m.precision = len(d.as_tuple().digits)
        m.scale = scale
    elif name == "google.protobuf.Timestamp":
        millis = int(value)
        m.seconds, m.nanos = millis // 1000, (millis % 1000) * 1_000_000
    elif name == "google.type.Date":
        day = _EPOCH_DATE + dt.timedelta(days=int(value))
        m.year, m.month, m.day = day.year, day.month, day.day
    elif name == "google.type.TimeOfDay":
        ms = int(value)
        m.hours, m.minutes, m.seconds, m.nanos = ms // 3_600_000, ms // 60_000 % 60, ms // 1000 % 60, ms % 1000 * 10**6
    elif name in _WRAPPERS:
        m.value = _scalar_in(value, m.DESCRIPTOR.fields_by_name["value"])
    elif name in _JSON_TYPES:
        from google.protobuf import json_format

        try:
            json_format.Parse(value if isinstance(value, str) else json.dumps(value), m)
        except json_format.ParseError as e:
            raise ValueError(f"not {name} JSON: {e}") from None
    else:
        fill_message(m, value)


def _scalar_in(v: Any, f: Any) -> Any:
    from google.protobuf.descriptor import FieldDescriptor as FD

    if f.type == FD.TYPE_ENUM:
        ev = f.enum_type.values_by_name.get(str(v))
        return ev.number if ev is not None else int(v)
    if f.type in (FD.TYPE_DOUBLE, FD.TYPE_FLOAT):
        return float(v)
    if f.type == FD.TYPE_STRING:
        return v if isinstance(v, str) else str(v)
    if f.type == FD.TYPE_BYTES:
        if isinstance(v, str):
            import base64

            return base64.b64decode(v)
        return bytes(v)
    if f.type == FD.TYPE_BOOL:
        return bool(v)
    return int(v)


# --- the serde -----------------------------------------------------------------------------------


class ProtobufSerde:
    """PROTOBUF (``registry=True``: Confluent framing, writer schemas by id) or PROTOBUF_NOSR."""

    def __init__(self, spec: FormatSpec, registry: bool) -> None:
        self._columns = spec.columns
        self._types = arrow_types(spec.columns)
        self._registry = registry
        nullable = spec.options.get("nullable")
        # the schema the columns generate: what PROTOBUF_NOSR reads and writes, and a check that
        # the columns fit Protobuf at all (a ConfigError at statement time)
        self._own_text = proto_schema(spec.columns, full_name=spec.options.get("fullName"), nullable=nullable)
        self._own: ProtoSchema | None = None
        self._writers = WriterSchemas(spec.options, ProtoSchema)
        self._writer_id = spec.options.get("writerId")
        self._full_name = spec.options.get("fullName")
        self._readers: dict[tuple[Any, ...], Any] = {}
        self._null_row = (None,) * len(spec.columns)
        # a key whose columns are all null is a null key (not a message of defaults), as in ksqlDB
        self._is_key = bool(spec.columns) and spec.columns[0].is_key

    def _own_schema(self) -> ProtoSchema:
        if self._own is None:
            self._own = ProtoSchema(self._own_text)
        return self._own

    def _reader(self, schema_id: int | None, path: Sequence[int]) -> Any:
        key = (schema_id, *path)
        cls = self._readers.get(key)
        if cls is None:
            schema = self._writers.get(schema_id) if schema_id is not None else self._own_schema()
            cls = schema.message_class(path)
            self._readers[key] = cls
        return cls

    def decode(self, data: Sequence[bytes | None]) -> DecodeResult:
        return decode_records(data, self._decode_one, self._null_row, self._types)

    def _decode_one(self, raw: bytes) -> tuple[Any, ...]:
        try:
            if self._registry:
                schema_id, payload = split_header(raw)
                path, used = _message_indexes(payload)
                cls = self._reader(schema_id, path)
                body = bytes(payload[used:])
            else:
                cls, body = self._reader(None, (0,)), raw
            msg = cls.FromString(body)
        except (ValueError, KeyError, IndexError) as e:
            raise RecordError(f"Invalid Protobuf record: {e.args[0] if e.args else type(e).__name__}") from None
        except Exception as e:  # noqa: BLE001 - protobuf's DecodeError and friends
            raise RecordError(f"Invalid Protobuf record: {type(e).__name__}: {e}") from None
        data = message_to_data(msg)
        upper = {k.upper(): v for k, v in data.items()}
        row = []
        for c in self._columns:
            value = data[c.name] if c.name in data else upper.get(c.name.upper())
            try:
                row.append(None if value is None else _domain(value, c.type))
            except FieldError as e:
                raise field_failure(c.name, e) from None
        return tuple(row)

    def encode(self, batch: pa.RecordBatch) -> list[bytes | None]:
        writer_id = 0  # framed into records only with a registry
        if self._registry:
            if self._writer_id is None:
                raise ConfigError("PROTOBUF output needs a Schema Registry: set 'ksql.schema.registry.url'")
            writer_id = int(self._writer_id)
            path = self._writers.get(writer_id).message_path(self._full_name)
            cls = self._reader(writer_id, path)
        else:
            path = (0,)
            cls = self._reader(None, path)
        prefix = _index_prefix(path)
        columns = [column_values(batch, c.name) for c in self._columns]
        out: list[bytes | None] = []
        for r in range(batch.num_rows):
            row = {c.name: col[r] for c, col in zip(self._columns, columns)}
            if self._is_key and all(v is None for v in row.values()):
                out.append(None)
                continue
            msg = cls()
            try:
                fill_message(msg, row)
            except FieldError as e:
                raise RecordError(str(e)) from None
            body = msg.SerializeToString()
            out.append(frame(writer_id, prefix + body) if self._registry else body)
        return out


def _domain(value: Any, sql: t.SqlType) -> Any:
    """A message value as the column's domain value (Arrow-ready)."""
    if isinstance(sql, t.Array):
        return [None if v is None else _domain(v, sql.element) for v in value]
    if isinstance(sql, t.Map):
        return [(k, None if v is None else _domain(v, sql.value)) for k, v in value.items()]
    if isinstance(sql, t.Struct):
        if not isinstance(value, dict):
            raise FieldError(f"cannot convert {value!r} to {sql}")
        upper = {k.upper(): v for k, v in value.items()}
        return {f.name: (None if (v := value.get(f.name, upper.get(f.name.upper()))) is None else _domain(v, f.type))
                for f in sql.fields}
    if isinstance(sql, t.Decimal):
        from streamsql.formats.coerce import fit_decimal

        return fit_decimal(value if isinstance(value, Decimal) else Decimal(str(value)), sql.precision, sql.scale)
    kind = sql.kind
    if kind == t.Kind.TIMESTAMP:
        return int(value) * 1000
    if kind == t.Kind.STRING:
        return value if isinstance(value, str) else str(value)
    if kind == t.Kind.DOUBLE:
        return float(value)
    if kind in (t.Kind.INTEGER, t.Kind.BIGINT, t.Kind.DATE, t.Kind.TIME):
        return int(value)
    return value
