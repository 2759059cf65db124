"""What the checkpoint-upgrade tests share (test_join_state_upgrade, test_table_changes_upgrade):
an engine on a data directory that a second engine reopens as the upgraded version, and input
records written with exact keys, values and timestamps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from streamsql.runtime.config import EngineConfig
from streamsql.runtime.engine import Engine


def started_engine(bootstrap: str, spark: Any, data_dir: Path) -> Engine:
    """An engine on ``data_dir`` that reads its sources from the earliest offset."""
    e = Engine(EngineConfig(bootstrap, data_dir), spark=spark)
    e.start()
    e.execute("SET 'auto.offset.reset'='earliest';")
    return e


def produce(engine: Engine, topic: str, records: list[tuple[str, str | None, int]]) -> None:
    """Write (key, value or None for a tombstone, timestamp ms) records, then wait for them."""
    for key, value, ts in records:
        engine.admin.produce(topic, key.encode(), value.encode() if value is not None else None, ts, flush=False)
    engine.admin.flush()
