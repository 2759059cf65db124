"""DELIMITED: ksqlDB's CSV (``KsqlDelimitedDeserializer``/``KsqlDelimitedSerializer`` over Apache
commons-csv's ``CSVFormat.DEFAULT`` with the configured delimiter).

Reading: the first CSV record of the text (double-quote quoting, ``""`` inside quotes is a quote,
blank lines skipped); its field count must equal the column count; an empty field is NULL for
every type, STRING included; other fields are parsed with Java's rules (BOOLEAN is true when the
text is ``true`` in any case and false otherwise, as ``Boolean.parseBoolean``), BYTES are base64,
DATE/TIME/TIMESTAMP integers (days / ms of day / epoch ms). Only primitive types are allowed.

Writing: fields joined by the delimiter; NULL is an empty field; DOUBLE as Java prints it, DECIMAL
in plain notation at its scale; a field is quoted exactly when commons-csv's minimal quoting would
(it contains the delimiter, a quote, CR or LF; starts with a character up to ``#``; ends with one up
to space; or it is the first field and starts with anything but an ASCII letter or digit, which is
why ksqlDB writes ``"-10",...``).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import pyarrow as pa

from streamsql.errors import ConfigError, UnsupportedSchemaError
from streamsql.formats.base import DecodeResult, FormatSpec
from streamsql.formats.coerce import (
    INT_MAX,
    INT_MIN,
    FieldError,
    RecordError,
    check_date,
    check_time,
    decode_base64,
    encode_base64,
    field_failure,
    java_double,
    parse_decimal,
    parse_double,
    parse_long,
    timestamp_micros,
)
from streamsql.formats.columns import arrow_types, column_values, to_arrays
from streamsql.types import Decimal as DecimalType
from streamsql.types import Kind, SqlType

Parser = Callable[[str], Any]

# Kafka records can be large; the csv module's default 128 KiB field limit is not ksqlDB's.
csv.field_size_limit(2**31 - 1)


class DelimitedSerde:
    def __init__(self, spec: FormatSpec) -> None:
        if len(spec.delimiter) != 1:
            raise ConfigError(
                f"Invalid delimiter value: '{spec.delimiter}'. "
                "Delimiter must be a single character or TAB,SPACE"
            )
        for column in spec.columns:
            if column.type.kind not in _TEXTS:
                raise UnsupportedSchemaError(
                    f"The 'DELIMITED' format does not support type '{column.type.kind.value}', "
                    f"column: `{column.name}`"
                )
        self._delimiter = spec.delimiter
        self._columns = spec.columns
        self._types = arrow_types(spec.columns)
        self._parsers = [(c.name, _parser(c.type)) for c in spec.columns]
        self._texts = [_TEXTS[c.type.kind] for c in spec.columns]
        self._null_row = (None,) * len(spec.columns)
        self._quote_needed = re.compile('[\r\n"' + re.escape(spec.delimiter) + "]").search
        # ksqlDB writes no key at all for a null single-column key, but a single null value
        # column as an empty record (commons-csv prints the lone null as nothing).
        self._null_single_key = len(spec.columns) == 1 and spec.columns[0].is_key

    def decode(self, data: Sequence[bytes | None]) -> DecodeResult:
        rows: list[tuple[Any, ...]] = []
        errors: list[str | None] = [None] * len(data)
        for i, raw in enumerate(data):
            if raw is None:
                rows.append(self._null_row)
                continue
            try:
                rows.append(self._decode_record(raw.decode("utf-8", "replace")))
            except RecordError as e:
                rows.append(self._null_row)
                errors[i] = str(e)
        return DecodeResult(to_arrays(rows, self._types), errors)

    def _decode_record(self, text: str) -> tuple[Any, ...]:
        fields = self._split(text)
        if len(fields) != len(self._parsers):
            raise RecordError(
                f"Column count mismatch on deserialization: expected {len(self._parsers)} "
                f"columns, got {len(fields)}"
            )
        row: list[Any] = []
        for field, (name, parse) in zip(fields, self._parsers):
            if not field:
                row.append(None)
                continue
            try:
                row.append(parse(field))
            except FieldError as e:
                raise field_failure(name, e) from None
        return tuple(row)

    def _split(self, text: str) -> list[str]:
        if '"' not in text and "\n" not in text and "\r" not in text:
            if not text:
                raise RecordError("No fields in record")
            return text.split(self._delimiter)  # no quoting or line breaks: plain split is exact
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=self._delimiter, strict=True)
        try:
            for record in reader:
                if record:  # commons-csv skips blank lines
                    return record
        except csv.Error as e:
            raise RecordError(f"Malformed delimited record: {e}") from None
        raise RecordError("No fields in record")

    def encode(self, batch: pa.RecordBatch) -> list[bytes | None]:
        columns = []
        for i, (column, text_of) in enumerate(zip(self._columns, self._texts)):
            first = i == 0
            columns.append([
                None if v is None else self._quoted(text_of(v), first)
                for v in column_values(batch, column.name)
            ])
        if self._null_single_key:
            return [None if t is None else t.encode() for t in columns[0]]
        rows = zip(*columns) if columns else [()] * batch.num_rows
        return [self._delimiter.join(t or "" for t in row).encode() for row in rows]

    def _quoted(self, text: str, first: bool) -> str:
        """commons-csv 1.4's ``QuoteMode.MINIMAL`` decision (the version ksqlDB ships)."""
        if text:
            c = text[0]
            quote = (
                (first and not (c.isascii() and c.isalnum()))
                or c <= "#"
                or self._quote_needed(text) is not None
                or text[-1] <= " "
            )
        else:
            quote = first  # an empty first field is quoted so the line is not blank
        return '"' + text.replace('"', '""') + '"' if quote else text


def _parser(t: SqlType) -> Parser:
    if isinstance(t, DecimalType):
        return partial(parse_decimal, precision=t.precision, scale=t.scale)
    return _PARSERS[t.kind]


_PARSERS: dict[Kind, Parser] = {
    Kind.BOOLEAN: lambda s: s.lower() == "true",
    Kind.INTEGER: partial(parse_long, type_name="INTEGER", lo=INT_MIN, hi=INT_MAX),
    Kind.BIGINT: partial(parse_long, type_name="BIGINT"),
    Kind.DOUBLE: parse_double,
    Kind.STRING: str,
    Kind.BYTES: decode_base64,
    Kind.DATE: lambda s: check_date(parse_long(s, "DATE")),
    Kind.TIME: lambda s: check_time(parse_long(s, "TIME")),
    Kind.TIMESTAMP: lambda s: timestamp_micros(parse_long(s, "TIMESTAMP")),
}

#: Domain value to field text, per type (the types DELIMITED supports).
_TEXTS: dict[Kind, Callable[[Any], str]] = {
    Kind.BOOLEAN: lambda v: "true" if v else "false",
    Kind.INTEGER: str,
    Kind.BIGINT: str,
    Kind.DOUBLE: java_double,
    Kind.DECIMAL: lambda v: format(v, "f"),  # BigDecimal.toPlainString
    Kind.STRING: str,
    Kind.BYTES: encode_base64,
    Kind.DATE: str,
    Kind.TIME: str,
    Kind.TIMESTAMP: str,
}
