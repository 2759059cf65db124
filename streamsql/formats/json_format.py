"""JSON, read and written the way ksqlDB's ``KsqlJsonDeserializer`` and Kafka's ``JsonConverter``
do, so topics written by either engine read the same in the other.

Reading (per value, by target type; anything else fails the record):
  * BOOLEAN: JSON true/false only.
  * INTEGER/BIGINT: numbers (fractions truncated, out-of-range values wrapped like Java's
    ``intValue()``/``longValue()``) or strings holding a Java integer literal.
  * DOUBLE: numbers, or strings ``Double.parseDouble`` accepts.
  * DECIMAL(p, s): numbers or numeric strings, exact; too large or needing rounding fails.
  * STRING: strings as is, numbers/booleans as their text, objects as compact JSON, arrays as
    ``[a, b, null]`` (ksqlDB's ``processString``).
  * BYTES: base64 strings. DATE/TIME/TIMESTAMP: integers (days / ms of day / epoch ms) or strings.
  * ARRAY/MAP/STRUCT: arrays / objects; struct fields and value columns match JSON keys by exact
    name first, then by the key upper-cased (so unquoted, upper-case SQL names match any case).
    Missing keys read as NULL, extra keys are ignored.

A single key column, or a single value column with ``WRAP_SINGLE_VALUE=false``, is the bare JSON
of that column; otherwise the record is a JSON object of the columns.

Two readers, one answer. The exact reader (the standard library's parser, numbers with a fraction
as ``Decimal``) defines every rule above and every error message. Where all columns are BOOLEAN,
INTEGER, BIGINT, DOUBLE or STRING, or STRUCTs of those (Nexmark's events), a record is first read by
orjson (about 7× faster) and its values accepted only where they cannot differ from the exact
reader's: booleans, integers within the column's range, strings, objects for structs (their fields
matched to keys as the exact reader matches them), doubles that orjson parsed from a fraction or
exponent (correctly rounded, as ``float(Decimal(text))``) or from an integer below 2^63. Anything
else — a malformed record, a string where a number is wanted, a lone surrogate escape, a byte order
mark, a huge integer — makes that one record go through the exact reader, so its result or its
processing-log reason is the same as before. Which JSON key a column or a struct's field reads
(exact name, else the key upper-cased) is worked out once per distinct key order, not per record.

Before either, a whole batch of such records (without STRUCT columns) is offered to Arrow's JSON reader (C++, about 15×
faster than orjson record by record): one pass over the records joined by newlines, typed by the
columns, the JSON keys taken from the first record's layout. Its answer is kept only where it
cannot differ from the exact reader's; anywhere else the batch goes record by record as above —
see :meth:`JsonSerde._decode_batch` for the checks. Arrow refuses every value the exact reader
would convert (a string for a number, a fraction for an integer, an integer out of range, a number
for a string or boolean) rather than converting it differently, and parses doubles correctly
rounded, as ``float(Decimal(text))`` does.

Writing: compact JSON (``{"A":1,"B":"x"}``) in column order with nulls kept; DOUBLE printed as
Java prints it (``0.0``, ``1.0E20``, ``"NaN"``), DECIMAL at its scale, BYTES base64, DATE/TIME/
TIMESTAMP as integers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from functools import partial
from json.encoder import encode_basestring as json_string
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as arrow_json

from streamsql.errors import ConfigError
from streamsql.formats.base import DecodeResult, FormatSpec
from streamsql.formats.coerce import (
    INT_MAX,
    INT_MIN,
    LONG_MAX,
    LONG_MIN,
    FieldError,
    RecordError,
    cannot_convert,
    check_date,
    check_time,
    decode_base64,
    encode_base64,
    field_failure,
    fit_decimal,
    java_double,
    long_value,
    parse_decimal,
    parse_double,
    parse_long,
    shown,
    timestamp_micros,
    wrap,
)
from streamsql.formats.columns import arrow_types, column_values, decode_records
from streamsql.types import Array, Column, Kind, Map, Primitive, SqlType, Struct
from streamsql.types import Decimal as DecimalType

_fast_loads: Callable[[bytes], Any] | None
try:  # a dependency; without it (a cluster node missing it) every record takes the exact reader
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover - installed with streamsql
    _fast_loads = None

Coercer = Callable[[Any], Any]
Renderer = Callable[[Any], str]

_MISSING = object()
#: distinct key orders remembered per serde (a topic's records nearly always share one or a few)
_LAYOUTS_KEPT = 256


class JsonSerde:
    def __init__(self, spec: FormatSpec) -> None:
        for column in spec.columns:
            _require_string_map_keys(column.type)
        self._columns = spec.columns
        self._types = arrow_types(spec.columns)
        self._fields = [(c.name, _coercer(c.type)) for c in spec.columns]
        self._renderers = [_renderer(c.type) for c in spec.columns]
        self._unwrapped = len(spec.columns) == 1 and (
            spec.columns[0].is_key or not spec.wrap_single_value
        )
        self._side = "key" if spec.columns and spec.columns[0].is_key else "value"
        self._null_row = (None,) * len(spec.columns)
        self._names = tuple(c.name for c in spec.columns)
        fast = [_fast_coercer(c.type) for c in spec.columns]
        self._fast: tuple[Coercer, ...] | None = (
            tuple(f for f in fast if f is not None) if _fast_loads is not None and None not in fast else None)
        # Arrow's batch reader: plain columns only (a struct's fields would need their own layout)
        self._batchable = self._fast is not None and all(isinstance(c.type, Primitive) for c in spec.columns)
        self._layouts: dict[tuple[str, ...], tuple[str | None, ...]] = {}
        self._name_forms = frozenset(self._names) | {n.upper() for n in self._names}
        self._batch_schemas: dict[tuple[str, ...], pa.Schema] = {}

    def decode(self, data: Sequence[bytes | None]) -> DecodeResult:
        if self._batchable and not self._unwrapped and data:
            decoded = self._decode_batch(data)
            if decoded is not None:
                return decoded
        return decode_records(data, self._decode_record, self._null_row, self._types)

    def _decode_batch(self, data: Sequence[bytes | None]) -> DecodeResult | None:
        """Every record of ``data`` read by Arrow's JSON reader in one pass, or None where that
        could differ from reading them one by one (the caller then does). A null record reads
        as ``{}``: a row of nulls, as the record-by-record loop gives it.

        Refused before parsing: a record that is not one line holding one object (a newline or
        carriage return inside it, not starting with ``{`` or not ending with ``}`` — Arrow
        splits rows at line ends, and crashes on a bare ``null``), NUL bytes (UTF-16/32 text),
        ``NaN``/``Inf`` anywhere (Arrow reads them as numbers, the exact reader refuses them),
        text that is not UTF-8 (Arrow keeps invalid bytes in strings). Refused after: Arrow's
        error (malformed JSON, a duplicate key, a value of another JSON type than the column's,
        an integer out of range), a row count other than the batch's (two objects in a record),
        a key other than the layout's that names a column in some case (another record spells
        it differently, or holds the exact name besides a variant), a ``-0`` in a DOUBLE column
        (the exact reader reads the integer ``-0`` as ``0.0``)."""
        records = [b"{}" if raw is None else raw for raw in data]
        joined = b"\n".join(records)
        lines = len(records) - 1
        if (b"\r" in joined or b"\x00" in joined or (b"N" in joined and b"NaN" in joined)
                or (b"I" in joined and b"Inf" in joined) or not _one_object_per_line(joined, lines)):
            return None
        try:
            joined.decode("utf-8")
        except UnicodeDecodeError:
            return None
        schema = self._batch_schema(next((raw for raw in records if raw != b"{}"), b"{}"))
        if schema is None:
            return None
        try:
            table = arrow_json.read_json(
                pa.BufferReader(joined),
                read_options=arrow_json.ReadOptions(use_threads=False, block_size=len(joined) + 1),
                parse_options=arrow_json.ParseOptions(explicit_schema=schema,
                                                      unexpected_field_behavior="infer"))
        except (pa.ArrowException, ValueError):
            return None
        if table.num_rows != len(records):
            return None
        if any(name in self._name_forms or name.upper() in self._name_forms
               for name in table.schema.names[len(schema):]):
            return None
        columns = [table.column(i).combine_chunks() for i in range(len(schema))]
        for column in columns:
            if pa.types.is_floating(column.type) and pc.any(pc.equal(pc.divide(1.0, column), float("-inf"))).as_py():
                return None
        return DecodeResult(columns, [None] * len(records))

    def _batch_schema(self, first: bytes) -> pa.Schema | None:
        """The Arrow schema of the JSON keys the columns read in records laid out as ``first``
        (a column absent from it reads its own name), or None when ``first`` is no object or two
        columns would read one key."""
        try:
            doc = _fast_loads(first)  # type: ignore[misc]  # never None when the fast reader is on
        except ValueError:
            return None
        if type(doc) is not dict:
            return None
        keys = self._layouts.get(tuple(doc)) or self._layout(doc)
        names = tuple(name if key is None else key for key, name in zip(keys, self._names))
        schema = self._batch_schemas.get(names)
        if schema is None:
            if len(set(names)) != len(names):
                return None
            schema = pa.schema([pa.field(n, t) for n, t in zip(names, self._types)])
            if len(self._batch_schemas) >= _LAYOUTS_KEPT:
                self._batch_schemas.clear()
            self._batch_schemas[names] = schema
        return schema

    def _decode_record(self, raw: bytes) -> tuple[Any, ...]:
        if self._fast is not None:
            try:
                return self._decode_fast(raw, self._fast)
            except _ExactReaderNeeded:
                pass
        return self._decode_exact(raw)

    def _decode_fast(self, raw: bytes, coercers: tuple[Coercer, ...]) -> tuple[Any, ...]:
        """orjson's reading of a record, where it cannot differ from the exact reader's; raises
        :class:`_ExactReaderNeeded` anywhere else (module docstring)."""
        try:
            doc = _fast_loads(raw)  # type: ignore[misc]  # never None when coercers are set
        except ValueError:  # malformed for orjson: the exact reader decides (and words the error)
            raise _ExactReaderNeeded from None
        if doc is None:
            return self._null_row
        if self._unwrapped:
            return (coercers[0](doc),)
        if type(doc) is not dict:
            raise _ExactReaderNeeded
        order = tuple(doc)
        keys = self._layouts.get(order)
        if keys is None:
            keys = self._layout(doc)
        return tuple(None if k is None or (v := doc[k]) is None else coerce(v) for k, coerce in zip(keys, coercers))

    def _layout(self, doc: Mapping[str, Any]) -> tuple[str | None, ...]:
        """The JSON key each column reads for documents with ``doc``'s keys in this order: its
        exact name, else the last key that upper-cases to it (as the exact reader's map)."""
        upper = {k.upper(): k for k in doc}
        keys = tuple(name if name in doc else upper.get(name) for name in self._names)
        if len(self._layouts) >= _LAYOUTS_KEPT:
            self._layouts.clear()
        self._layouts[tuple(doc)] = keys
        return keys

    def _decode_exact(self, raw: bytes) -> tuple[Any, ...]:
        try:
            text = _text(raw)
            doc = _DECODER.decode(text)
        except json.JSONDecodeError as e:
            raise RecordError(f"Malformed JSON at char {e.pos}: {e.msg}") from None
        except UnicodeDecodeError as e:
            raise RecordError(f"Malformed JSON: not UTF-8 at byte {e.start}") from None
        except ValueError as e:  # NaN/Infinity, or an integer with more digits than Python reads
            raise RecordError(f"Malformed JSON: {e}") from None
        if ("\\ud" in text or "\\uD" in text) and _has_lone_surrogate(doc):
            # Python's parser, like Jackson, accepts an escaped half of a surrogate pair, but no
            # Arrow string can hold one.
            raise RecordError("Malformed JSON: string with an unpaired surrogate escape")
        if doc is None:
            return self._null_row
        if self._unwrapped:
            name, coerce = self._fields[0]
            try:
                return (coerce(doc),)
            except FieldError as e:
                raise field_failure(name, e) from None
        if type(doc) is not dict:
            raise RecordError(f"Expected a JSON object for the {self._side}, got {shown(doc)}")
        row: list[Any] = []
        upper = None
        for name, coerce in self._fields:
            value = doc.get(name, _MISSING)
            if value is _MISSING:
                if upper is None:
                    upper = {k.upper(): v for k, v in doc.items()}
                value = upper.get(name)
            if value is None:
                row.append(None)
                continue
            try:
                row.append(coerce(value))
            except FieldError as e:
                raise field_failure(name, e) from None
        return tuple(row)

    def encode(self, batch: pa.RecordBatch) -> list[bytes | None]:
        if self._unwrapped:
            # ksqlDB serializes a null single value as a null record, not the text ``null``.
            render = self._renderers[0]
            return [None if v is None else render(v).encode() for v in column_values(batch, self._columns[0].name)]
        if not self._columns:
            return [b"{}"] * batch.num_rows
        pieces: list[Any] = []
        for i, (c, render) in enumerate(zip(self._columns, self._renderers)):
            pieces += [("{" if i == 0 else ",") + json_string(c.name) + ":", _column_texts(batch, c, render)]
        joined = pc.binary_join_element_wise(*pieces, "}", "")
        return joined.cast(pa.binary()).to_pylist()


def _one_object_per_line(joined: bytes, lines: int) -> bool:
    """Whether ``joined`` (records joined by newlines) has exactly ``lines`` newlines, each
    between a ``}`` and a ``{``, and begins with ``{`` and ends with ``}``: every record is one
    line that starts and ends as an object does. One vectorised pass (numpy) where counting
    ``b"\\n{"`` and ``b"}\\n"`` took two slow substring scans of the whole batch."""
    if joined[:1] != b"{" or joined[-1:] != b"}":
        return False
    data = np.frombuffer(joined, np.uint8)
    breaks = np.flatnonzero(data == _NEWLINE)
    return (len(breaks) == lines and bool((data[breaks + 1] == _OPEN_BRACE).all())
            and bool((data[breaks - 1] == _CLOSE_BRACE).all()))


_NEWLINE, _OPEN_BRACE, _CLOSE_BRACE = ord("\n"), ord("{"), ord("}")


#: a character JSON text must escape (what ``json_string`` escapes): a string column holding one
#: is rendered in Python, every other string column by Arrow
_NEEDS_ESCAPE = r'["\\\x00-\x1f]'


def _column_texts(batch: pa.RecordBatch, column: Column, render: Renderer) -> pa.Array:
    """Column ``column`` of ``batch`` as JSON texts, ``null`` for nulls. Integers, booleans,
    decimals and strings without characters to escape are rendered by Arrow (the text ``str``
    and ``json_string`` give; a 20,000-row Nexmark batch encodes 2.2× faster); other types, and
    a string column with any character to escape, by ``render`` value by value."""
    array = batch.column(column.name)
    kind = column.type.kind if isinstance(column.type, (Primitive, DecimalType)) else None
    texts: pa.Array | None = None
    if ((kind in (Kind.INTEGER, Kind.BIGINT) and pa.types.is_integer(array.type))
            or (kind is Kind.BOOLEAN and pa.types.is_boolean(array.type))
            or (kind is Kind.DECIMAL and pa.types.is_decimal(array.type))):
        # Arrow writes a decimal as Java's BigDecimal.toString and Python's str do (plain, or
        # scientific when the adjusted exponent is below -6: 0 at scale 16 is 0E-16)
        texts = pc.cast(array, pa.string())
    elif kind is Kind.STRING and pa.types.is_string(array.type) and not pc.any(
            pc.match_substring_regex(array, _NEEDS_ESCAPE)).as_py():
        texts = pc.binary_join_element_wise('"', array, '"', "")
    if texts is None:
        texts = pa.array(["null" if v is None else render(v) for v in column_values(batch, column.name)], pa.string())
    return texts.fill_null("null")


def _reject_constant(name: str) -> None:
    """``NaN``/``Infinity`` are not JSON; Jackson (ksqlDB's parser) rejects them, so do we."""
    raise ValueError(f"non-standard number {name} is not allowed")


#: One decoder for every record (``json.loads`` with options builds a new one per call). Numbers
#: with a fraction or exponent parse as exact ``Decimal``s, as ksqlDB's Jackson reads them
#: (``USE_BIG_DECIMAL_FOR_FLOATS``): DECIMAL columns keep every digit, STRING columns the original
#: text, INTEGER columns truncate the exact value. Measured no slower than parsing to ``float``.
_DECODER = json.JSONDecoder(parse_float=Decimal, parse_constant=_reject_constant)


def _text(raw: bytes) -> str:
    """Bytes to text: UTF-8, or the UTF-16/32 (with or without BOM) that Jackson also detects."""
    if raw[:1] in (b"\xef", b"\xfe", b"\xff") or b"\x00" in raw[:4]:
        return raw.decode(json.detect_encoding(raw))
    return raw.decode("utf-8")


def _has_lone_surrogate(doc: Any) -> bool:
    try:
        json.dumps(doc, ensure_ascii=False, default=str).encode()
    except UnicodeEncodeError:
        return True
    return False


def _require_string_map_keys(t: SqlType) -> None:
    if isinstance(t, Map):
        if t.key.kind is not Kind.STRING:
            raise ConfigError("JSON only supports MAP types with STRING keys")
        _require_string_map_keys(t.value)
    elif isinstance(t, Array):
        _require_string_map_keys(t.element)
    elif isinstance(t, Struct):
        for f in t.fields:
            _require_string_map_keys(f.type)


# --- reading ----------------------------------------------------------------------------------


def _coercer(t: SqlType) -> Coercer:
    """A function from a parsed JSON value (never None) to the column's domain value."""
    if isinstance(t, DecimalType):
        return partial(_to_decimal, precision=t.precision, scale=t.scale)
    if isinstance(t, Array):
        return partial(_to_array, element=_coercer(t.element), type_name=str(t))
    if isinstance(t, Map):
        return partial(_to_map, value_of=_coercer(t.value), type_name=str(t))
    if isinstance(t, Struct):
        fields = tuple((f.name, _coercer(f.type)) for f in t.fields)
        return partial(_to_struct, fields=fields, type_name=str(t))
    return _PRIMITIVE_COERCERS[t.kind]


def _to_boolean(v: Any) -> bool:
    if v is True or v is False:
        return v
    raise cannot_convert(v, "BOOLEAN")


def _as_long(v: Any, type_name: str) -> int:
    """Jackson's ``asLong()`` for numbers (truncate, keep 64 bits), ``Long.parseLong`` for text."""
    kind = type(v)
    if kind is int:
        return v if LONG_MIN <= v <= LONG_MAX else wrap(v, 64)
    if kind is Decimal:
        return long_value(v)
    if kind is str:
        return parse_long(v, type_name)
    raise cannot_convert(v, type_name)


def _to_integer(v: Any) -> int:
    kind = type(v)
    if kind is int:
        return v if INT_MIN <= v <= INT_MAX else wrap(v, 32)
    if kind is str:
        return parse_long(v, "INTEGER", INT_MIN, INT_MAX)
    return wrap(_as_long(v, "INTEGER"), 32)


def _to_bigint(v: Any) -> int:
    if type(v) is int and LONG_MIN <= v <= LONG_MAX:
        return v
    return _as_long(v, "BIGINT")


def _to_double(v: Any) -> float:
    kind = type(v)
    if kind is Decimal:
        return float(v)
    if kind is int:
        try:
            return float(v)
        except OverflowError:  # an integer beyond double range is infinite, as in Java
            return float("inf") if v > 0 else float("-inf")
    if kind is str:
        return parse_double(v)
    raise cannot_convert(v, "DOUBLE")


def _to_decimal(v: Any, precision: int, scale: int) -> Decimal:
    kind = type(v)
    if kind is Decimal or kind is int:
        return fit_decimal(Decimal(v), precision, scale)
    if kind is str:
        return parse_decimal(v, precision, scale)
    raise cannot_convert(v, f"DECIMAL({precision}, {scale})")


def _to_string(v: Any) -> str:
    kind = type(v)
    if kind is str:
        return v
    if v is True or v is False:
        return "true" if v else "false"
    if kind is int or kind is Decimal:
        return str(v)  # Python's Decimal str is Java's BigDecimal.toString (1.50, 1E+3)
    if kind is dict:
        return _json_text(v)
    if kind is list:
        return "[" + ", ".join("null" if x is None else _to_string(x) for x in v) + "]"
    raise cannot_convert(v, "STRING")


def _json_text(v: Any) -> str:
    """Compact JSON of a parsed value, numbers keeping their original digits (Jackson's output
    when ksqlDB turns an object into a STRING)."""
    if v is None or v is True or v is False:
        return json.dumps(v)
    if isinstance(v, str):
        return json_string(v)
    if isinstance(v, dict):
        return "{" + ",".join(json_string(k) + ":" + _json_text(x) for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ",".join(_json_text(x) for x in v) + "]"
    return str(v)


def _to_bytes(v: Any) -> bytes:
    if type(v) is str:
        return decode_base64(v)
    raise cannot_convert(v, "BYTES")


def _to_date(v: Any) -> int:
    return check_date(_as_long(v, "DATE"))


def _to_time(v: Any) -> int:
    return check_time(_as_long(v, "TIME"))


def _to_timestamp(v: Any) -> int:
    return timestamp_micros(_as_long(v, "TIMESTAMP"))


def _to_array(v: Any, element: Coercer, type_name: str) -> list[Any]:
    if type(v) is not list:
        raise cannot_convert(v, type_name)
    out = []
    for i, x in enumerate(v):
        try:
            out.append(None if x is None else element(x))
        except FieldError as e:
            e.path = f"[{i}]{e.path}"
            raise
    return out


def _to_map(v: Any, value_of: Coercer, type_name: str) -> list[tuple[str, Any]]:
    if type(v) is not dict:
        raise cannot_convert(v, type_name)
    out = []
    for k, x in v.items():
        try:
            out.append((k, None if x is None else value_of(x)))
        except FieldError as e:
            e.path = f"[{json_string(k)}]{e.path}"
            raise
    return out


def _to_struct(v: Any, fields: tuple[tuple[str, Coercer], ...], type_name: str) -> dict[str, Any]:
    if type(v) is not dict:
        raise cannot_convert(v, type_name)
    out = {}
    upper = None
    for name, coerce in fields:
        x = v.get(name, _MISSING)
        if x is _MISSING:
            if upper is None:
                upper = {k.upper(): y for k, y in v.items()}
            x = upper.get(name)
        try:
            out[name] = None if x is None else coerce(x)
        except FieldError as e:
            e.path = f".{name}{e.path}"
            raise
    return out


class _ExactReaderNeeded(Exception):
    """A record (or a value in it) the fast reader leaves to the exact one. Raised as a new
    instance each time: one shared instance would grow its traceback (and keep its frames) with
    every raise."""


def _fast_boolean(v: Any) -> bool:
    if v is True or v is False:
        return v
    raise _ExactReaderNeeded


def _fast_integer(v: Any) -> int:
    if type(v) is int and INT_MIN <= v <= INT_MAX:
        return v
    raise _ExactReaderNeeded


def _fast_bigint(v: Any) -> int:
    if type(v) is int and LONG_MIN <= v <= LONG_MAX:
        return v
    raise _ExactReaderNeeded


def _fast_double(v: Any) -> float:
    kind = type(v)
    # orjson reads integers beyond 64 bits as doubles (the same double the exact reader makes
    # of them in every case measured, but not a documented guarantee): those go exact
    if kind is float and (-_TWO_63 < v < _TWO_63 or not v.is_integer()):
        return v
    if kind is int and LONG_MIN <= v <= LONG_MAX:
        return float(v)
    raise _ExactReaderNeeded


def _fast_string(v: Any) -> str:
    if type(v) is str:
        return v
    raise _ExactReaderNeeded


class _FastStruct:
    """:func:`_to_struct` with each field's fast coercer: the same key read per field (exact
    name, else the last key that upper-cases to it; worked out once per distinct key order, as
    the record's own columns are), anything a field's coercer refuses left to the exact reader."""

    def __init__(self, fields: tuple[tuple[str, Coercer], ...]) -> None:
        self.names = tuple(name for name, _coerce in fields)
        self.coercers = tuple(coerce for _name, coerce in fields)
        self.layouts: dict[tuple[str, ...], tuple[str | None, ...]] = {}

    def __call__(self, v: Any) -> dict[str, Any]:
        if type(v) is not dict:
            raise _ExactReaderNeeded
        keys = self.layouts.get(tuple(v))
        if keys is None:
            upper = {k.upper(): k for k in v}
            keys = tuple(name if name in v else upper.get(name) for name in self.names)
            if len(self.layouts) >= _LAYOUTS_KEPT:
                self.layouts.clear()
            self.layouts[tuple(v)] = keys
        return {name: None if k is None or (x := v[k]) is None else coerce(x)
                for name, k, coerce in zip(self.names, keys, self.coercers)}


def _fast_coercer(t: SqlType) -> Coercer | None:
    """The fast reader's coercer of a column type (a primitive of :data:`_FAST_COERCERS`, or a
    STRUCT of such types, as Nexmark's events are), or None where only the exact reader reads it."""
    if isinstance(t, Struct):
        fields = []
        for f in t.fields:
            coerce = _fast_coercer(f.type)
            if coerce is None:
                return None
            fields.append((f.name, coerce))
        return _FastStruct(tuple(fields))
    return _FAST_COERCERS.get(t.kind) if isinstance(t, Primitive) else None


_TWO_63 = float(2**63)

#: what the fast reader accepts per column type (module docstring); other types are exact only
_FAST_COERCERS: dict[Kind, Coercer] = {
    Kind.BOOLEAN: _fast_boolean,
    Kind.INTEGER: _fast_integer,
    Kind.BIGINT: _fast_bigint,
    Kind.DOUBLE: _fast_double,
    Kind.STRING: _fast_string,
}

_PRIMITIVE_COERCERS: dict[Kind, Coercer] = {
    Kind.BOOLEAN: _to_boolean,
    Kind.INTEGER: _to_integer,
    Kind.BIGINT: _to_bigint,
    Kind.DOUBLE: _to_double,
    Kind.STRING: _to_string,
    Kind.BYTES: _to_bytes,
    Kind.DATE: _to_date,
    Kind.TIME: _to_time,
    Kind.TIMESTAMP: _to_timestamp,
}


# --- writing ----------------------------------------------------------------------------------


def _renderer(t: SqlType) -> Renderer:
    """A function from a non-null domain value to its JSON text."""
    if isinstance(t, Array):
        element = _renderer(t.element)
        return lambda v: "[" + ",".join("null" if x is None else element(x) for x in v) + "]"
    if isinstance(t, Map):
        value = _renderer(t.value)
        return lambda v: "{" + ",".join(
            json_string(k) + ":" + ("null" if x is None else value(x)) for k, x in v
        ) + "}"
    if isinstance(t, Struct):
        fields = [(json_string(f.name) + ":", f.name, _renderer(f.type)) for f in t.fields]
        return lambda v: "{" + ",".join(
            key + ("null" if v[name] is None else render(v[name])) for key, name, render in fields
        ) + "}"
    return _PRIMITIVE_RENDERERS[t.kind]


def _render_double(v: float) -> str:
    text = java_double(v)
    # Jackson quotes non-finite doubles (QUOTE_NON_NUMERIC_NUMBERS) so the output stays JSON.
    return text if text[-1].isdigit() else f'"{text}"'


_PRIMITIVE_RENDERERS: dict[Kind, Renderer] = {
    Kind.BOOLEAN: lambda v: "true" if v else "false",
    Kind.INTEGER: str,
    Kind.BIGINT: str,
    Kind.DOUBLE: _render_double,
    Kind.DECIMAL: str,
    Kind.STRING: json_string,
    Kind.BYTES: lambda v: '"' + encode_base64(v) + '"',
    Kind.DATE: str,
    Kind.TIME: str,
    Kind.TIMESTAMP: str,
}
