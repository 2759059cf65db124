"""The contract every serialization format implements.

A format turns the raw bytes of one side of a Kafka record (key or value) into typed columns,
and typed columns back into bytes. It works a whole Arrow batch at a time because it runs inside
the Kafka source's ``read()`` and the sink's ``write()`` on Spark's Python workers, where
per-record Python overhead is the cost that matters.

A record that does not decode never raises: its columns are null and its entry in
``DecodeResult.errors`` says what was wrong (field name and reason). The source sends such
records to the processing log and drops them; every other record in the batch goes on.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from streamsql.types import Column

if TYPE_CHECKING:
    # Annotations only: the driver imports this module (catalog -> formats) and never needs
    # pyarrow's ~30-80 MB unless it decodes records itself.
    import pyarrow as pa


@dataclass(frozen=True)
class FormatSpec:
    """What a serde needs to know: the format name (upper-case: JSON, DELIMITED, KAFKA, NONE),
    the columns it holds (for a key: the key columns; for a value: the value columns), and the
    format's own options."""

    name: str
    columns: tuple[Column, ...]
    delimiter: str = ","
    wrap_single_value: bool = True
    options: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        """Text form, so a spec travels through Spark data source options (strings only)."""
        return json.dumps(
            {
                "name": self.name,
                "columns": [[c.name, str(c.type), c.role, c.header_key] for c in self.columns],
                "delimiter": self.delimiter,
                "wrap_single_value": self.wrap_single_value,
                "options": self.options,
            },
            sort_keys=True,
        )

    @staticmethod
    def from_json(text: str) -> FormatSpec:
        from streamsql.sql import parse_type  # the SQL parser: loaded by a spec with columns only

        d = json.loads(text)
        cols = tuple(Column(n, parse_type(t), r, h) for n, t, r, h in d["columns"])
        return FormatSpec(d["name"], cols, d["delimiter"], d["wrap_single_value"], d.get("options", {}))


@dataclass
class DecodeResult:
    """``columns[i]`` holds spec column ``i`` as an Arrow array of ``types.to_arrow(col.type)``;
    ``errors[r]`` is None for a good record, else the reason record ``r`` failed."""

    columns: list[pa.Array]
    errors: list[str | None]


class Serde(Protocol):
    def decode(self, data: Sequence[bytes | None]) -> DecodeResult: ...

    def encode(self, batch: pa.RecordBatch) -> list[bytes | None]:
        """``batch`` has exactly the spec's columns, by name. A row whose columns are all null is
        encoded as a null record only when the caller asks (tombstones are the caller's call)."""
        ...


def inferred_name(name: str, keep_names: bool) -> str:
    """A column or struct field name inferred from a registered schema: upper-cased, as ksqlDB
    infers from a subject's latest schema, or as written when ``keep_names`` (a schema named by
    ``KEY_/VALUE_SCHEMA_ID``: ksqlDB's ``ORIGINAL_FIELD_NAME`` policy)."""
    return name if keep_names else name.upper()
