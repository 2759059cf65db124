"""Where a new query begins (runtime/starts.py, issue #18 item 2) without a broker: ``latest``
pinned per scan, kept in the checkpoint across a restart before the first batch, and the Kafka
source's ``startingOffsets`` option that carries the pinned offsets (Spark's JSON form)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamsql import types as t
from streamsql.catalog import Catalog, Source
from streamsql.errors import ConfigError
from streamsql.functions.catalog import builtin_registry
from streamsql.kafka.options import SourceOptions
from streamsql.physical.steps import Collect, Join, PhysicalPlan, Scan, physical_plan
from streamsql.planner.planner import Planner
from streamsql.runtime import starts
from streamsql.sql import parse


def _plan(sql: str, starting: str) -> PhysicalPlan:
    catalog = Catalog()
    for name in ("O", "C"):
        catalog.add(Source(name, "TABLE" if name == "C" else "STREAM",
                           [t.Column("ID", t.BIGINT, "key"), t.Column("V", t.INTEGER)],
                           topic=f"{name.lower()}_topic", key_format="KAFKA", value_format="JSON", partitions=2))
    [stmt] = parse(sql)
    logical = Planner(catalog, builtin_registry()).plan_query(stmt.query, persistent=False)
    return physical_plan(logical, Collect(lambda _df, _id: None), starting)


class Ends:
    """End offsets as a broker would answer, counting the questions."""

    def __init__(self, **ends: dict[int, int]) -> None:
        self.ends = ends
        self.asked: list[str] = []

    def __call__(self, topic: str) -> dict[int, int]:
        self.asked.append(topic)
        return dict(self.ends[topic])


def test_latest_is_pinned_on_every_scan_of_a_join_and_explained() -> None:
    plan = _plan("SELECT * FROM o JOIN c ON o.id = c.id EMIT CHANGES;", "latest")
    starts.pin_starts(plan, Ends(o_topic={0: 5, 1: 7}, c_topic={0: 2, 1: 0}))
    join = plan.steps[0]
    assert isinstance(join, Join)
    assert [(s.source.topic, s.pinned) for s in join.scans()] == [("o_topic", {0: 5, 1: 7}), ("c_topic", {0: 2, 1: 0})]
    assert "Scan stream O (topic o_topic, key KAFKA, value JSON, from latest as the statement was accepted, " \
           "partition:offset 0:5, 1:7)" in plan.explain()


def test_earliest_needs_no_pin_and_asks_the_broker_nothing() -> None:
    plan = _plan("SELECT * FROM o EMIT CHANGES;", "earliest")
    ends = Ends()
    starts.pin_starts(plan, ends)
    assert ends.asked == []
    [scan] = plan.scans()
    assert scan.pinned is None


def test_a_checkpoints_pins_survive_a_restart_before_the_first_batch(tmp_path: Path) -> None:
    checkpoint = tmp_path / "CSAS_X_1"
    first = _plan("SELECT * FROM o EMIT CHANGES;", "latest")
    starts.pin_starts(first, Ends(o_topic={0: 5, 1: 7}), checkpoint)
    assert json.loads((checkpoint / starts.START_FILE).read_text()) == {"o_topic": {"0": 5, "1": 7}}
    (checkpoint / "offsets").mkdir()  # Spark had begun, not committed
    starts.restart_uncommitted(checkpoint, tmp_path)
    assert sorted(p.name for p in checkpoint.iterdir()) == [starts.START_FILE]
    again = _plan("SELECT * FROM o EMIT CHANGES;", "latest")
    later = Ends(o_topic={0: 50, 1: 70})  # records arrived while it was down: they are read
    starts.pin_starts(again, later, checkpoint)
    assert later.asked == []
    [scan] = again.scans()
    assert scan.pinned == {0: 5, 1: 7}


def test_an_unreadable_pin_file_counts_as_none(tmp_path: Path) -> None:
    (tmp_path / starts.START_FILE).write_text("not json")
    assert starts.read_pins(tmp_path) == {}


def test_the_source_takes_sparks_json_starting_offsets() -> None:
    base = {"kafka.bootstrap.servers": "b:9092", "topic": "orders"}
    opts = SourceOptions.parse({**base, "startingOffsets": '{"orders": {"0": 12, "1": -2, "2": -1}}'})
    assert (opts.starting, opts.start_at) == ("pinned", {0: 12, 1: -2, 2: -1})
    assert SourceOptions.parse({**base, "startingOffsets": "Earliest"}).starting == "earliest"
    for bad in ('{"other": {"0": 1}}', '{"orders": [1]}', '{"orders": {"0": "x"}}', '{"orders": {"0": -3}}', "soon"):
        with pytest.raises(ConfigError, match=r"startingOffsets must be 'earliest', 'latest' or "
                                              r"\{\"orders\": \{\"<partition>\": <offset>\}\}, not"):
            SourceOptions.parse({**base, "startingOffsets": bad})


def test_a_scan_without_a_pin_reads_as_before() -> None:
    [scan] = _plan("SELECT * FROM o EMIT CHANGES;", "latest").scans()
    assert isinstance(scan, Scan) and scan.pinned is None
    assert scan.describe().endswith("from latest)")
