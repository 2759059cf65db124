"""A real ``streamsql server`` subprocess: what the HTTP tests and the RQTT runner talk to, so the
REST surface is always exercised through the real listener, never in-process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from streamsql.kafka.broker import free_port

REPO = Path(__file__).resolve().parents[2]  # so the child imports this checkout


class ServerProcess:
    def __init__(self, bootstrap: str, data_dir: Path, extra: list[str] | None = None,
                 service_id: str | None = None, scheme: str = "http",
                 properties: dict[str, str] | None = None) -> None:
        self.bootstrap = bootstrap
        self.properties = dict(properties or {})
        self.data_dir = data_dir
        self.extra = list(extra or [])
        self.service_id = service_id
        self.scheme = scheme
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir.parent / f"server-{self.port}.log"

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 240, auth: tuple[str, str] | None = None) -> ServerProcess:
        """Started as a user would, ``--host`` left at its default (127.0.0.1)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = [sys.executable, "-m", "streamsql", "server", "--port", str(self.port),
                "--bootstrap-servers", self.bootstrap, "--data-dir", str(self.data_dir), *self.extra]
        config = dict(self.properties)
        if self.service_id:
            config["ksql.service.id"] = self.service_id
        if config:
            props = self.data_dir.parent / f"server-{self.service_id or self.port}.properties"
            props.write_text("".join(f"{k}={v}\n" for k, v in config.items()))
            args += ["--config", str(props)]
        env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=str(self.data_dir.parent))
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.log_path.read_text()[-3000:]}")
            try:
                resp = httpx.get(self.url + "/info", auth=auth, verify=False, timeout=2)
                if resp.status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"server not ready after {timeout_s}s:\n{self.log_path.read_text()[-3000:]}")

    def kill(self) -> None:
        """SIGKILL: no shutdown hooks, as a crash."""
        import psutil  # the test extra; the runner only kills when asked

        if self.proc is None or self.proc.poll() is not None:
            return
        children = psutil.Process(self.proc.pid).children(recursive=True)
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        # Spark's JVM (our child) exits when its parent's pipe closes; make sure it is gone
        # before a restarted server opens the same checkpoints
        _, alive = psutil.wait_procs(children, timeout=20)
        for child in alive:
            child.kill()
        psutil.wait_procs(alive, timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
