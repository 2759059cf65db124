"""AVRO, in Confluent's wire format (magic byte, schema id, Avro binary), as ksqlDB reads and writes it.

Schemas, both ways:
  * SQL → Avro (:func:`avro_schema`): what ksqlDB's ``AvroSchemas`` generates for a sink: a record
    ``io.confluent.ksql.avro_schemas.KsqlDataSourceSchema`` whose fields are optional (``["null",
    T]``, default null); DECIMAL as ``bytes``/``decimal``, DATE ``int``/``date``, TIME
    ``int``/``time-millis``, TIMESTAMP ``long``/``timestamp-millis``; structs as nested records named
    after their path; maps with STRING keys only (Avro maps have string keys).
  * Avro → SQL (:func:`columns_from_avro`): schema inference for ``CREATE STREAM s WITH
    (VALUE_FORMAT='AVRO')`` without columns: a record's fields become columns (names upper-cased,
    so unquoted SQL names reach them), any other schema one column ``ROWVAL`` (key: ``ROWKEY``);
    enums read as STRING, fixed as BYTES, ``["null", T]`` as T.

Reading uses the writer's schema named by the record's id (:class:`WriterSchemas`), so records
written with older or wider schemas read fine; fields are matched to columns by exact name, then
upper-cased, like JSON, and a value of another type is coerced the way ksqlDB coerces JSON
(numbers to STRING, and so on). A record that does not decode fails alone, with the reason.

A single key column, or a single value column with ``WRAP_SINGLE_VALUE=false``, is the bare Avro
value of that column (an "anonymous" schema); otherwise a record of the columns.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import re
from collections.abc import Callable, Sequence
from decimal import Context, Decimal
from typing import Any

import pyarrow as pa

from streamsql import types as t
from streamsql.errors import ConfigError
from streamsql.formats.base import DecodeResult, FormatSpec, inferred_name
from streamsql.formats.coerce import FieldError, RecordError, cannot_convert, field_failure, fit_decimal, shown
from streamsql.formats.columns import arrow_types, column_values, decode_records
from streamsql.formats.json_format import _coercer as json_coercer
from streamsql.formats.schema_registry import WriterSchemas, frame, split_header

DEFAULT_FULL_NAME = "io.confluent.ksql.avro_schemas.KsqlDataSourceSchema"
DEFAULT_DECIMAL_PRECISION = 64
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

Coercer = Callable[[Any], Any]


# --- SQL → Avro ---------------------------------------------------------------------------------


def avro_schema(columns: Sequence[t.Column], *, unwrapped: bool, full_name: str | None = None) -> Any:
    """The Avro schema ksqlDB would register for these columns (as JSON data)."""
    full = DEFAULT_FULL_NAME if full_name is None else full_name
    if not full.strip():
        raise ConfigError(f"fullSchemaName cannot be empty. Format configuration: {{fullSchemaName={full.strip()}}}")
    namespace, _, name = full.rpartition(".")
    if unwrapped:
        return _optional(_avro_type(columns[0].type, name))
    record: dict[str, Any] = {"type": "record", "name": name, "fields": [_field(c.name, c.type, name)
                                                                         for c in columns]}
    if namespace:
        record["namespace"] = namespace
    return record


def _field(name: str, sql: t.SqlType, parent: str) -> dict[str, Any]:
    _check_name(name)
    return {"name": name, "type": _optional(_avro_type(sql, f"{parent}_{name}")), "default": None}


def _check_name(name: str) -> None:
    if not name or not (name[0].isalpha() or name[0] == "_"):
        raise ConfigError(f"Schema is not compatible with Avro: Illegal initial character: {name}")
    if not _NAME.fullmatch(name):
        bad = next(ch for ch in name if not (ch.isalnum() or ch == "_"))
        raise ConfigError(f"Schema is not compatible with Avro: Illegal character in: {name} ({bad!r})")


def _optional(schema: Any) -> list[Any]:
    return ["null", schema]


def _avro_type(sql: t.SqlType, name: str) -> Any:
    if isinstance(sql, t.Decimal):
        return {"type": "bytes", "logicalType": "decimal", "precision": sql.precision, "scale": sql.scale}
    if isinstance(sql, t.Array):
        return {"type": "array", "items": _optional(_avro_type(sql.element, f"{name}_ELEM"))}
    if isinstance(sql, t.Map):
        if sql.key.kind != t.Kind.STRING:
            raise ConfigError(f"Avro only supports MAPs with STRING keys, got {sql}")
        return {"type": "map", "values": _optional(_avro_type(sql.value, f"{name}_VALUE"))}
    if isinstance(sql, t.Struct):
        return {"type": "record", "name": name, "fields": [_field(f.name, f.type, name) for f in sql.fields]}
    return _PRIMITIVES[sql.kind]


_PRIMITIVES: dict[t.Kind, Any] = {
    t.Kind.BOOLEAN: "boolean",
    t.Kind.INTEGER: "int",
    t.Kind.BIGINT: "long",
    t.Kind.DOUBLE: "double",
    t.Kind.STRING: "string",
    t.Kind.BYTES: "bytes",
    t.Kind.DATE: {"type": "int", "logicalType": "date"},
    t.Kind.TIME: {"type": "int", "logicalType": "time-millis"},
    t.Kind.TIMESTAMP: {"type": "long", "logicalType": "timestamp-millis"},
}


# --- Avro → SQL ---------------------------------------------------------------------------------


def columns_from_avro(schema: Any, *, role: str, keep_names: bool = False) -> list[t.Column]:
    """Schema inference: the columns a source declared without them gets from its latest schema
    (``schema`` as parsed JSON data). Field names are upper-cased, at every level, unless
    ``keep_names`` (a schema named by its id: :func:`streamsql.formats.registry.columns_from_registry`)."""
    body = _non_null(schema)
    if isinstance(body, dict) and body.get("type") == "record":
        return [t.Column(inferred_name(f["name"], keep_names), sql_type_of(f["type"], keep_names=keep_names), role)
                for f in body.get("fields", [])]
    return [t.Column("ROWKEY" if role == "key" else "ROWVAL", sql_type_of(schema, keep_names=keep_names), role)]


def sql_type_of(schema: Any, *, keep_names: bool = False) -> t.SqlType:
    """The SQL type holding values of an Avro schema (record fields named as by
    :func:`columns_from_avro`)."""
    s = _non_null(schema)
    if isinstance(s, str):
        prim = {"boolean": t.BOOLEAN, "int": t.INTEGER, "long": t.BIGINT, "float": t.DOUBLE,
                "double": t.DOUBLE, "string": t.STRING, "bytes": t.BYTES}.get(s)
        if prim is None:
            raise ConfigError(f"Avro type '{s}' has no SQL equivalent")
        return prim
    if isinstance(s, list):
        raise ConfigError(f"Avro unions other than [\"null\", T] are not supported: {json.dumps(schema)}")
    kind, logical = s.get("type"), s.get("logicalType")
    if logical == "decimal" and kind in ("bytes", "fixed"):
        return t.Decimal(int(s.get("precision", DEFAULT_DECIMAL_PRECISION)), int(s.get("scale", 0)))
    if logical == "date" and kind == "int":
        return t.DATE
    if logical == "time-millis" and kind == "int":
        return t.TIME
    if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
        return t.TIMESTAMP
    if kind == "record":
        return t.Struct(tuple(t.StructField(inferred_name(f["name"], keep_names),
                                            sql_type_of(f["type"], keep_names=keep_names))
                              for f in s.get("fields", [])))
    if kind == "array":
        return t.Array(sql_type_of(s["items"], keep_names=keep_names))
    if kind == "map":
        return t.Map(t.STRING, sql_type_of(s["values"], keep_names=keep_names))
    if kind == "enum":
        return t.STRING
    if kind == "fixed":
        return t.BYTES
    return sql_type_of(kind)


def _non_null(schema: Any) -> Any:
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) == 1:
            return branches[0]
    return schema


# --- the serde ----------------------------------------------------------------------------------


def _parse(text: str) -> Any:
    import fastavro

    return fastavro.parse_schema(json.loads(text))


def _nullable(avro_type: Any) -> bool:
    return avro_type == "null" or (isinstance(avro_type, list) and "null" in avro_type)


def _defaults_needed(schema: Any) -> bool:
    """Whether a writer schema has a field that cannot be null but has a default (ksqlDB's own
    schemas make every field optional: no per-row work for them)."""
    if isinstance(schema, list):
        return any(_defaults_needed(b) for b in schema)
    if not isinstance(schema, dict):
        return False
    kind = schema.get("type")
    if kind == "record":
        return any(("default" in f and not _nullable(f["type"])) or _defaults_needed(f["type"])
                   for f in schema.get("fields", []))
    if kind == "array":
        return _defaults_needed(schema.get("items"))
    if kind == "map":
        return _defaults_needed(schema.get("values"))
    return False


def _without_defaulted_nulls(schema: Any, datum: Any, named: dict[str, Any]) -> Any:
    """``datum`` without the null values of fields that cannot be null but have a default, so
    that the writer writes the default: an INSERT VALUES that leaves out such a field writes its
    default (ksqlDB with a schema id: ``NUM_VOTES`` long default 10 → 10), not a type error."""
    if isinstance(schema, str):
        schema = named.get(schema, schema)
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) != 1 or datum is None:
            return datum
        return _without_defaulted_nulls(branches[0], datum, named)
    if not isinstance(schema, dict) or datum is None:
        return datum
    kind = schema.get("type")
    if kind == "record" and isinstance(datum, dict):
        named[schema.get("name", "")] = schema
        out = {}
        for field in schema.get("fields", []):
            name = field["name"]
            value = datum.get(name)
            if value is None and "default" in field and not _nullable(field["type"]):
                continue
            if name in datum:
                out[name] = _without_defaulted_nulls(field["type"], value, named)
        return out
    if kind == "array" and isinstance(datum, list):
        return [_without_defaulted_nulls(schema["items"], v, named) for v in datum]
    if kind == "map" and isinstance(datum, dict):
        return {k: _without_defaulted_nulls(schema["values"], v, named) for k, v in datum.items()}
    return datum


class AvroSerde:
    def __init__(self, spec: FormatSpec) -> None:
        self._columns = spec.columns
        self._types = arrow_types(spec.columns)
        self._unwrapped = len(spec.columns) == 1 and (spec.columns[0].is_key or not spec.wrap_single_value)
        # fails early (as a ConfigError) on names or types Avro cannot hold
        self._schema = avro_schema(spec.columns, unwrapped=self._unwrapped, full_name=spec.options.get("fullName"))
        self._fields = [(c.name, _coercer(c.type)) for c in spec.columns]
        self._writers = WriterSchemas(spec.options, lambda text, _imports: _parse(text))  # no Avro references
        self._writer_id = spec.options.get("writerId")
        self._converters = [_datum_converter(c.type) for c in spec.columns]
        self._null_row = (None,) * len(spec.columns)

    def decode(self, data: Sequence[bytes | None]) -> DecodeResult:
        return decode_records(data, self._decode_one, self._null_row, self._types)

    def _decode_one(self, raw: bytes) -> tuple[Any, ...]:
        import fastavro

        try:
            schema_id, payload = split_header(raw)
            writer = self._writers.get(schema_id)
        except (ValueError, KeyError) as e:
            raise RecordError(f"Invalid Avro record: {e.args[0]}") from None
        try:
            datum = fastavro.schemaless_reader(io.BytesIO(payload), writer, None)
        except Exception as e:  # noqa: BLE001 - truncated or foreign bytes
            raise RecordError(f"Invalid Avro record for schema id {schema_id}: "
                              f"{type(e).__name__}{': ' + str(e) if str(e) else ''}") from None
        return self._row(datum)

    def _row(self, datum: Any) -> tuple[Any, ...]:
        if datum is None:
            return self._null_row
        if self._unwrapped:
            name, coerce = self._fields[0]
            try:
                return (coerce(datum),)
            except FieldError as e:
                raise field_failure(name, e) from None
        if type(datum) is not dict:
            raise RecordError(f"Expected an Avro record, got {shown(datum)}")
        row = []
        upper = None
        for name, coerce in self._fields:
            if name in datum:
                value = datum[name]
            else:
                if upper is None:
                    upper = {k.upper(): v for k, v in datum.items()}
                value = upper.get(name.upper())
            try:
                row.append(None if value is None else coerce(value))
            except FieldError as e:
                raise field_failure(name, e) from None
        return tuple(row)

    def encode(self, batch: pa.RecordBatch) -> list[bytes | None]:
        import fastavro

        if self._writer_id is None:
            raise ConfigError("AVRO output needs a Schema Registry: set 'ksql.schema.registry.url'")
        parsed = self._writers.get(int(self._writer_id))
        columns = [column_values(batch, c.name) for c in self._columns]
        fill_defaults = _defaults_needed(parsed)
        out: list[bytes | None] = []
        for r in range(batch.num_rows):
            if self._unwrapped:
                v = columns[0][r]
                if v is None:
                    out.append(None)
                    continue
                datum: Any = self._converters[0](v)
            else:
                datum = {c.name: (None if col[r] is None else conv(col[r]))
                         for c, col, conv in zip(self._columns, columns, self._converters)}
            if fill_defaults:
                datum = _without_defaulted_nulls(parsed, datum, {})
            buf = io.BytesIO()
            fastavro.schemaless_writer(buf, parsed, datum)
            out.append(frame(int(self._writer_id), buf.getvalue()))
        return out


# --- Avro datum → domain value ------------------------------------------------------------------


def _coercer(sql: t.SqlType) -> Coercer:
    if isinstance(sql, t.Array):
        element = _coercer(sql.element)

        def array(v: Any) -> list[Any]:
            if type(v) is not list:
                raise cannot_convert(v, sql)
            return [None if x is None else element(x) for x in v]
        return array
    if isinstance(sql, t.Map):
        value_of = _coercer(sql.value)

        def mapping(v: Any) -> list[tuple[Any, Any]]:
            if type(v) is list:  # Connect's encoding of a map with non-string keys
                return [(e.get("key"), None if e.get("value") is None else value_of(e.get("value"))) for e in v]
            if type(v) is not dict:
                raise cannot_convert(v, sql)
            return [(k, None if x is None else value_of(x)) for k, x in v.items()]
        return mapping
    if isinstance(sql, t.Struct):
        fields = [(f.name, _coercer(f.type)) for f in sql.fields]

        def struct(v: Any) -> dict[str, Any]:
            if type(v) is not dict:
                raise cannot_convert(v, sql)
            upper = {k.upper(): x for k, x in v.items()}
            out = {}
            for name, coerce in fields:
                x = v[name] if name in v else upper.get(name.upper())
                try:
                    out[name] = None if x is None else coerce(x)
                except FieldError as e:
                    e.path = f".{name}{e.path}"
                    raise
            return out
        return struct
    if isinstance(sql, t.Decimal):
        decimal_fallback = json_coercer(sql)
        p, s = sql.precision, sql.scale
        return lambda v: fit_decimal(v, p, s) if isinstance(v, Decimal) else decimal_fallback(v)
    json_coerce = json_coercer(sql)

    def fallback(v: Any) -> Any:
        # the JSON coercers see numbers as the JSON parser gives them: int or Decimal
        return json_coerce(Decimal(repr(v)) if type(v) is float else v)
    special = _SPECIAL.get(sql.kind)
    if special is None:
        return fallback
    return lambda v: special(v, fallback)


def _bytes(v: Any, fallback: Coercer) -> bytes:
    if isinstance(v, (bytes, bytearray)):
        return bytes(v)
    return fallback(v)


def _date(v: Any, fallback: Coercer) -> Any:
    if isinstance(v, dt.date) and not isinstance(v, dt.datetime):
        return fallback((v - _EPOCH_DATE).days)
    return fallback(v)


def _time(v: Any, fallback: Coercer) -> Any:
    if isinstance(v, dt.time):
        return fallback(((v.hour * 60 + v.minute) * 60 + v.second) * 1000 + v.microsecond // 1000)
    return fallback(v)


def _timestamp(v: Any, fallback: Coercer) -> Any:
    if isinstance(v, dt.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=dt.UTC)
        delta = v - _EPOCH
        return fallback((delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000)
    return fallback(v)


def _double(v: Any, fallback: Coercer) -> Any:
    if type(v) is float:
        return v
    return fallback(v)


def _string(v: Any, fallback: Coercer) -> Any:
    if type(v) is str:
        return v
    return fallback(v)


_SPECIAL: dict[t.Kind, Callable[[Any, Coercer], Any]] = {
    t.Kind.BYTES: _bytes,
    t.Kind.DATE: _date,
    t.Kind.TIME: _time,
    t.Kind.TIMESTAMP: _timestamp,
    t.Kind.STRING: _string,
    t.Kind.DOUBLE: _double,
}


# --- domain value → Avro datum ------------------------------------------------------------------


def _datum_converter(sql: t.SqlType) -> Coercer:
    """What fastavro's writer takes: maps as dicts (columns hold ``(key, value)`` pairs), TIME as
    millis; everything else as :func:`column_values` gives it."""
    if isinstance(sql, t.Array):
        element = _datum_converter(sql.element)
        return lambda v: [None if x is None else element(x) for x in v]
    if isinstance(sql, t.Map):
        value = _datum_converter(sql.value)
        return lambda v: {k: (None if x is None else value(x)) for k, x in (v.items() if isinstance(v, dict) else v)}
    if isinstance(sql, t.Struct):
        fields = [(f.name, _datum_converter(f.type)) for f in sql.fields]
        return lambda v: {n: (None if v.get(n) is None else conv(v[n])) for n, conv in fields}
    if sql.kind == t.Kind.TIME:
        return lambda v: v if isinstance(v, int) else _time(v, int)
    return _identity


def _identity(v: Any) -> Any:
    return v


# --- plain JSON data ↔ Avro datum (test inputs and outputs, tools) -------------------------------


def datum_from_json(schema: Any, value: Any) -> Any:
    """A JSON value (as QTT files and users write records) as a datum of ``schema`` (parsed JSON
    schema data): record fields matched by exact name, then case-insensitively; DECIMAL from
    numbers, BYTES from base64 text; scalars coerced to the schema's type where that is lossless
    enough to be meant (a number written into a string field becomes its text)."""
    return _to_datum(schema, value, {})


def _to_datum(schema: Any, value: Any, named: dict[str, Any]) -> Any:
    import base64

    if isinstance(schema, list):
        if value is None and "null" in schema:
            return None
        branches = [b for b in schema if b != "null"]
        return _to_datum(branches[0], value, named) if len(branches) == 1 else value
    if isinstance(schema, str):
        if schema in named:
            return _to_datum(named[schema], value, named)
        if value is None:
            return None
        if schema == "string":
            if isinstance(value, str):
                return value
            return json.dumps(value) if isinstance(value, (dict, list)) else str(value)
        if schema in ("int", "long"):
            return int(value)
        if schema in ("float", "double"):
            return float(value)
        if schema == "bytes":
            return base64.b64decode(value) if isinstance(value, str) else value
        return value
    kind = schema.get("type")
    if isinstance(kind, (dict, list)):
        return _to_datum(kind, value, named)
    if "name" in schema and kind in ("record", "enum", "fixed"):
        named[schema["name"]] = schema
    if value is None:
        return None
    logical = schema.get("logicalType")
    if logical == "decimal":
        # at the schema's scale, with as many digits as the value needs: the default context's
        # 28 would refuse a DECIMAL(38, s) of 29 digits or more (decimal.InvalidOperation)
        number, scale = Decimal(str(value)), int(schema.get("scale", 0))
        digits = max(number.adjusted() + 1, 1) + scale + 1  # one more for a carry (999.996 to 1000.00)
        return number.quantize(Decimal(1).scaleb(-scale), context=Context(prec=max(digits, 1)))
    if kind == "record":
        upper = {k.upper(): v for k, v in value.items()} if isinstance(value, dict) else {}
        out = {}
        for f in schema.get("fields", []):
            name = f["name"]
            if name in value:
                out[name] = _to_datum(f["type"], value[name], named)
            elif name.upper() in upper:
                out[name] = _to_datum(f["type"], upper[name.upper()], named)
            elif "default" in f:
                out[name] = f["default"]
            else:
                out[name] = None
        return out
    if kind == "array":
        return [_to_datum(schema["items"], x, named) for x in value]
    if kind == "map":
        return {k: _to_datum(schema["values"], x, named) for k, x in value.items()}
    if kind == "fixed":
        import base64 as b64

        return b64.b64decode(value) if isinstance(value, str) else value
    return _to_datum(kind, value, named)


def json_from_datum(datum: Any) -> Any:
    """A decoded datum as plain JSON data (how QTT files state expected records): decimals stay
    ``Decimal`` (their scale matters when compared), bytes as base64, dates as epoch days, times as
    millis of day, timestamps as millis."""
    import base64

    if isinstance(datum, dict):
        return {k: json_from_datum(v) for k, v in datum.items()}
    if isinstance(datum, list):
        return [json_from_datum(v) for v in datum]
    if isinstance(datum, (bytes, bytearray)):
        return base64.b64encode(bytes(datum)).decode()
    if isinstance(datum, dt.datetime):
        return _timestamp(datum, int)
    if isinstance(datum, dt.date):
        return _date(datum, int)
    if isinstance(datum, dt.time):
        return _time(datum, int)
    return datum
