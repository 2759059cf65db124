"""The process that answers a query's offset calls for its Kafka source (Spark's streaming
source runner, one Python process per source) dies: the query is restarted from its checkpoint
and goes on, nothing lost or written twice. Session 37's CI saw one die at a join's first
offsets; the JVM sees only end-of-file, which failed the query for good."""

from __future__ import annotations

import json
import os
import signal

import psutil
import pytest

pytestmark = pytest.mark.integration

RUNNER = "python_streaming_source_runner"


def source_runners() -> set[int]:
    """Spark's streaming source runners among this test process's descendants."""
    me = psutil.Process(os.getpid())
    out = set()
    for p in me.children(recursive=True):
        try:
            if any(RUNNER in part for part in p.cmdline()):
                out.add(p.pid)
        except psutil.Error:
            continue
    return out


def test_a_query_whose_source_runner_died_is_restarted_and_loses_nothing(engine, topic_name) -> None:  # type: ignore[no-untyped-def]
    src, out = topic_name("runner_in"), topic_name("runner_out")
    engine.execute(f"CREATE STREAM s (k STRING KEY, v INT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);")
    for i in range(5):
        engine.admin.produce(src, b"k%d" % i, json.dumps({"V": i}).encode(), 1000 + i, flush=False)
    engine.admin.flush()
    before = source_runners()
    engine.execute(f"CREATE STREAM o WITH (KAFKA_TOPIC='{out}') AS SELECT k, v FROM s WHERE v >= 0;")
    engine.wait_until_idle()
    runners = source_runners() - before
    assert runners, "the query's source runner was not found among this process's descendants"
    for pid in runners:
        os.kill(pid, signal.SIGKILL)
    for i in range(5, 10):
        engine.admin.produce(src, b"k%d" % i, json.dumps({"V": i}).encode(), 1000 + i, flush=False)
    engine.admin.flush()
    engine.wait_until_idle()  # failed with "EOFException … PythonStreamingSourceRunner" before
    values = sorted(json.loads(r.value or b"")["V"] for r in engine.admin.read_all(out))
    assert values == list(range(10))
    assert engine.queries.get("CSAS_O_1") is not None
    assert not engine.failed_queries()
