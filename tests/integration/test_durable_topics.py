"""The local broker's durable topics (issue #55 item 2): tansu on ``s3://`` storage over the
data directory's file-backed object store (``kafka/object_store``). Real processes: a SIGKILL of
the broker and of its object store loses no acknowledged record, and none moves."""

from __future__ import annotations

import os
import signal
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from streamsql.background import pid_running
from streamsql.kafka.admin import KafkaAdmin
from streamsql.kafka.broker import (
    CLUSTER_ID_FILE,
    EPHEMERAL_STORAGE,
    MEMORY_TOPICS_DIR,
    TOPICS_DIR,
    EmbeddedBroker,
    LocalBroker,
    free_port,
)
from streamsql.kafka.object_store import FileObjectStore, ObjectStoreServer

pytestmark = pytest.mark.integration


def _produce(bootstrap: str, topic: str, values: range) -> set[tuple[int, int, bytes]]:
    """(partition, offset, value) of every record the broker acknowledged."""
    acked: set[tuple[int, int, bytes]] = set()

    def delivered(err: object, msg: object) -> None:
        if err is None:
            acked.add((msg.partition(), msg.offset(), msg.value()))  # type: ignore[attr-defined]

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in values:
        producer.produce(topic, key=f"k{i % 5}".encode(), value=f"v{i}".encode(), on_delivery=delivered)
        if i % 50 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    return acked


def _gone(pid: int, timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while pid_running(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _stored(bootstrap: str, topic: str) -> set[tuple[int, int, bytes]]:
    admin = KafkaAdmin(bootstrap)
    try:
        return {(r.partition, r.offset, r.value) for r in admin.read_all(topic)}
    finally:
        admin.close()


def test_every_acknowledged_record_survives_a_sigkill_of_the_broker_and_its_store(tmp_path: Path) -> None:
    local = LocalBroker(tmp_path)
    try:
        first, started = local.ensure()
        assert started and first.durable and pid_running(first.store_pid)
        admin = KafkaAdmin(first.bootstrap_servers)
        admin.create_topic("kept", 3)
        admin.close()
        acked = _produce(first.bootstrap_servers, "kept", range(600))
        assert len(acked) == 600

        for pid in (first.pid, first.store_pid):  # every process the local broker started
            os.kill(pid, signal.SIGKILL)
        assert _gone(first.pid) and _gone(first.store_pid)

        second, started = local.ensure()  # the next command finds them gone and starts both
        assert started and second.pid != first.pid and second.cluster_id == first.cluster_id
        assert _stored(second.bootstrap_servers, "kept") == acked  # every record, at its offset
        more = _produce(second.bootstrap_servers, "kept", range(600, 700))
        assert {p for p, _o, _v in more} and all((p, o) not in {(a, b) for a, b, _ in acked} for p, o, _v in more)
        assert _stored(second.bootstrap_servers, "kept") == acked | more

        stopped = local.stop()  # a clean stop keeps them too
        assert stopped == second and _gone(second.store_pid)
        third, _ = local.ensure()
        assert _stored(third.bootstrap_servers, "kept") == acked | more
        assert (tmp_path / TOPICS_DIR / CLUSTER_ID_FILE).read_text().strip() == third.cluster_id
    finally:
        local.stop()


def test_a_broker_whose_store_was_killed_is_restarted_with_it(tmp_path: Path) -> None:
    """Half a durable pair is no broker: a broker that lost its store cannot write."""
    local = LocalBroker(tmp_path)
    try:
        first, _ = local.ensure()
        os.kill(first.store_pid, signal.SIGKILL)
        assert _gone(first.store_pid)
        second, started = local.ensure()
        assert started and second.store_pid != first.store_pid and _gone(first.pid)
    finally:
        local.stop()


def test_memory_topics_are_an_option_kept_by_nothing(tmp_path: Path) -> None:
    """``--memory``: the same broker and store pair over ``topics-memory`` (not tansu's memory
    engine, which loses batches), emptied at the next start and removed at the stop."""
    local = LocalBroker(tmp_path)
    try:
        record, started = local.ensure(memory=True)
        assert started and not record.durable and pid_running(record.store_pid)
        assert not (tmp_path / TOPICS_DIR).exists() and (tmp_path / MEMORY_TOPICS_DIR).is_dir()
        KafkaAdmin(record.bootstrap_servers).create_topic("kept_by_nothing", partitions=1)
        acked = _produce(record.bootstrap_servers, "kept_by_nothing", range(20))
        assert _stored(record.bootstrap_servers, "kept_by_nothing") == acked
        stopped = local.stop()
        assert stopped is not None and _gone(record.store_pid)
        assert not (tmp_path / MEMORY_TOPICS_DIR).exists()
        again, started = local.ensure(memory=True)
        assert started and again.cluster_id != record.cluster_id
        assert "kept_by_nothing" not in KafkaAdmin(again.bootstrap_servers).topics()
    finally:
        local.stop()


def test_a_private_broker_keeps_its_topics_in_a_store_it_removes(tmp_path: Path) -> None:
    """EPHEMERAL_STORAGE (the suite's broker): an object store over a temporary directory, stopped
    and removed with the broker; every acknowledged record is served."""
    broker = EmbeddedBroker(storage=EPHEMERAL_STORAGE).start()
    try:
        assert broker.storage == EPHEMERAL_STORAGE
        root, store = broker._store_root, broker._store
        assert root is not None and store is not None and (root / "tansu").is_dir()
        KafkaAdmin(broker.bootstrap_servers).create_topic("private", partitions=2)
        acked = _produce(broker.bootstrap_servers, "private", range(100))
        assert len(acked) == 100 and _stored(broker.bootstrap_servers, "private") == acked
        assert any(p.is_file() for p in root.rglob("*"))
    finally:
        broker.stop()
    assert _gone(store.pid) and not root.exists()


_OWNER = """
import sys, time
from streamsql.kafka.broker import EPHEMERAL_STORAGE, EmbeddedBroker
broker = EmbeddedBroker(die_with_parent=True, storage=EPHEMERAL_STORAGE).start()
print(broker._store_root, broker._store.pid, broker.pid, flush=True)
time.sleep(600)
"""


def test_a_private_brokers_store_goes_with_the_process_that_started_it(tmp_path: Path) -> None:
    """Its owner killed with no chance to clean up (kill -9 of a test run): the store notices,
    stops and removes its directory; the broker, started to die with its parent, is gone too."""
    import subprocess
    import sys

    owner = subprocess.Popen([sys.executable, "-c", _OWNER], stdout=subprocess.PIPE, text=True,
                             cwd=Path(__file__).resolve().parents[2])
    try:
        assert owner.stdout is not None
        root, store_pid, broker_pid = owner.stdout.readline().split()
        assert Path(root).is_dir() and pid_running(int(store_pid))
    finally:
        owner.kill()
        owner.wait()
    assert _gone(int(store_pid)) and _gone(int(broker_pid))
    assert not Path(root).exists()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[str]:
    server = ObjectStoreServer(FileObjectStore(tmp_path / "objects"), free_port())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _call(url: str, method: str, data: bytes | None = None, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_the_object_store_honours_conditional_puts_ranges_and_listing(store: str) -> None:
    assert _call(f"{store}/b", "PUT")[0] == 200
    assert _call(f"{store}/b/a/x.json", "PUT", b"one", {"If-None-Match": "*"})[0] == 200
    assert _call(f"{store}/b/a/x.json", "PUT", b"two", {"If-None-Match": "*"})[0] == 412  # exists
    assert _call(f"{store}/b/a/x.json", "PUT", b"two", {"If-Match": '"stale"'})[0] == 412
    etag = urllib.request.urlopen(urllib.request.Request(f"{store}/b/a/x.json", method="HEAD"),
                                  timeout=30).headers["ETag"]
    assert _call(f"{store}/b/a/x.json", "PUT", b"two", {"If-Match": etag})[0] == 200
    assert _call(f"{store}/b/a/x.json", "GET") == (200, b"two")
    assert _call(f"{store}/b/a/x.json", "GET", headers={"Range": "bytes=1-"}) == (206, b"wo")
    assert _call(f"{store}/b/a/y/z", "PUT", b"3")[0] == 200
    status, listing = _call(f"{store}/b?list-type=2&prefix=a/&delimiter=/", "GET")
    assert status == 200 and b"<Key>a/x.json</Key>" in listing and b"<Prefix>a/y/</Prefix>" in listing
    assert _call(f"{store}/b/a/../../escape", "PUT", b"no")[0] == 400  # never outside its bucket
    assert _call(f"{store}/b/a/x.json", "DELETE")[0] == 204
    assert _call(f"{store}/b/a/x.json", "GET")[0] == 404


def test_listing_a_prefix_walks_only_the_directory_it_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """tansu lists a partition's records on its fetches: a listing that walked the whole bucket
    slowed every fetch with every batch of every topic (a local broker with a few hundred small
    topics stopped answering fetches within 15 s)."""
    import os

    store = FileObjectStore(tmp_path)
    bucket = tmp_path / "b"
    for key in ("t1/p0/r/01.batch", "t1/p0/r/02.batch", "t1/p0/w.json", "t1/p1/r/01.batch", "t2/p0/r/01.batch"):
        store.write(bucket.joinpath(*key.split("/")), b"x")
    walked: list[str] = []
    real_walk = os.walk

    def recording_walk(top, *args, **kwargs):  # type: ignore[no-untyped-def]
        for dirpath, dirs, files in real_walk(top, *args, **kwargs):
            walked.append(Path(dirpath).relative_to(bucket).as_posix())
            yield dirpath, dirs, files

    monkeypatch.setattr(os, "walk", recording_walk)
    assert store.keys(bucket, "t1/p0/r/") == ["t1/p0/r/01.batch", "t1/p0/r/02.batch"]
    assert walked == ["t1/p0/r"]
    assert store.keys(bucket, "t1/p0/r/0") == ["t1/p0/r/01.batch", "t1/p0/r/02.batch"]  # a partial name
    assert store.keys(bucket, "t1/p") == ["t1/p0/r/01.batch", "t1/p0/r/02.batch", "t1/p0/w.json", "t1/p1/r/01.batch"]
    assert store.keys(bucket, "t9/") == [] and store.keys(bucket, "t1/../") == []
    assert len(store.keys(bucket, "")) == 5
