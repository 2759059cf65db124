"""Where a new query starts reading: ``auto.offset.reset=latest`` pinned when its statement runs.

Spark resolves a source's starting offsets when it plans the query's first micro-batch, a second
or more after the statement returned (and longer on a busy machine): records produced in between
would never be read, so a user who creates a table and inserts at once saw an empty table
(issue #18). Each scan that would start at ``latest`` is given the topic's end offsets as of the
statement instead. A persistent query keeps them in its checkpoint directory
(:data:`START_FILE`), so a restart before its first batch committed starts from the same place;
once a batch has committed, Spark's checkpoint decides and the file is only history.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from streamsql.physical.steps import PhysicalPlan
from streamsql.runtime import paths

START_FILE = "streamsql-start.json"

#: topic → partition → offset
Pins = dict[str, dict[int, int]]


def pin_starts(plan: PhysicalPlan, end_offsets: Callable[[str], dict[int, int]],
               checkpoint: Path | None = None) -> None:
    """Give every scan of ``plan`` that starts at ``latest`` its topic's end offsets now, or those
    pinned in ``checkpoint`` when the query first ran (written there when new)."""
    scans = [scan for scan in plan.scans() if scan.starting_offsets == "latest"]
    if not scans:
        return
    pins = read_pins(checkpoint) if checkpoint is not None else {}
    fresh = False
    for scan in scans:
        topic = scan.source.topic
        if topic not in pins:
            pins[topic] = end_offsets(topic)
            fresh = True
        scan.pinned = dict(pins[topic])
    if checkpoint is not None and fresh:
        checkpoint.mkdir(parents=True, exist_ok=True)
        text = {topic: {str(p): o for p, o in sorted(offsets.items())} for topic, offsets in pins.items()}
        (checkpoint / START_FILE).write_text(json.dumps(text), encoding="utf-8")


def read_pins(checkpoint: Path) -> Pins:
    """The offsets pinned in ``checkpoint`` (none when absent or unreadable: the query is new)."""
    try:
        text = json.loads((checkpoint / START_FILE).read_text(encoding="utf-8"))
        return {str(topic): {int(p): int(o) for p, o in offsets.items()} for topic, offsets in text.items()}
    except (OSError, ValueError, AttributeError, TypeError):
        return {}


def restart_uncommitted(checkpoint: Path, data_dir: Path) -> None:
    """Empty the checkpoint of a query stopped before Spark planned its first batch (a state
    directory without an offset log is refused at batch 0; nothing was read, so nothing is
    lost), keeping the offsets its statement pinned."""
    pinned = (checkpoint / START_FILE).read_bytes() if (checkpoint / START_FILE).exists() else None
    paths.remove_tree(data_dir, checkpoint)
    if pinned is not None:
        checkpoint.mkdir(parents=True, exist_ok=True)
        (checkpoint / START_FILE).write_bytes(pinned)
