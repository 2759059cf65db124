"""The scale-out benchmark's parts that need neither root nor a cluster: the simulated machines'
layout (names, addresses, CPU quotas), the commands that make and join them, the cleanup's
order and resilience, the steady rate, the scaled workloads and the Must-show assessment (the
benchmark run itself, as root, is the integration test: benchmarks/README.md)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from benchmarks import cluster
from benchmarks.scaleout import assess, cpu_between, input_records, run_configs, scaled, steady_rate
from benchmarks.workloads import WORKLOADS, W4Final
from streamsql import samples
from streamsql.kafka.broker import EmbeddedBroker
from streamsql.sql import parse


def test_plan_gives_each_worker_its_own_host_address_and_cpu_quota() -> None:
    p = cluster.plan(4, 0.3, cores=2)
    hosts = p.hosts()
    assert [h.index for h in hosts] == [1, 2, 3, 4]
    assert len({h.netns for h in hosts}) == len({h.address for h in hosts}) == len({h.cgroup for h in hosts}) == 4
    assert all(h.quota_us == 30_000 for h in hosts)  # 0.3 of a 100 ms period
    assert p.host_address == "10.231.0.1" and all(h.address.startswith("10.231.0.") for h in hosts)
    assert p.host_address not in {h.address for h in hosts}
    # Linux caps interface names at 15 characters
    assert all(len(h.veth_host) <= 15 and len(h.veth_ns) <= 15 for h in hosts) and len(cluster.BRIDGE) <= 15
    assert all(n.startswith(cluster.PREFIX) for h in hosts for n in (h.netns, h.veth_host, h.veth_ns))
    assert p.capped_cores == 1.2 and p.cores_left == 0.8


def test_an_uncapped_plan_has_no_quota() -> None:
    p = cluster.plan(1, None, cores=2)
    assert p.hosts()[0].quota_us == -1
    assert p.capped_cores is None and p.cores_left is None
    assert cluster.quota_us(0.001) == cluster.MIN_QUOTA_US  # the kernel's floor


@pytest.mark.parametrize(("workers", "cap", "names"), [
    (0, 0.3, "workers must be 1..200"),
    (4, 1.5, "fraction of one core"),
    (4, 0.0, "fraction of one core"),
    (4, 0.5, "need 2 cores; this machine has 2"),
])
def test_plan_refuses_what_cannot_be_measured(workers: int, cap: float, names: str) -> None:
    with pytest.raises(ValueError, match=names):
        cluster.plan(workers, cap, cores=2)


def test_run_configs_start_with_the_uncapped_baseline_and_check_every_plan() -> None:
    configs = run_configs([1, 2, 4], 0.3, cores=2)
    assert [(c.label, c.workers, c.cap) for c in configs] == [
        ("uncapped-1", 1, None), ("1x0.3", 1, 0.3), ("2x0.3", 2, 0.3), ("4x0.3", 4, 0.3)]
    with pytest.raises(ValueError, match="need 2.4 cores"):
        run_configs([1, 8], 0.3, cores=2)


def test_host_commands_join_the_bridge_and_route_through_it() -> None:
    h = cluster.plan(2, 0.3, cores=2).hosts()[1]
    cmds = [" ".join(c) for c in cluster.host_setup(h, "10.231.0.1")]
    assert cmds[0] == f"ip netns add {h.netns}"
    assert f"ip link set {h.veth_ns} netns {h.netns}" in cmds
    assert f"ip link set {h.veth_host} master {cluster.BRIDGE}" in cmds
    assert f"ip -n {h.netns} addr add {h.address}/24 dev {h.veth_ns}" in cmds
    assert cmds[-1] == f"ip -n {h.netns} route add default via 10.231.0.1"
    assert [" ".join(c) for c in cluster.bridge_setup()][1] == f"ip addr add 10.231.0.1/24 dev {cluster.BRIDGE}"
    assert [c[-1] for c in cluster.host_teardown(h)] == [h.veth_host, h.netns]


def test_a_worker_joins_its_cgroups_before_entering_its_namespace(tmp_path: Path) -> None:
    """``ip netns exec`` mounts its own sysfs (without the cgroup file systems): the shell must
    join the groups first, then exec into the namespace and the JVM in the same process."""
    h = cluster.plan(1, 0.3, cores=2).hosts()[0]
    cmd = cluster.worker_command(h, Path("/spark/bin/spark-class"), "spark://10.231.0.1:7077", tmp_path, "1g",
                                 cgroup_root=tmp_path)
    assert cmd[:2] == ["sh", "-c"]
    script = cmd[2]
    for hierarchy in ("cpu", "cpuacct"):
        assert f"echo $$ > {tmp_path / hierarchy / h.cgroup / 'cgroup.procs'}" in script
    assert script.endswith('exec "$@"')
    rest = cmd[4:]
    assert rest[:4] == ["ip", "netns", "exec", h.netns]
    assert rest[4:7] == ["/spark/bin/spark-class", "org.apache.spark.deploy.worker.Worker", "spark://10.231.0.1:7077"]
    assert rest[rest.index("--host") + 1] == h.address and rest[rest.index("--cores") + 1] == "1"


def test_cpu_caps_write_period_and_quota_and_undo_in_reverse(tmp_path: Path) -> None:
    for hierarchy in cluster.HIERARCHIES:
        (tmp_path / hierarchy).mkdir()
    caps = cluster.CpuCaps(tmp_path)
    undo = cluster.Cleanup()
    hosts = cluster.plan(2, 0.25, cores=2).hosts()
    for h in hosts:
        caps.create(h, undo)
    cpu = tmp_path / "cpu" / hosts[1].cgroup
    assert (cpu / "cpu.cfs_quota_us").read_text() == "25000\n" and (cpu / "cpu.cfs_period_us").read_text() == "100000\n"
    assert (tmp_path / "cpuacct" / hosts[1].cgroup).is_dir()
    # a group (and its parent, once) per hierarchy: 2 parents + 2 × 2 groups
    assert len(undo) == 6
    for h in hosts:  # what the kernel provides in a real group
        (tmp_path / "cpu" / h.cgroup / "cpu.stat").write_text("nr_periods 10\nnr_throttled 4\nthrottled_time 99\n")
        (tmp_path / "cpuacct" / h.cgroup / "cpuacct.usage").write_text("2500000000\n")
    assert caps.throttling(hosts[0]) == {"nr_periods": 10, "nr_throttled": 4, "throttled_time": 99}
    assert caps.cpu_seconds(hosts[0]) == 2.5


def test_cleanup_runs_every_step_once_last_first_even_after_a_failure() -> None:
    done: list[str] = []
    c = cluster.Cleanup()
    c.push("bridge", lambda: done.append("bridge"))
    c.push("netns", lambda: (_ for _ in ()).throw(RuntimeError("busy")))
    c.push("cgroup", lambda: (_ for _ in ()).throw(KeyboardInterrupt()))  # a second Ctrl-C
    c.push("worker", lambda: done.append("worker"))
    errors = c.run()
    assert done == ["worker", "bridge"]
    assert errors == ["cgroup: KeyboardInterrupt: ", "netns: RuntimeError: busy"]
    assert c.run() == [] and done == ["worker", "bridge"]  # nothing runs twice


def test_remove_cgroup_kills_what_is_left_and_removes_children_first(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """On a real cgroup file system ``cgroup.procs`` lists the members and ``rmdir`` removes a
    group with its files; here plain directories stand in, and kill/rmdir are recorded."""
    parent = tmp_path / "streamsql-scaleout"
    (parent / "w1").mkdir(parents=True)
    (parent / "w1" / "cgroup.procs").write_text("4242\n")
    killed: list[int] = []
    removed: list[str] = []

    def kill(pid: int, sig: int) -> None:
        assert sig == signal.SIGKILL
        killed.append(pid)
        (parent / "w1" / "cgroup.procs").write_text("")  # the kernel empties the group

    monkeypatch.setattr(cluster.os, "kill", kill)
    monkeypatch.setattr(Path, "rmdir", lambda self: removed.append(self.name))
    cluster.remove_cgroup(parent)
    assert killed == [4242]
    assert removed == ["w1", "streamsql-scaleout"]


def test_a_sigterm_raises_so_cleanup_runs_and_the_handler_is_restored() -> None:
    before = signal.getsignal(signal.SIGTERM)
    cleaned = []
    with pytest.raises(KeyboardInterrupt, match="signal 15"):
        with cluster.interrupts_raise():
            try:
                os.kill(os.getpid(), signal.SIGTERM)  # the handler runs at the next bytecode
                cleaned.append(False)
            finally:
                cleaned.append(True)
    assert cleaned == [True]
    assert signal.getsignal(signal.SIGTERM) == before


def test_steady_rate_leaves_out_the_warm_up_and_counts_the_gaps_between_batches() -> None:
    # (batch id, start s, duration s, rows read); batch 0 read nothing, batch 1 is the warm-up
    timeline = [[0, 0.5, 0.2, 0], [1, 1.0, 9.0, 1000], [2, 10.5, 1.0, 500], [3, 12.0, 1.0, 500], [4, 13.5, 0.1, 0]]
    s = steady_rate(timeline, warmup_batches=1)
    assert s == {"batches": 2, "warmup_batches": 1, "rows": 1000, "start_s": 10.5, "seconds": 2.5,
                 "records_per_s": 400.0}
    # W4: the output query reads quotes; 20 quotes a message → messages/s
    assert steady_rate(timeline, 1, records_per_row=0.05)["records_per_s"] == 20.0
    assert steady_rate(timeline, 3)["records_per_s"] is None


def test_the_workers_cpu_in_a_window_is_interpolated_between_samples() -> None:
    samples = [(100.0, 5.0), (101.0, 6.0), (102.0, 8.0), (103.0, 8.5)]
    assert cpu_between(samples, 100.5, 102.5) == pytest.approx(2.75)  # 5.5 → 8.25
    assert cpu_between(samples, 101.0, 101.0) == 0.0
    assert cpu_between(samples, 99.0, 102.0) is None  # before the first sample: unknown, not 0
    assert cpu_between([], 1.0, 2.0) is None


def test_scaled_w4_reads_its_input_over_the_partitions_and_knows_each_batch_uuid() -> None:
    w = scaled(WORKLOADS["W4"], 4)
    assert w.partitions == 4
    sql = w.sql("in_t", "out_t")
    assert "PARTITIONS = 4" in sql and "PARTITIONS = 1" not in sql
    assert len(parse(sql)) >= 4
    final = w.final()  # type: ignore[misc]
    records = list(w.generate(9, w.seed))
    for key, value, ts in records:
        final.add(key, value, ts)
    # round robin: the 6th message (n = 5) sits at partition 1, offset 1
    key, value, ts = records[5]
    batch = samples.enrich_flight_batch(value, 1, 1, ts)[0].split(",")[6]
    assert batch in final.result()
    assert batch not in W4Final()._state  # a one-partition reference would name another uuid
    assert scaled(WORKLOADS["W3"], 4).partitions == 4 and scaled(WORKLOADS["W3"], 4).sql is WORKLOADS["W3"].sql
    assert input_records(WORKLOADS["W4"], 400_000) == 20_000 and input_records(WORKLOADS["W5"], 400_000) == 400_000


def _run(wl: str, config: str, workers: int, cap: float | None, rate: float, **extra: object) -> dict[str, object]:
    return {"workload": wl, "config": config, "workers": workers, "cap": cap, "steady_records_per_s": rate,
            "exact": True, "driver_cores_busy": 0.3, "broker_cores_busy": 0.1, "master_cores_busy": 0.01,
            "outside_caps_cores_busy": 0.41, **extra}


def test_assess_names_each_must_show_line() -> None:
    runs = [_run("W3", "uncapped-1", 1, None, 10_000, steady_worker_cores_busy=1.25, worker_cores_busy=0.9),
            _run("W3", "1x0.3", 1, 0.3, 2_000), _run("W3", "2x0.3", 2, 0.3, 3_900),
            _run("W3", "4x0.3", 4, 0.3, 6_000, exact=False)]
    checks = {c["check"]: c for c in assess(runs, 0.3, cores=2)}
    assert checks["W3: exact output in every run"]["ok"] is False
    assert "4x0.3" in checks["W3: exact output in every run"]["detail"]
    assert checks["W3: 2 workers >= 1.8x one"]["ok"] is True
    assert checks["W3: 4 workers >= 3.2x one"]["ok"] is False
    assert "3.00x" in checks["W3: 4 workers >= 3.2x one"]["detail"]
    # 10,000/s at 1.25 cores busy = 8,000/core; × 0.3 × 0.8 = 1,920 ≤ 2,000
    base = checks["W3: one capped worker >= 0.8 x uncapped per-core rate x cap"]
    assert base["ok"] is True and "1,920" in base["detail"]
    fit = checks["4 workers' caps + driver, broker and master fit in 2 cores"]
    assert fit["ok"] is True and "1.2 + 0.41" in fit["detail"]
    missing = assess([_run("W5", "1x0.3", 1, 0.3, 2_000)], 0.3, cores=2)
    assert {c["ok"] for c in missing if "workers >=" in c["check"]} == {None}
    json.dumps(checks)  # the JSON result holds them


def test_an_embedded_broker_may_listen_on_another_address() -> None:
    assert EmbeddedBroker(port=19092).bootstrap_servers == "127.0.0.1:19092"
    assert EmbeddedBroker(port=19092, host="10.231.0.1").bootstrap_servers == "10.231.0.1:19092"
