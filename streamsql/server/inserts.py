"""``/inserts-stream`` rows -> Kafka records, with the target stream's key and value formats.

Rows arrive as JSON objects keyed by column name (case-insensitive, ksqlDB's rule). Values are
coerced to the column types with Arrow (so the same serdes the queries use write the bytes); a
value that does not fit its column is an error naming the column, answered on that row's ack.
"""

from __future__ import annotations

import datetime as dt
import decimal
import time
from typing import Any

from streamsql import types as t
from streamsql.catalog import Source
from streamsql.runtime.executors.inserts import encode_row
from streamsql.server.errors import bad_request


def _coerce(value: Any, ty: t.SqlType, column: str) -> Any:
    """A JSON value as the Python value Arrow expects for ``ty``."""
    if value is None:
        return None
    kind = ty.kind
    try:
        if kind == t.Kind.BOOLEAN:
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("true", "false"):
                return value.lower() == "true"
            raise ValueError
        if kind in (t.Kind.INTEGER, t.Kind.BIGINT):
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return int(value)
        if kind == t.Kind.DOUBLE:
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        if kind == t.Kind.DECIMAL:
            return decimal.Decimal(str(value))
        if kind == t.Kind.STRING:
            if not isinstance(value, str):
                raise ValueError
            return value
        if kind == t.Kind.BYTES:
            import base64

            return base64.b64decode(value)
        if kind == t.Kind.TIMESTAMP:
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return dt.datetime.fromtimestamp(value / 1000, tz=dt.UTC)
            return dt.datetime.fromisoformat(str(value)).replace(tzinfo=dt.UTC)
        if kind == t.Kind.DATE:
            if isinstance(value, int) and not isinstance(value, bool):
                return dt.date(1970, 1, 1) + dt.timedelta(days=value)
            return dt.date.fromisoformat(str(value))
        if kind == t.Kind.TIME:
            if isinstance(value, int) and not isinstance(value, bool):
                return (dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=value)).time()
            return dt.time.fromisoformat(str(value))
        if isinstance(ty, t.Array):
            if not isinstance(value, list):
                raise ValueError
            return [_coerce(v, ty.element, column) for v in value]
        if isinstance(ty, t.Map):
            if not isinstance(value, dict):
                raise ValueError
            return [(k, _coerce(v, ty.value, column)) for k, v in value.items()]
        if isinstance(ty, t.Struct):
            if not isinstance(value, dict):
                raise ValueError
            upper = {str(k).upper(): v for k, v in value.items()}
            return {f.name: _coerce(value.get(f.name, upper.get(f.name.upper())), f.type, column)
                    for f in ty.fields}
    except (ValueError, TypeError, ArithmeticError):
        pass
    raise bad_request(f"Failed to convert value {value!r} of column {column} to {ty}")


def encode_json_row(source: Source, row: dict[str, Any]) -> tuple[bytes | None, bytes | None, int]:
    """(key bytes, value bytes, timestamp ms) for one inserted row."""
    import pyarrow as pa

    by_upper = {c.name.upper(): c for c in source.columns if c.role in ("key", "value")}
    values: dict[str, Any] = {}
    rowtime: int | None = None
    for name, value in row.items():
        if str(name).upper() == t.ROWTIME:
            if not isinstance(value, int) or isinstance(value, bool):
                raise bad_request(f"ROWTIME must be a number of milliseconds, got {value!r}")
            rowtime = value
            continue
        col = by_upper.get(str(name).upper())
        if col is None:
            col_exact = next((c for c in source.columns if c.name == name), None)
            if col_exact is None or col_exact.role not in ("key", "value"):
                raise bad_request(f"Column name {name} does not exist.")
            col = col_exact
        values[col.name] = _coerce(value, col.type, col.name)

    try:
        key, value = encode_row(source, values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as e:
        raise bad_request(f"Failed to encode row: {e}") from None
    return key, value, rowtime if rowtime is not None else int(time.time() * 1000)
