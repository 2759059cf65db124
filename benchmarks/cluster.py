"""Simulated machines for the scale-out benchmark (``python -m benchmarks.scaleout``).

A Spark standalone master and N workers start from the pyspark wheel (``$SPARK_HOME/bin/spark-class``,
SPARK_HOME being the pyspark package directory). Each worker stands on its own network host and
its own CPU budget, so adding a worker adds a (small) machine rather than a thread:

* **network**: a network namespace per worker, joined to this machine by a veth pair whose host end
  sits on one bridge (:func:`make_lan`) (private addresses of :data:`SUBNET`, on this machine only). The master, the
  driver and the broker listen on the bridge's address; workers reach them, and each other (the
  shuffle), through the bridge as hosts on one LAN do.
* **CPU**: a cgroup v1 ``cpu`` group per worker with ``cpu.cfs_quota_us`` a fraction of
  ``cpu.cfs_period_us``. The worker's JVM is put in its group before it starts; its executors and
  their Python workers are its children and inherit the group. The driver, the broker and the
  master stay outside the caps.

Needs root (``ip netns``, writing ``/sys/fs/cgroup/cpu``). Everything made is undone by
:class:`Cleanup` in the reverse order, also when a step fails half-way or the run is interrupted;
``python -m benchmarks.scaleout --cleanup`` removes what a killed run left (the names all start
with :data:`PREFIX`). The plan (names, addresses, quotas) is computed without side effects
(:func:`plan`), so it can be checked without root.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

#: the simulated LAN: a /24 of RFC 1918 space, on this machine's bridge only
SUBNET = "10.231.0"
#: the bridge's address: master, driver and broker listen here
HOST_ADDRESS = f"{SUBNET}.1"
#: every namespace, link and cgroup made here starts with it (``--cleanup`` finds them by it)
PREFIX = "sqs"
BRIDGE = f"{PREFIX}br0"
#: cgroup v1: the ``cpu`` hierarchy caps a worker, the ``cpuacct`` one counts its CPU (every process,
#: the short-lived ones too)
CGROUP_ROOT = Path("/sys/fs/cgroup")
HIERARCHIES = ("cpu", "cpuacct")
CGROUP_GROUP = "streamsql-scaleout"
PERIOD_US = 100_000
#: the kernel's smallest CFS quota
MIN_QUOTA_US = 1_000
MAX_WORKERS = 200


@dataclass(frozen=True)
class WorkerHost:
    """One simulated machine: its namespace, the veth pair's two ends, its address and its cgroup."""

    index: int
    netns: str
    veth_host: str
    veth_ns: str
    address: str
    cgroup: str
    #: ``cpu.cfs_quota_us``; -1 = no cap
    quota_us: int


@dataclass(frozen=True)
class ClusterPlan:
    workers: int
    #: the CPU each worker may use, in cores (None: uncapped)
    cap: float | None
    #: the machine's cores
    cores: int

    @property
    def host_address(self) -> str:
        return HOST_ADDRESS

    @property
    def capped_cores(self) -> float | None:
        return None if self.cap is None else round(self.workers * self.cap, 3)

    @property
    def cores_left(self) -> float | None:
        """What the caps leave to the driver, the broker and the master."""
        return None if self.cap is None else round(self.cores - self.workers * self.cap, 3)

    def hosts(self) -> list[WorkerHost]:
        return [WorkerHost(index=i, netns=f"{PREFIX}-w{i}", veth_host=f"{PREFIX}w{i}h", veth_ns=f"{PREFIX}w{i}n",
                           address=f"{SUBNET}.{10 + i}", cgroup=f"{CGROUP_GROUP}/w{i}", quota_us=quota_us(self.cap))
                for i in range(1, self.workers + 1)]


def quota_us(cap: float | None) -> int:
    """``cpu.cfs_quota_us`` for ``cap`` cores per :data:`PERIOD_US` (-1: no cap)."""
    if cap is None:
        return -1
    return max(MIN_QUOTA_US, round(cap * PERIOD_US))


def plan(workers: int, cap: float | None, cores: int) -> ClusterPlan:
    """The cluster's layout, checked: a worker count the subnet holds, a cap in (0, 1], and caps
    that leave the driver and broker some of the machine (else a capped run measures the caps'
    contention, not scale-out)."""
    if not 1 <= workers <= MAX_WORKERS:
        raise ValueError(f"workers must be 1..{MAX_WORKERS}, not {workers}")
    if cap is not None:
        if not 0 < cap <= 1:
            raise ValueError(f"a worker's CPU cap is a fraction of one core in (0, 1], not {cap}")
        if workers * cap >= cores:
            raise ValueError(f"{workers} workers capped at {cap} core each need {workers * cap:g} cores; this "
                             f"machine has {cores}, and the driver and broker need some of them")
    return ClusterPlan(workers, cap, cores)


# --- commands (pure: what setup and teardown run) ----------------------------------------------------

def bridge_setup() -> list[list[str]]:
    return [["ip", "link", "add", BRIDGE, "type", "bridge"],
            ["ip", "addr", "add", f"{HOST_ADDRESS}/24", "dev", BRIDGE],
            ["ip", "link", "set", BRIDGE, "up"]]


def make_lan(cleanup: Cleanup) -> str:
    """The bridge the worker hosts join (made once per run: the broker listens on it throughout);
    its address."""
    run(bridge_setup()[0])
    cleanup.push(f"bridge {BRIDGE}", lambda: _delete_link(BRIDGE))
    for cmd in bridge_setup()[1:]:
        run(cmd)
    return HOST_ADDRESS


def host_setup(h: WorkerHost, gateway: str) -> list[list[str]]:
    """A worker's network host: its namespace, the veth pair (host end on the bridge), its address,
    loopback, and a default route through the bridge's address."""
    return [["ip", "netns", "add", h.netns],
            ["ip", "link", "add", h.veth_host, "type", "veth", "peer", "name", h.veth_ns],
            ["ip", "link", "set", h.veth_ns, "netns", h.netns],
            ["ip", "link", "set", h.veth_host, "master", BRIDGE],
            ["ip", "link", "set", h.veth_host, "up"],
            ["ip", "-n", h.netns, "addr", "add", f"{h.address}/24", "dev", h.veth_ns],
            ["ip", "-n", h.netns, "link", "set", h.veth_ns, "up"],
            ["ip", "-n", h.netns, "link", "set", "lo", "up"],
            ["ip", "-n", h.netns, "route", "add", "default", "via", gateway]]


def host_teardown(h: WorkerHost) -> list[list[str]]:
    """Deleting the namespace deletes its veth end, and with it the pair."""
    return [["ip", "link", "del", h.veth_host], ["ip", "netns", "del", h.netns]]


def worker_command(h: WorkerHost, spark_class: Path, master_url: str, work_dir: Path, memory: str,
                   cgroup_root: Path = CGROUP_ROOT) -> list[str]:
    """The worker's JVM: a shell puts itself in the worker's cgroups, then becomes ``ip netns exec``
    and that the JVM (``exec`` keeps the process, so the JVM and its children are in the groups).
    The groups are joined first: ``ip netns exec`` mounts a sysfs of its own, without the cgroup
    file systems."""
    join = " && ".join(f"echo $$ > {cgroup_root / hierarchy / h.cgroup / 'cgroup.procs'}" for hierarchy in HIERARCHIES)
    return ["sh", "-c", f'{join} && exec "$@"', "worker", "ip", "netns", "exec", h.netns,
            str(spark_class), "org.apache.spark.deploy.worker.Worker", master_url, "--host", h.address,
            "--cores", "1", "--memory", memory, "--webui-port", "0", "--work-dir", str(work_dir)]


def run(cmd: list[str]) -> None:
    """A setup or teardown command; a failure names the command and what it printed."""
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        said = done.stderr.strip() or done.stdout.strip()
        raise RuntimeError(f"`{' '.join(cmd)}` failed ({done.returncode}): {said}")


# --- cleanup ---------------------------------------------------------------------------------------------

class Cleanup:
    """Undo steps, run last-in first-out, each once, every one even when another fails or a
    second Ctrl-C arrives (their errors are collected and returned). Push an undo step right after
    the thing it undoes exists."""

    def __init__(self) -> None:
        self._steps: list[tuple[str, Callable[[], None]]] = []

    def push(self, what: str, undo: Callable[[], None]) -> None:
        self._steps.append((what, undo))

    def __len__(self) -> int:
        return len(self._steps)

    def run(self) -> list[str]:
        errors = []
        while self._steps:
            what, undo = self._steps.pop()
            try:
                undo()
            except BaseException as e:  # noqa: BLE001 - the other steps still run, a second Ctrl-C too
                errors.append(f"{what}: {type(e).__name__}: {e}")
        return errors


@contextmanager
def interrupts_raise() -> Iterator[None]:
    """SIGTERM and SIGHUP raise as Ctrl-C does (KeyboardInterrupt), so ``finally`` blocks, and
    with them :class:`Cleanup`, run however the run is stopped."""

    def handler(signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    saved = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in saved.items():
            signal.signal(s, h)


# --- CPU caps ---------------------------------------------------------------------------------------------

class CpuCaps:
    """The workers' cgroups: ``<root>/cpu/CGROUP_GROUP/wN`` (the cap) and
    ``<root>/cpuacct/CGROUP_GROUP/wN`` (the count)."""

    def __init__(self, cgroup_root: Path = CGROUP_ROOT) -> None:
        self.root = cgroup_root

    def create(self, h: WorkerHost, cleanup: Cleanup) -> None:
        for hierarchy in HIERARCHIES:
            parent = self.root / hierarchy / CGROUP_GROUP
            if not parent.exists():
                parent.mkdir()
                cleanup.push(f"cgroup {parent}", lambda g=parent: remove_cgroup(g))  # type: ignore[misc]
            group = self.root / hierarchy / h.cgroup
            group.mkdir()
            cleanup.push(f"cgroup {group}", lambda g=group: remove_cgroup(g))  # type: ignore[misc]
        cpu = self.root / "cpu" / h.cgroup
        (cpu / "cpu.cfs_period_us").write_text(f"{PERIOD_US}\n")
        (cpu / "cpu.cfs_quota_us").write_text(f"{h.quota_us}\n")

    def throttling(self, h: WorkerHost) -> dict[str, int]:
        """``cpu.stat``: periods, throttled periods and throttled time (ns) of the worker's group."""
        text = (self.root / "cpu" / h.cgroup / "cpu.stat").read_text()
        return {k: int(v) for k, v in (line.split() for line in text.splitlines() if line.strip())}

    def cpu_seconds(self, h: WorkerHost) -> float:
        """The CPU the worker's processes (JVMs, Python workers) used since it started."""
        return int((self.root / "cpuacct" / h.cgroup / "cpuacct.usage").read_text()) / 1e9


def pids_in(group: Path) -> list[int]:
    procs = group / "cgroup.procs"
    return [int(p) for p in procs.read_text().split()] if procs.exists() else []


def remove_cgroup(group: Path, timeout_s: float = 20.0) -> None:
    """Kill what is left in the group (the benchmark put only its workers there), then remove it
    (a cgroup directory is removed with ``rmdir`` once it holds no process and no child group)."""
    if not group.exists():
        return
    for child in [c for c in group.iterdir() if c.is_dir()]:
        remove_cgroup(child, timeout_s)
    deadline = time.monotonic() + timeout_s
    while True:
        pids = pids_in(group)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes {pids} stay in {group}")
        time.sleep(0.1)
    group.rmdir()


# --- leftovers of a killed run ------------------------------------------------------------------------

def leftovers(cgroup_root: Path = CGROUP_ROOT) -> dict[str, list[str]]:
    """What an earlier run left: namespaces and links named with :data:`PREFIX`, and the cgroup."""
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return {"netns": sorted(n for n in re.findall(r"^(\S+)", netns, re.M) if n.startswith(f"{PREFIX}-")),
            "links": sorted(n for n in re.findall(r"^\d+:\s+([^:@\s]+)", links, re.M) if n.startswith(PREFIX)),
            "cgroups": [str(cgroup_root / h / CGROUP_GROUP) for h in HIERARCHIES
                        if (cgroup_root / h / CGROUP_GROUP).exists()]}


def remove_leftovers(found: dict[str, list[str]]) -> list[str]:
    """Remove what :func:`leftovers` found (processes in the cgroup are killed); the errors."""
    cleanup = Cleanup()
    for group in found.get("cgroups", []):
        cleanup.push(f"cgroup {group}", lambda g=Path(group): remove_cgroup(g))  # type: ignore[misc]
    for name in found.get("links", []):
        cleanup.push(f"link {name}", lambda n=name: _delete_link(n))  # type: ignore[misc]
    for name in found.get("netns", []):
        cleanup.push(f"netns {name}", lambda n=name: _delete_netns(n))  # type: ignore[misc]
    return cleanup.run()


def _delete_link(name: str) -> None:
    if subprocess.run(["ip", "link", "show", name], capture_output=True).returncode == 0:
        run(["ip", "link", "del", name])


def _delete_netns(name: str) -> None:
    """Processes still inside a namespace are killed first (only the benchmark's workers live there)."""
    pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
    run(["ip", "netns", "del", name])


# --- the cluster ---------------------------------------------------------------------------------------------

def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class SimulatedCluster:
    """N worker hosts with their caps on the bridge (:func:`make_lan`, made first), a master on the
    bridge's address and a worker JVM per host. ``start()`` makes it all; ``stop()`` undoes it
    (also what a failed start made)."""

    def __init__(self, p: ClusterPlan, root: Path, python: str, worker_memory: str = "1g",
                 cgroup_root: Path = CGROUP_ROOT, extra_env: dict[str, str] | None = None) -> None:
        import pyspark

        self.plan = p
        self.root = root
        self.python = python
        self.worker_memory = worker_memory
        self.caps = CpuCaps(cgroup_root)
        self.extra_env = dict(extra_env or {})
        self.spark_home = Path(pyspark.__file__).resolve().parent
        self.cleanup = Cleanup()
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.master_url = ""
        self.master_pid: int | None = None

    def _env(self, local_ip: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYSPARK_DRIVER_PYTHON", "STREAMSQL_SPARK_MASTER", "SPARK_HOME")}
        env.update(SPARK_HOME=str(self.spark_home), SPARK_LOCAL_IP=local_ip, PYSPARK_PYTHON=self.python,
                   PATH=f"{Path(self.python).parent}{os.pathsep}{env.get('PATH', '')}", **self.extra_env)
        return env

    def _spawn(self, name: str, cmd: list[str], env: dict[str, str]) -> Path:
        log = self.root / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                    cwd=self.root, start_new_session=True)
        self.procs[name] = proc
        self.cleanup.push(f"process {name} ({proc.pid})", lambda: stop_process_group(proc))
        return log

    def start(self, timeout_s: float = 180.0) -> SimulatedCluster:
        try:
            self._start(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, timeout_s: float) -> None:
        p = self.plan
        self.root.mkdir(parents=True, exist_ok=True)
        for h in p.hosts():
            for cmd in host_setup(h, p.host_address):
                run(cmd)
                if cmd[:3] == ["ip", "netns", "add"]:
                    self.cleanup.push(f"netns {h.netns}", lambda n=h.netns: _delete_netns(n))  # type: ignore[misc]
                elif cmd[:3] == ["ip", "link", "add"]:
                    self.cleanup.push(f"link {h.veth_host}", lambda n=h.veth_host: _delete_link(n))  # type: ignore[misc]
            self.caps.create(h, self.cleanup)
        spark_class = self.spark_home / "bin" / "spark-class"
        port = free_port(p.host_address)
        self.master_url = f"spark://{p.host_address}:{port}"
        started = time.monotonic()
        master_log = self._spawn("master", [str(spark_class), "org.apache.spark.deploy.master.Master", "--host",
                                            p.host_address, "--port", str(port), "--webui-port", "0"],
                                 self._env(p.host_address))
        self.master_pid = self.procs["master"].pid
        for h in p.hosts():
            work = self.root / f"worker{h.index}"
            work.mkdir(exist_ok=True)
            self._spawn(f"worker{h.index}", worker_command(h, spark_class, self.master_url, work, self.worker_memory,
                                                           self.caps.root), self._env(h.address))
        deadline = started + timeout_s
        while time.monotonic() < deadline:
            if master_log.read_text(errors="replace").count("Registering worker") >= p.workers:
                return
            dead = [name for name, proc in self.procs.items() if proc.poll() is not None]
            if dead:
                raise RuntimeError(f"cluster process {dead} exited at start:\n{self.logs()}")
            time.sleep(0.5)
        raise RuntimeError(f"{p.workers} workers did not register within {timeout_s:.0f}s:\n{self.logs()}")

    def usage(self) -> dict[str, dict[str, float]]:
        """Per worker: CPU seconds and ``cpu.stat`` (how often its cap held it back) so far."""
        return {h.netns: {"cpu_s": self.caps.cpu_seconds(h), **self.caps.throttling(h)} for h in self.plan.hosts()}

    def logs(self) -> str:
        return "\n".join(f"--- {log.name}\n{log.read_text(errors='replace')[-2500:]}"
                         for log in sorted(self.root.glob("*.log")))

    def stop(self) -> list[str]:
        """Undo everything :meth:`start` made, last first; the errors (each step still runs)."""
        return self.cleanup.run()


def stop_process_group(proc: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    """SIGTERM to the process's group (started with its own session), SIGKILL after ``grace_s``."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # what the leader left in its group
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)
