"""Text rendering of engine results for ``streamsql run`` and scripts: boxed tables. What each
result shows is its presenter's (``surfaces/presenters.py``), shared with the shell."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from streamsql.runtime import results as r
from streamsql.surfaces import presenters
from streamsql.surfaces.presenters import cell_text


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[cell_text(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(row[i]) for row in cells]) for i, h in enumerate(headers)]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    out = [line, "|" + "|".join(f" {h:<{w}} " for h, w in zip(headers, widths)) + "|", line]
    out += ["|" + "|".join(f" {c:<{w}} " for c, w in zip(row, widths)) + "|" for row in cells]
    out.append(line)
    return "\n".join(out)


def _block(block: presenters.Block) -> str:
    if isinstance(block, presenters.Table):
        return table(block.headers, block.rows)
    if isinstance(block, presenters.Message):
        return f" {block.label}: {block.text}"
    return block


def row_line(columns: Sequence[tuple[str, str]], row: Sequence[Any]) -> str:
    return "|" + "|".join(f"{cell_text(v)}" for v in row) + "|"


def render(result: r.Result) -> str:
    """Everything except row streams (which are printed as rows arrive): a result's
    presentation (``surfaces/presenters.py``) in boxed tables."""
    presentation = presenters.present(result)
    if presentation is not None:
        return "\n".join(_block(b) for b in presentation.blocks)
    if isinstance(result, r.SourceDescription):
        s = result.source
        head = [f"Name                 : {s.name}", f"Type                 : {s.kind}",
                f"Timestamp field      : {result.timestamp_column or 'Not set - using <ROWTIME>'}",
                f"Key format           : {s.key_format}", f"Value format         : {s.value_format}",
                f"Kafka topic          : {s.topic} (partitions: {result.partitions})"]
        fields = table(["Field", "Type"], [[f.name, f.type + ("  (key)" if f.key else "")] for f in result.fields])
        tail = []
        if result.extended or result.read_queries or result.write_queries:
            tail = [f"Queries that read from this {s.kind}: {', '.join(result.read_queries) or '-'}",
                    f"Queries that write to this {s.kind}: {', '.join(result.write_queries) or '-'}"]
        if result.offset_summaries:  # ksqlDB's consumer groups summary
            tail += ["", "Consumer Groups summary:"]
            for o in result.offset_summaries:
                tail += ["", f"Consumer Group       : {o.group_id}", "", f"Kafka topic          : {o.topic}",
                         f"Max lag              : {max((p.lag for p in o.partitions), default=0)}", "",
                         table(["Partition", "Start Offset", "End Offset", "Offset", "Lag"],
                               [[str(p.partition), str(p.log_start), str(p.log_end), str(p.committed), str(p.lag)]
                                for p in o.partitions])]
        return "\n".join(head + [fields] + tail)
    return str(result)
