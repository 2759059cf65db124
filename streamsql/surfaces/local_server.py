"""The local server of a data directory: what ``streamsql shell`` (given no URL) talks to.

ksqlDB's CLI attaches to a long-lived server in a second; an engine in the shell's own process
took 15-20 s to its prompt (a JVM), lost its persistent queries when the shell ended, and held
the data directory so no other command could watch them. So the shell starts ``streamsql
server`` for its data directory in the background — as commands start the local broker
(``kafka/broker.LocalBroker``) — and talks to it over the REST API; the next shell (or ``streamsql
run`` of a file) finds it and reuses it, and the queries it runs outlive every shell.
``streamsql server status|stop`` show and end it.

The server listens on 127.0.0.1 only, and requires HTTP basic auth with a credential made at
random the first time and kept in ``<data dir>/server.credentials``, readable by its owner alone
(mode 0600; the same file is the server's ``--auth-file``): other users of the machine can reach
a loopback port, and the REST API runs whatever it is sent. Its address and pid are recorded in
``<data dir>/server.json``; it writes its log to ``<data dir>/server.log``.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from streamsql import background
from streamsql.errors import StreamsqlError

RECORD_FILE = "server.json"
CREDENTIALS_FILE = "server.credentials"
LOG_FILE = "server.log"
#: the user of the local credential (an admin: it is the owner's own server)
USER = "local"
#: how long a start may take before the shell gives up on it (a JVM, then every persistent
#: query restarted from its checkpoint)
START_TIMEOUT_S = 300.0
#: how long ``stop`` waits for the server to stop its queries cleanly before it kills it
STOP_GRACE_S = 60.0


class LocalServerError(StreamsqlError):
    pass


@dataclass(frozen=True)
class ServerRecord:
    """What ``<data dir>/server.json`` says about the data directory's local server."""

    pid: int
    port: int
    started_at: float
    #: the engine flags it was started with (``--bootstrap-servers``, ``--conf`` ...)
    engine_args: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


class LocalServer:
    """The local server of one data directory: found through its record, started in the
    background when none runs, stopped on request. Every operation holds a lock file in the data
    directory, so two shells starting at once share one server."""

    def __init__(self, data_dir: str | Path) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.record_file = background.RecordFile(self.data_dir, RECORD_FILE.removesuffix(".json"))
        self.record_path = self.record_file.path
        self.credentials_path = self.data_dir / CREDENTIALS_FILE
        self.log_path = self.data_dir / LOG_FILE

    # --- the credential -----------------------------------------------------------------------

    def credentials(self) -> tuple[str, str]:
        """The user and password clients log in with, made (mode 0600) the first time. A file
        others can read is refused: anyone who reads it can run statements on the server."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(self.credentials_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(f"# the local server's credential (streamsql shell reads it); mode 0600\n"
                        f"{USER}: {secrets.token_urlsafe(24)},admin\n")
        mode = self.credentials_path.stat().st_mode & 0o777
        if mode & 0o077:
            raise LocalServerError(f"{self.credentials_path} may be read by other users (mode {mode:o}); "
                                   f"`chmod 600 {self.credentials_path}` or delete it (a new one is made)")
        from streamsql.server.authorization import load_users

        account = load_users(str(self.credentials_path)).get(USER)
        if account is None:
            raise LocalServerError(f"{self.credentials_path} names no user '{USER}'; delete it (a new one is made)")
        return USER, account.password

    # --- the record ---------------------------------------------------------------------------

    def _read(self) -> ServerRecord | None:
        fields = self.record_file.read()
        if fields is None:
            return None
        try:
            return ServerRecord(**fields)
        except TypeError:
            return None

    def _live(self) -> ServerRecord | None:
        """The recorded server if its process still runs (its command line names this
        directory's credential file); a record of one that is gone is removed."""
        record = self._read()
        if record is None or not background.is_process(record.pid, str(self.credentials_path)):
            self.record_file.remove()
            return None
        return record

    def find(self) -> ServerRecord | None:
        """The data directory's running local server, or None."""
        with self.record_file.locked():
            return self._live()

    # --- start, stop --------------------------------------------------------------------------

    def ensure(self, engine_args: list[str], port: int | None = None,
               notify: bool = True) -> tuple[ServerRecord, bool]:
        """The running local server, started in the background (and waited for until it answers)
        when none runs; the flag says whether this call started it."""
        with self.record_file.locked():
            record = self._live()
            if record is not None:
                return record, False
            self.credentials()
            from streamsql.kafka.broker import free_port

            port = port or free_port()
            cmd = [sys.executable, "-m", "streamsql", "server", "--host", "127.0.0.1", "--port", str(port),
                   "--auth-file", str(self.credentials_path), "--data-dir", str(self.data_dir), *engine_args]
            with open(self.log_path, "ab") as log:
                proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
            record = ServerRecord(proc.pid, port, time.time(), list(engine_args))
            self.record_file.write(asdict(record))
            if notify:
                print(f"streamsql: starting the local server of {self.data_dir} in the background (pid {proc.pid}, "
                      f"log {self.log_path}); it keeps running, with its queries, until `streamsql server stop`",
                      file=sys.stderr, flush=True)
            try:
                self._wait_ready(record, proc)
            except BaseException:
                background.terminate(proc.pid, 5.0)
                self.record_file.remove()
                raise
            return record, True

    def _wait_ready(self, record: ServerRecord, proc: subprocess.Popen[bytes]) -> None:
        from streamsql.client import KsqlClient, RemoteError

        user, password = self.credentials()
        client = KsqlClient(record.url, timeout=10, user=user, password=password)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise LocalServerError(f"the local server exited at start (code {proc.returncode}); its log "
                                       f"{self.log_path} ends:\n{_tail(self.log_path)}")
            try:
                client.info()
                return
            except RemoteError as e:
                if "failed to start" in str(e):
                    raise LocalServerError(f"the local server could not start: {e}") from None
            if time.monotonic() > deadline:
                raise LocalServerError(f"the local server did not answer within {START_TIMEOUT_S:.0f} s; see "
                                       f"{self.log_path}")
            time.sleep(0.2)

    def stop(self, grace_s: float = STOP_GRACE_S) -> ServerRecord | None:
        """Stop the running local server: SIGTERM (it stops its queries and its engine), then
        SIGKILL after ``grace_s``. Returns what was stopped, or None if nothing ran."""
        with self.record_file.locked():
            record = self._live()
            if record is None:
                return None
            background.terminate(record.pid, grace_s)
            self.record_file.remove()
            return record

    def client(self, record: ServerRecord) -> tuple[str, str, str]:
        """URL, user and password to reach ``record``'s server."""
        user, password = self.credentials()
        return record.url, user, password


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def engine_args(args: object) -> list[str]:
    """The engine flags of a command's arguments, as ``streamsql server`` takes them (what the
    shell starts the local server with)."""
    out: list[str] = []
    for flag, attr in (("--bootstrap-servers", "bootstrap_servers"), ("--config", "config"),
                       ("--spark-master", "spark_master")):
        value = getattr(args, attr, None)
        if value:
            out += [flag, str(Path(value).resolve()) if attr == "config" else str(value)]
    for flag, attr in (("--conf", "conf"), ("--kafka-property", "kafka_property")):
        for value in getattr(args, attr, None) or []:
            out += [flag, value]
    if getattr(args, "spark_ui", False):
        out.append("--spark-ui")
    return out
