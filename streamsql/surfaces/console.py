"""How the interactive shell shows results: the ksql CLI's layouts, and its JSON output mode.

Entities (statement results) print as the ksql CLI's underlined tables: a header row, a rule of
dashes, the rows, a closing rule, every cell left-aligned and padded to its column's width, each
entity preceded by a blank line. Query rows stream into fixed-width boxes sized from the terminal
width (``|COL   |COL   |``), wrapping long values onto extra lines, so a row can be printed the
moment it arrives without knowing the widths of later rows. ``output JSON`` prints each entity as
ksqlDB's REST API would return it, and query rows as ``/query-stream`` lines.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from streamsql.runtime import results as r
from streamsql.surfaces import presenters
from streamsql.surfaces.presenters import cell_text


def underlined_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], footer: Sequence[str] = (),
                     max_width: int | None = None) -> str:
    """`` H1 | H2 `` / ``-----`` / `` v1 | v2 `` / ``-----`` (the ksql CLI's entity tables)."""
    cells = [[cell_text(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(row[i]) for row in cells]) for i, h in enumerate(headers)]
    rule_width = sum(w + 3 for w in widths) - 1
    rule = "-" * (min(rule_width, max_width) if max_width else rule_width)

    def line(values: Sequence[str]) -> str:
        return "|".join(f" {v:<{w}} " for v, w in zip(values, widths))

    out = [line(headers), rule] + [line(row) for row in cells] + [rule]
    return "\n".join(out + list(footer))


def _display_type(sql_type: str) -> str:
    """ksqlDB shows strings as ``VARCHAR(STRING)`` in DESCRIBE."""
    return "VARCHAR(STRING)" if sql_type.upper() in ("STRING", "VARCHAR") else sql_type


def render_entity(result: r.Result, width: int = 120) -> str:
    """One statement result in the ksql CLI's tabular layout (row streams excepted): its
    presentation (``surfaces/presenters.py``), shared with the CLI renderer, in underlined tables."""
    presentation = presenters.present(result)
    if presentation is not None:
        return "\n".join(_block(b, width) for b in presentation.blocks)
    if isinstance(result, r.SourceDescription):
        return _describe(result, width)
    return str(result)


def _block(block: presenters.Block, width: int) -> str:
    if isinstance(block, presenters.Table):
        return underlined_table(block.headers, block.rows, footer=[block.hint] if block.hint else (),
                                max_width=width)
    if isinstance(block, presenters.Message):  # the ksql CLI shows a warning as a message too
        return underlined_table(["Message"], [[block.text]], max_width=width)
    return block


def _describe(d: r.SourceDescription, width: int) -> str:
    s = d.source
    key_note = "(primary key)" if s.kind.upper() == "TABLE" else "(key)"
    rows = [[f.name, _display_type(f.type) + (f"  {key_note}" if f.key else "")] for f in d.fields]
    head = [f"Name                 : {s.name}"]
    if not d.extended:
        return "\n".join(head + [underlined_table(["Field", "Type"], rows, max_width=width),
                                 "For runtime statistics and query details run: DESCRIBE <Stream,Table> EXTENDED;"])
    head += [f"Type                 : {s.kind.upper()}",
             f"Timestamp field      : {d.timestamp_column or 'Not set - using <ROWTIME>'}",
             f"Key format           : {s.key_format}", f"Value format         : {s.value_format}",
             f"Kafka topic          : {s.topic} (partitions: {d.partitions})",
             f"Statement            : {d.statement_text}"]
    tail = ["", f"Queries that read from this {s.kind.upper()}", "-" * 40] + [f"{q}" for q in d.read_queries]
    tail += ["", f"Queries that write into this {s.kind.upper()}", "-" * 40] + [f"{q}" for q in d.write_queries]
    return "\n".join(head + [underlined_table(["Field", "Type"], rows, max_width=width)] + tail)


@dataclass
class RowBoxes:
    """Streaming query rows in fixed-width cells: ``max(width / columns - 2, 5)`` characters each
    (the ksql CLI's sizing), values longer than a cell wrapped onto continuation lines."""

    columns: Sequence[str]
    terminal_width: int = 120

    @property
    def cell_width(self) -> int:
        return max(self.terminal_width // max(len(self.columns), 1) - 2, 5)

    def border(self) -> str:
        return "+" + "+".join("-" * self.cell_width for _ in self.columns) + "+"

    def header(self) -> str:
        return "\n".join([self.border(), self.row(self.columns, raw=True), self.border()])

    def row(self, values: Sequence[Any], raw: bool = False) -> str:
        w = self.cell_width
        texts = [str(v) if raw else cell_text(v) for v in values]
        chunks = [[t[i : i + w] for i in range(0, len(t), w)] or [""] for t in texts]
        height = max(len(c) for c in chunks)
        lines = []
        for n in range(height):
            lines.append("|" + "|".join(f"{(c[n] if n < len(c) else ''):<{w}}" for c in chunks) + "|")
        return "\n".join(lines)


# --- JSON output mode ---------------------------------------------------------------------------


def render_json(result: r.Result) -> str:
    from streamsql.entities import strict_json, to_entity

    return json.dumps(strict_json(to_entity(result)), indent=2, default=str)


def stream_header_json(stream: r.RowStream) -> str:
    return json.dumps({"queryId": stream.query_id, "columnNames": [n for n, _ in stream.columns],
                       "columnTypes": [t for _, t in stream.columns]})


def stream_row_json(row: Sequence[Any]) -> str:
    from streamsql.entities import strict_json

    return json.dumps(strict_json(list(row)), default=str)
