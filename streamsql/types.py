"""ksqlDB's SQL types, and how each one maps onto Spark.

This is the one home of the type system. The parser builds these objects from type text, the
catalog stores them (as their SQL text), formats use them to (de)serialize, and the planner asks
them for Spark types. Nothing else in the project invents a type representation.

Where ksqlDB and Spark differ in representation (documented in docs/differences.md):
  * TIME is held as an INT of milliseconds since midnight (Spark has no stable TIME type across 4.x).
  * TIMESTAMP is Spark's TIMESTAMP (microseconds, UTC session time zone); ksqlDB's is milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import types as st


class Kind(str, Enum):  # noqa: UP042 - StrEnum would change str()/format() of a member
    BOOLEAN = "BOOLEAN"
    INTEGER = "INTEGER"
    BIGINT = "BIGINT"
    DOUBLE = "DOUBLE"
    DECIMAL = "DECIMAL"
    STRING = "STRING"
    BYTES = "BYTES"
    DATE = "DATE"
    TIME = "TIME"
    TIMESTAMP = "TIMESTAMP"
    ARRAY = "ARRAY"
    MAP = "MAP"
    STRUCT = "STRUCT"


#: Spellings accepted in SQL text for the primitive kinds (ksqlDB accepts these aliases).
PRIMITIVE_ALIASES: dict[str, Kind] = {
    "BOOLEAN": Kind.BOOLEAN,
    "INT": Kind.INTEGER,
    "INTEGER": Kind.INTEGER,
    "BIGINT": Kind.BIGINT,
    "DOUBLE": Kind.DOUBLE,
    "VARCHAR": Kind.STRING,
    "STRING": Kind.STRING,
    "BYTES": Kind.BYTES,
    "DATE": Kind.DATE,
    "TIME": Kind.TIME,
    "TIMESTAMP": Kind.TIMESTAMP,
}


@dataclass(frozen=True)
class Primitive:
    kind: Kind

    def __str__(self) -> str:
        return self.kind.value


@dataclass(frozen=True)
class Decimal:
    precision: int
    scale: int
    kind: Kind = field(default=Kind.DECIMAL, init=False)

    def __str__(self) -> str:
        return f"DECIMAL({self.precision}, {self.scale})"


@dataclass(frozen=True)
class Array:
    element: SqlType
    kind: Kind = field(default=Kind.ARRAY, init=False)

    def __str__(self) -> str:
        return f"ARRAY<{self.element}>"


@dataclass(frozen=True)
class Map:
    key: SqlType
    value: SqlType
    kind: Kind = field(default=Kind.MAP, init=False)

    def __str__(self) -> str:
        return f"MAP<{self.key}, {self.value}>"


@dataclass(frozen=True)
class StructField:
    name: str
    type: SqlType


@dataclass(frozen=True)
class Struct:
    fields: tuple[StructField, ...]
    kind: Kind = field(default=Kind.STRUCT, init=False)

    def field(self, name: str) -> StructField | None:
        """Field lookup: exact name first, then case-insensitive (ksqlDB resolves the same way)."""
        for f in self.fields:
            if f.name == name:
                return f
        for f in self.fields:
            if f.name.upper() == name.upper():
                return f
        return None

    def __str__(self) -> str:
        inner = ", ".join(f"`{f.name}` {f.type}" for f in self.fields)
        return f"STRUCT<{inner}>"


SqlType = Primitive | Decimal | Array | Map | Struct

BOOLEAN = Primitive(Kind.BOOLEAN)
INTEGER = Primitive(Kind.INTEGER)
BIGINT = Primitive(Kind.BIGINT)
DOUBLE = Primitive(Kind.DOUBLE)
STRING = Primitive(Kind.STRING)
BYTES = Primitive(Kind.BYTES)
DATE = Primitive(Kind.DATE)
TIME = Primitive(Kind.TIME)
TIMESTAMP = Primitive(Kind.TIMESTAMP)

NUMERIC_KINDS = frozenset({Kind.INTEGER, Kind.BIGINT, Kind.DOUBLE, Kind.DECIMAL})


def is_numeric(t: SqlType) -> bool:
    return t.kind in NUMERIC_KINDS


def holds_map(t: SqlType) -> bool:
    """Whether values of ``t`` hold a MAP somewhere (as itself, an element or a field): Spark can
    neither compare nor order them, and some formats cannot hold them."""
    if isinstance(t, Map):
        return True
    if isinstance(t, Array):
        return holds_map(t.element)
    if isinstance(t, Struct):
        return any(holds_map(f.type) for f in t.fields)
    return False


def to_spark(t: SqlType) -> st.DataType:
    """The Spark type that holds values of ``t`` inside a query. (PySpark is imported here, not
    with the module: the shell on a server parses statements with these types and loads no Spark.)"""
    from pyspark.sql import types as st
    if isinstance(t, Primitive):
        return {
            Kind.BOOLEAN: st.BooleanType(),
            Kind.INTEGER: st.IntegerType(),
            Kind.BIGINT: st.LongType(),
            Kind.DOUBLE: st.DoubleType(),
            Kind.STRING: st.StringType(),
            Kind.BYTES: st.BinaryType(),
            Kind.DATE: st.DateType(),
            Kind.TIME: st.IntegerType(),
            Kind.TIMESTAMP: st.TimestampType(),
        }[t.kind]
    if isinstance(t, Decimal):
        return st.DecimalType(t.precision, t.scale)
    if isinstance(t, Array):
        return st.ArrayType(to_spark(t.element), containsNull=True)
    if isinstance(t, Map):
        return st.MapType(to_spark(t.key), to_spark(t.value), valueContainsNull=True)
    if isinstance(t, Struct):
        return st.StructType([st.StructField(f.name, to_spark(f.type), nullable=True) for f in t.fields])
    raise TypeError(f"not a SQL type: {t!r}")


def from_spark(dt: st.DataType) -> SqlType:
    """The SQL type of a Spark expression's result (used to type projections)."""
    from pyspark.sql import types as st
    if isinstance(dt, st.BooleanType):
        return BOOLEAN
    if isinstance(dt, (st.IntegerType, st.ShortType, st.ByteType)):
        return INTEGER
    if isinstance(dt, st.LongType):
        return BIGINT
    if isinstance(dt, (st.DoubleType, st.FloatType)):
        return DOUBLE
    if isinstance(dt, st.DecimalType):
        return Decimal(dt.precision, dt.scale)
    if isinstance(dt, (st.StringType, st.VarcharType, st.CharType)):
        return STRING
    if isinstance(dt, st.BinaryType):
        return BYTES
    if isinstance(dt, st.DateType):
        return DATE
    if isinstance(dt, (st.TimestampType, st.TimestampNTZType)):
        return TIMESTAMP
    if isinstance(dt, st.ArrayType):
        return Array(from_spark(dt.elementType))
    if isinstance(dt, st.MapType):
        return Map(from_spark(dt.keyType), from_spark(dt.valueType))
    if isinstance(dt, st.StructType):
        return Struct(tuple(StructField(f.name, from_spark(f.dataType)) for f in dt.fields))
    if isinstance(dt, st.NullType):
        return STRING
    raise TypeError(f"no SQL type for Spark type {dt.simpleString()}")


@dataclass(frozen=True)
class Column:
    """A column of a stream or table.

    ``role`` is ``"key"``, ``"value"``, ``"headers"`` (all headers as ARRAY<STRUCT<KEY, VALUE>>)
    or ``"header"`` (one header, named by ``header_key``).
    """

    name: str
    type: SqlType
    role: str = "value"
    header_key: str | None = None

    @property
    def is_key(self) -> bool:
        return self.role == "key"

    def sql(self) -> str:
        suffix = {"key": " KEY", "value": "", "headers": " HEADERS"}.get(self.role, "")
        if self.role == "header":
            suffix = f" HEADER('{self.header_key}')"
        return f"`{self.name}` {self.type}{suffix}"


#: Pseudo columns every source row carries (ksqlDB's ROWTIME, ROWPARTITION, ROWOFFSET).
ROWTIME = "ROWTIME"
ROWPARTITION = "ROWPARTITION"
ROWOFFSET = "ROWOFFSET"
WINDOWSTART = "WINDOWSTART"
WINDOWEND = "WINDOWEND"
PSEUDO_COLUMNS: dict[str, SqlType] = {ROWTIME: BIGINT, ROWPARTITION: INTEGER, ROWOFFSET: BIGINT}
#: Internal columns of every source row on Spark: the record's headers (passed on to the
#: output record) and whether its value was null (a tombstone).
HEADERS_COL = "__HEADERS"
TOMBSTONE_COL = "__TOMBSTONE"


def to_arrow(t: SqlType) -> pa.DataType:
    """The Arrow type a source/format must produce for ``t`` (what Spark expects from a Python
    data source: timestamps as ``timestamp[us, tz=UTC]``)."""
    from pyspark.sql.pandas.types import to_arrow_type

    return to_arrow_type(to_spark(t), timezone="UTC")
