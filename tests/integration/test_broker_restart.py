"""A broker killed (SIGKILL) and restarted on the same port with durable storage (issue #18 item
4): tansu's ``s3://`` storage engine over a real S3-compatible server process (``moto_server``)
keeps every record across the restart (research/facts.md). The engine's queries — a stream
filter and a count per key — go on through the outage under the query supervisor, as in
``streamsql run`` and the server: nothing acknowledged is lost, and the table is exact.

The broker is the test's own (killing the session's broker would break every other test)."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator

import pytest

from streamsql.kafka.admin import KafkaAdmin
from streamsql.kafka.broker import EmbeddedBroker
from streamsql.runtime.config import EngineConfig
from streamsql.runtime.engine import Engine
from streamsql.runtime.supervisor import QuerySupervisor
from tests.support.moto import moto_server

pytestmark = pytest.mark.integration

BUCKET = "tansu"


@pytest.fixture
def s3_env() -> Iterator[dict[str, str]]:
    """A moto S3 server process with the broker's bucket; the ``AWS_*`` settings tansu reads."""
    with moto_server() as url:
        env = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1",
               "AWS_ENDPOINT": url, "AWS_ALLOW_HTTP": "true"}
        import boto3

        boto3.client("s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id="test",
                     aws_secret_access_key="test").create_bucket(Bucket=BUCKET)
        yield env


def _produce(admin: KafkaAdmin, topic: str, ids: range) -> None:
    for i in ids:
        admin.produce(topic, f"u{i % 7}".encode(), json.dumps({"id": i}).encode(), 1_700_000_000_000 + i, flush=False)
    admin.flush()  # acknowledged


def _wait(check, timeout_s: float = 180):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(1)


def test_a_broker_killed_and_restarted_with_durable_storage_loses_nothing(s3_env, spark, tmp_path):  # type: ignore[no-untyped-def]
    broker = EmbeddedBroker(storage=f"s3://{BUCKET}/", env=s3_env, data_dir=tmp_path / "broker").start()
    port, cluster = broker.port, broker.cluster_id
    engine = Engine(EngineConfig(broker.bootstrap_servers, tmp_path / "state"), spark=spark)
    supervisor = QuerySupervisor(engine)
    admin = KafkaAdmin(broker.bootstrap_servers)
    try:
        engine.start()
        supervisor.start()
        engine.execute("SET 'auto.offset.reset'='earliest';")
        engine.execute("CREATE STREAM ev (u VARCHAR KEY, id INT) WITH (KAFKA_TOPIC='ev', VALUE_FORMAT='JSON', "
                       "PARTITIONS=2);")
        engine.execute("CREATE STREAM odd AS SELECT u, id FROM ev WHERE id % 2 = 1;")
        engine.execute("CREATE TABLE per_u AS SELECT u, COUNT(*) AS n FROM ev GROUP BY u;")
        _produce(admin, "ev", range(0, 300))
        engine.wait_until_idle()

        assert broker.pid is not None
        os.kill(broker.pid, signal.SIGKILL)
        broker.wait()
        time.sleep(3)  # the engine's clients find it gone
        broker = EmbeddedBroker(port=port, storage=f"s3://{BUCKET}/", env=s3_env, cluster_id=cluster,
                                data_dir=tmp_path / "broker").start()
        assert len(admin.read_all("ev")) == 300  # every acknowledged record is still there
        _produce(admin, "ev", range(300, 600))

        def odd_ids() -> list[int]:
            return sorted(json.loads(r.value)["ID"] for r in admin.read_all("ODD"))

        def counts() -> dict[str, int]:
            latest = {r.key.decode(): json.loads(r.value)["N"] for r in admin.read_all("PER_U")}
            return latest if latest == {f"u{k}": len(range(k, 600, 7)) for k in range(7)} else {}

        assert set(_wait(lambda: set(odd_ids()) == set(range(1, 600, 2)) and odd_ids())) == set(range(1, 600, 2))
        assert _wait(counts)
        [pull] = engine.execute("SELECT u, n FROM per_u;")
        assert sorted(pull.rows(timeout=60)) == [[f"u{k}", len(range(k, 600, 7))] for k in range(7)]
        print(f"restarts by the supervisor: {supervisor.restarts}; odd records out {len(odd_ids())} of 300")
    finally:
        supervisor.stop()
        engine.close()
        admin.close()
        broker.stop()
