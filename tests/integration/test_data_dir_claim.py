"""One engine per data directory, on the real broker and SparkSession (issue #18 item 6): a
second engine is refused with the holder's pid while the first keeps running; state written
against another cluster is never deleted."""

from __future__ import annotations

import json
import os

import pytest

from streamsql.errors import DataDirError

from tests.integration.test_engine import produce, read

pytestmark = pytest.mark.integration


def test_a_second_engine_is_refused_and_the_first_runs_on(engine, topic_name, bootstrap, spark):  # type: ignore[no-untyped-def]
    from streamsql.runtime.config import EngineConfig
    from streamsql.runtime.engine import Engine

    src = topic_name("claim")
    engine.execute(f"CREATE STREAM claim (v INT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);"
                   f"CREATE STREAM claim_out AS SELECT v * 2 AS w FROM claim;")
    second = Engine(EngineConfig(bootstrap, engine.data_dir), spark=spark)
    with pytest.raises(DataDirError, match=rf"is in use by another streamsql engine \(pid {os.getpid()}, "):
        second.start()
    second.close()
    assert len(second.queries) == 0 and second.catalog.find("CLAIM") is None  # it replayed nothing
    produce(engine.admin, src, [(None, '{"v":21}', 1)])
    engine.wait_until_idle()
    assert [v for _k, v, _ts in read(engine.admin, "CLAIM_OUT")] == [{"W": 42}]


def test_state_of_another_cluster_stays_untouched(engine, bootstrap, spark, tmp_path):  # type: ignore[no-untyped-def]
    from streamsql.runtime.config import EngineConfig
    from streamsql.runtime.engine import Engine

    state = tmp_path / "elsewhere"
    state.mkdir()
    (state / "cluster.json").write_text(json.dumps({"cluster_id": "prod-cluster", "bootstrap_servers": "kafka:9092",
                                                    "ephemeral": False}))
    (state / "commands.jsonl").write_text("kept\n")
    other = Engine(EngineConfig(bootstrap, state), spark=spark)
    with pytest.raises(DataDirError, match="holds the catalog and query checkpoints of Kafka cluster prod-cluster"):
        other.start()
    other.close()
    assert (state / "commands.jsonl").read_text() == "kept\n"
    again = Engine(EngineConfig(bootstrap, state), spark=spark)  # the claim was given back on the way out
    with pytest.raises(DataDirError, match="prod-cluster"):
        again.start()
    again.close()
