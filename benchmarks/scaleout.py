"""``python -m benchmarks.scaleout``: throughput against the number of Spark workers, each worker a
simulated machine (its own network namespace and a CPU cgroup capped at ``--cap`` of a core:
benchmarks/cluster.py), for W3, W4 and W5 of benchmarks/workloads.py. Needs root.

One embedded broker listens on the simulated LAN for the whole run; each workload's input is
produced into it once, over ``--partitions`` partitions (so four workers have a Kafka partition
each to read; W4's keyless batches round robin). Then, for each configuration — one **uncapped**
worker (the per-core baseline) and 1, 2 and 4 workers capped at ``--cap`` core each — a standalone
master and the workers start, each workload's SQL runs from a driver process on this machine,
outside the caps (``python -m benchmarks.scaleout driver …``: ``benchmarks/child.py``'s streamsql
run, pointed at the cluster), and the cluster stops. A run is done when its output is exact (the
expected count, or every expected key at its final value; counted again afterwards).

The **steady rate** is the output query's input over its micro-batches after the first
``--warmup-batches`` (wall clock from the first measured batch's start to the last one's end, the
gaps between batches included), each run's input cut into about ``--batches`` micro-batches
(``ksql.streams.max.records.per.batch``). W4's output query reads quotes: its rate is converted to
input messages (quotes ÷ quotes per message of the run). The driver's, broker's and master's CPU
are sampled (psutil, their process trees), the workers' read from their ``cpuacct`` groups.

Checked and printed as PASS/FAIL (issue #56): 2 and 4 capped workers ≥ 1.8× and ≥ 3.2× one; one
capped worker ≥ 0.8 × the uncapped per-core rate × the cap (per core: the uncapped steady rate ÷
the cores its worker kept busy in the same steady window); 4 workers' caps + what driver, broker
and master used fit in the machine's cores; exact outputs in every run. ``--json PATH`` writes
every figure, ``PATH.png`` the picture (throughput and speed-up against workers).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks import cluster
from benchmarks.measure import TreeSampler, loadavg
from benchmarks.workloads import WORKLOADS, W4Final, Workload

REPO = Path(__file__).resolve().parents[1]
DEFAULT_WORKLOADS = ("W3", "W4", "W5")
#: quotes per W4 message on average: W4's input is ``--records`` quotes' worth of messages
W4_QUOTES_PER_MESSAGE = 20
#: issue #56's lines: throughput of 2 and 4 capped workers over one
SPEEDUP_TARGETS = {2: 1.8, 4: 3.2}
#: one capped worker against the uncapped per-core rate × the cap
BASELINE_FLOOR = 0.8


@dataclass(frozen=True)
class RunConfig:
    label: str
    workers: int
    #: cores per worker; None = uncapped (the per-core baseline)
    cap: float | None


def run_configs(workers: list[int], cap: float, cores: int) -> list[RunConfig]:
    """The uncapped one-worker baseline, then each worker count capped; each plan is checked
    (:func:`cluster.plan`) before anything starts."""
    configs = [RunConfig("uncapped-1", 1, None)] + [RunConfig(f"{n}x{cap:g}", n, cap) for n in workers]
    for c in configs:
        cluster.plan(c.workers, c.cap, cores)
    return configs


def scaled(w: Workload, partitions: int) -> Workload:
    """``w`` over ``partitions`` input partitions. W4's seed SQL declares its input with one
    partition, and its reference derives each batch uuid from partition and offset: both follow."""
    if w.name != "W4":
        return replace(w, partitions=partitions)

    def sql(input_topic: str, output_topic: str) -> str:
        text, n = re.subn(r"PARTITIONS\s*=\s*1\b", f"PARTITIONS = {partitions}", w.sql(input_topic, output_topic))
        if n != 1:
            raise RuntimeError("queries/cheapest_flight.sql changed shape: its input's PARTITIONS = 1 not found once")
        return text

    return replace(w, partitions=partitions, sql=sql, final=partial(W4Final, partitions))


def input_records(w: Workload, records: int) -> int:
    """W4's input records are messages of ~20 quotes: ``records`` quotes' worth of them."""
    return max(1, records // W4_QUOTES_PER_MESSAGE) if w.name == "W4" else records


def steady_rate(timeline: list[list[float]], warmup_batches: int, records_per_row: float = 1.0) -> dict[str, Any]:
    """The rate over the micro-batches with data after the first ``warmup_batches``: their rows
    (× ``records_per_row``: input records per row the output query reads) over the wall clock from
    the first one's start to the last one's end. ``timeline`` rows are (batch id, start s,
    duration s, rows read), as ``benchmarks.child`` reports them."""
    batches = sorted((b for b in timeline if b[3] > 0), key=lambda b: b[0])
    measured = batches[warmup_batches:]
    if not measured:
        return {"batches": 0, "warmup_batches": len(batches), "records_per_s": None}
    start = measured[0][1]
    seconds = max(b[1] + b[2] for b in measured) - start
    rows = sum(b[3] for b in measured)
    return {"batches": len(measured), "warmup_batches": len(batches) - len(measured), "rows": rows,
            "start_s": start, "seconds": round(seconds, 3),
            "records_per_s": round(rows * records_per_row / seconds, 1) if seconds > 0 else None}


class CpuRecorder:
    """The workers' CPU seconds (their ``cpuacct`` groups, summed) every ``interval_s``, with the
    wall-clock time: what they used within a run's steady window (:func:`cpu_between`)."""

    def __init__(self, sim: cluster.SimulatedCluster, interval_s: float = 0.5) -> None:
        import threading

        self.sim = sim
        self.interval_s = interval_s
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="worker-cpu", daemon=True)

    def _sample(self) -> None:
        try:
            self.samples.append((time.time(), sum(u["cpu_s"] for u in self.sim.usage().values())))
        except OSError:  # a group going away at the end
            pass

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def start(self) -> CpuRecorder:
        self._sample()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._sample()


def cpu_between(samples: list[tuple[float, float]], start: float, end: float) -> float | None:
    """CPU seconds used between ``start`` and ``end`` from cumulative (time, CPU seconds) samples,
    interpolated linearly between the samples around each end; None outside the samples."""

    def at(t: float) -> float | None:
        for (t0, c0), (t1, c1) in zip(samples, samples[1:], strict=False):
            if t0 <= t <= t1:
                return c0 + (c1 - c0) * ((t - t0) / (t1 - t0) if t1 > t0 else 0.0)
        return None

    a, b = at(start), at(end)
    return None if a is None or b is None else b - a


def assess(runs: list[dict[str, Any]], cap: float, cores: int) -> list[dict[str, Any]]:
    """Issue #56's Must-show lines over the runs: each a dict with ``check``, ``ok`` (None when a
    figure is missing) and ``detail``."""
    out: list[dict[str, Any]] = []

    def line(check: str, ok: bool | None, detail: str) -> None:
        out.append({"check": check, "ok": ok, "detail": detail})

    by = {(r["workload"], r["config"]): r for r in runs}
    workloads = list(dict.fromkeys(r["workload"] for r in runs))
    for wl in workloads:
        mine = [r for r in runs if r["workload"] == wl]
        wrong = [r["config"] for r in mine if not r.get("exact")]
        line(f"{wl}: exact output in every run", not wrong, f"not exact: {', '.join(wrong)}" if wrong else
             f"{len(mine)} runs")
        one = by.get((wl, f"1x{cap:g}"), {}).get("steady_records_per_s")
        for n, target in SPEEDUP_TARGETS.items():
            rate = by.get((wl, f"{n}x{cap:g}"), {}).get("steady_records_per_s")
            if one and rate:
                line(f"{wl}: {n} workers >= {target}x one", rate / one >= target,
                     f"{rate:,.0f} / {one:,.0f} = {rate / one:.2f}x")
            else:
                line(f"{wl}: {n} workers >= {target}x one", None, "a rate is missing")
        base = by.get((wl, "uncapped-1"), {})
        busy, rate = base.get("steady_worker_cores_busy"), base.get("steady_records_per_s")
        if one and busy and rate:
            per_core = rate / busy
            floor = BASELINE_FLOOR * per_core * cap
            line(f"{wl}: one capped worker >= {BASELINE_FLOOR} x uncapped per-core rate x cap", one >= floor,
                 f"{one:,.0f} vs {BASELINE_FLOOR} x {per_core:,.0f}/core ({rate:,.0f} at {busy:.2f} cores busy, "
                 f"steady window) "
                 f"x {cap:g} = {floor:,.0f}")
        else:
            line(f"{wl}: one capped worker >= {BASELINE_FLOOR} x uncapped per-core rate x cap", None,
                 "a figure is missing")
    biggest = max((r for r in runs if r["cap"] is not None), key=lambda r: r["workers"], default=None)
    if biggest is not None:
        worst = max((r for r in runs if r["workers"] == biggest["workers"] and r["cap"] is not None),
                    key=lambda r: r.get("outside_caps_cores_busy") or 0.0)
        used = worst.get("outside_caps_cores_busy")
        caps = biggest["workers"] * cap
        if used is not None:
            line(f"{biggest['workers']} workers' caps + driver, broker and master fit in {cores} cores",
                 caps + used <= cores,
                 f"{caps:g} + {used:.2f} (driver {worst['driver_cores_busy']:.2f}, broker "
                 f"{worst['broker_cores_busy']:.2f}, master {worst['master_cores_busy']:.2f}; {worst['workload']}) "
                 f"= {caps + used:.2f}")
    return out


# --- the driver process ---------------------------------------------------------------------------------

def driver_main(argv: list[str]) -> int:
    """One workload's SQL from a driver on this machine against the cluster named by
    ``STREAMSQL_SPARK_MASTER``: ``benchmarks.child``'s streamsql run (session, warm-up, query,
    output watcher, progress), with the run's partitions and batch size."""
    from benchmarks import child
    from streamsql.runtime import spark

    p = argparse.ArgumentParser(prog="python -m benchmarks.scaleout driver")
    p.add_argument("--workload", required=True, choices=sorted(WORKLOADS))
    p.add_argument("--partitions", type=int, required=True)
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--input-topic", required=True)
    p.add_argument("--output-topic", required=True)
    p.add_argument("--records", type=int, required=True)
    p.add_argument("--expected", type=int, required=True)
    p.add_argument("--final")
    p.add_argument("--timeout", type=float, required=True)
    p.add_argument("--batch-records", type=int, required=True)
    args = p.parse_args(argv)
    # the Python processes Spark starts beside the driver (the streaming source runner) get 15 s
    # to connect back by default: too short on a loaded 2-core machine (seen at load average 39)
    spark.configure({"spark.sql.shuffle.partitions": str(args.partitions),
                     "spark.python.authenticate.socketTimeout": "120s"})
    run = argparse.Namespace(system="streamsql", bootstrap=args.bootstrap, input_topic=args.input_topic,
                             output_topic=args.output_topic, records=args.records, expected=args.expected,
                             final=args.final, timeout=args.timeout, latency_seconds=0,
                             properties={"ksql.streams.max.records.per.batch": str(args.batch_records)})
    try:
        result = child.run_streamsql(run, scaled(WORKLOADS[args.workload], args.partitions))
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        result = {"error": f"{type(e).__name__}: {e}"}
    print("BENCH_RESULT " + json.dumps(result), flush=True)
    return 0 if "error" not in result else 1


# --- the parent --------------------------------------------------------------------------------------------

@dataclass
class Input:
    topic: str
    records: int
    expected: int
    final_path: Path | None


def _produce(bootstrap: str, w: Workload, records: int, log_dir: Path) -> Input:
    from benchmarks.__main__ import produce

    topic = f"scale_{w.name.lower()}_{uuid.uuid4().hex[:6]}"
    expected, final, seconds = produce(bootstrap, topic, w, records, round_robin=True)
    final_path = None
    if final is not None:
        final_path = log_dir / f"{w.name}-final.json"
        final_path.write_text(json.dumps(final))
    done_by = f"{len(final):,} final keys" if final is not None else f"{expected:,} expected outputs"
    print(f"{w.name}: produced {records:,} records over {w.partitions} partitions in {seconds:.1f}s ({done_by})",
          flush=True)
    return Input(topic, records, expected, final_path)


def _count(bootstrap: str, topic: str) -> int:
    from streamsql.kafka.admin import KafkaAdmin

    admin = KafkaAdmin(bootstrap)
    try:
        return sum(1 for _ in admin.iter_records(topic, from_beginning=True))
    finally:
        admin.close()


def _run(args: argparse.Namespace, config: RunConfig, w: Workload, inp: Input, sim: cluster.SimulatedCluster,
         broker: Any, log_dir: Path, cleanup: cluster.Cleanup) -> dict[str, Any]:
    from streamsql.kafka.admin import KafkaAdmin

    bootstrap = broker.bootstrap_servers
    output_topic = f"{inp.topic}_{config.label.replace('.', '_').replace('-', '_')}_out"
    admin = KafkaAdmin(bootstrap)
    admin.create_topic(output_topic, w.partitions)
    admin.close()
    batch = max(1, -(-inp.records // args.batches))
    cmd = [sys.executable, "-m", "benchmarks.scaleout", "driver", "--workload", w.name, "--partitions",
           str(args.partitions), "--bootstrap", bootstrap, "--input-topic", inp.topic, "--output-topic", output_topic,
           "--records", str(inp.records), "--expected", str(inp.expected), "--timeout", str(args.timeout),
           "--batch-records", str(batch)]
    if inp.final_path is not None:
        cmd += ["--final", str(inp.final_path)]
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, STREAMSQL_SPARK_MASTER=sim.master_url,
               SPARK_LOCAL_IP=sim.plan.host_address,
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    log_path = log_dir / f"{w.name}-{config.label}-driver.log"
    usage_before = sim.usage()
    recorder = CpuRecorder(sim).start()
    t0 = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=log, start_new_session=True)
        cleanup.push(f"driver {proc.pid}", lambda: cluster.stop_process_group(proc))
        extra = {"broker": broker.pid, "master": sim.master_pid}
        sampler = TreeSampler(proc.pid, extra_pids={k: v for k, v in extra.items() if v}).start()
        try:
            out, _ = proc.communicate(timeout=args.timeout + 300)
        except subprocess.TimeoutExpired:
            cluster.stop_process_group(proc)
            out, _ = proc.communicate()
        finally:
            sampler.stop()
            recorder.stop()
    wall = time.monotonic() - t0
    usage_after = sim.usage()
    lines = [ln for ln in out.decode(errors="replace").splitlines() if ln.startswith("BENCH_RESULT ")]
    res: dict[str, Any] = json.loads(lines[-1].split(" ", 1)[1]) if lines else {
        "error": f"no result (exit code {proc.returncode})"}
    row: dict[str, Any] = {"workload": w.name, "config": config.label, "workers": config.workers, "cap": config.cap,
                           "records": inp.records, "log": str(log_path)}
    if "error" in res:
        row.update(error=res["error"], exact=False,
                   log_tail=log_path.read_text(errors="replace").splitlines()[-15:])
        return row
    seconds = res["seconds"]
    # W4's output query reads quotes: back to input messages. W3's and W5's read their input
    # records (W5's also its customers table, almost all of it in the warm-up batch)
    records_per_row = inp.records / res["input_rows"] if w.name == "W4" and res.get("input_rows") else 1.0
    steady = steady_rate(res.get("timeline") or [], args.warmup_batches, records_per_row)
    # the driver's CPU from its query's start (its session start and warm-up are not the run's)
    since = {int(pid): secs for pid, secs in res.pop("cpu_at_query_start", {}).items()}
    cpu = sampler.cpu_by_kind(since=since)
    broker_s, master_s = cpu.pop("broker", 0.0), cpu.pop("master", 0.0)
    driver_s = sum(cpu.values())
    worker_s = sum(usage_after[h]["cpu_s"] - usage_before[h]["cpu_s"] for h in usage_after)
    # the workers' CPU over the query's run, and within the steady window (the per-core rate's
    # denominator); worker_s also holds the session's start and warm-up
    run_worker_s = steady_worker_s = None
    if res.get("execute_at"):
        run_worker_s = cpu_between(recorder.samples, res["execute_at"], res["execute_at"] + seconds)
        if steady.get("seconds"):
            begin = res["execute_at"] + steady["start_s"]
            steady_worker_s = cpu_between(recorder.samples, begin, begin + steady["seconds"])
    throttled = sum(usage_after[h].get("nr_throttled", 0) - usage_before[h].get("nr_throttled", 0)
                    for h in usage_after)
    outputs: int | None
    if inp.final_path is None:
        outputs = _count(bootstrap, output_topic)
        exact = outputs == inp.expected
    else:
        outputs = res.get("outputs")
        exact = res.get("final_keys_at_final_value") == res.get("final_keys") and not res.get("unexpected_keys")
    row.update(seconds=round(seconds, 2), records_per_s=round(inp.records / seconds, 1),
               steady_records_per_s=steady["records_per_s"], steady=steady, outputs=outputs, expected=inp.expected,
               exact=exact, wall_s=round(wall, 1), spark_start_s=res.get("spark_start_s"),
               driver_cpu_s=round(driver_s, 1), broker_cpu_s=round(broker_s, 1), master_cpu_s=round(master_s, 1),
               worker_cpu_s=round(worker_s, 1), driver_cpu_by_process=cpu, throttled_periods=throttled,
               # cores kept busy: CPU-s over seconds — the driver's and workers' over the query's run
               # (execute → exact output), the broker's and master's over the driver process's life
               driver_cores_busy=round(driver_s / seconds, 3), broker_cores_busy=round(broker_s / wall, 3),
               master_cores_busy=round(master_s / wall, 3),
               worker_cores_busy=round(run_worker_s / seconds, 3) if run_worker_s is not None else None,
               steady_worker_cores_busy=round(steady_worker_s / steady["seconds"], 3)
               if steady_worker_s is not None else None,
               outside_caps_cores_busy=round(driver_s / seconds + (broker_s + master_s) / wall, 3),
               timeline=res.get("timeline"))
    if "final_keys" in res:
        row.update(final_keys=res["final_keys"], final_keys_at_final_value=res.get("final_keys_at_final_value"))
    return row


def chart(path: Path, runs: list[dict[str, Any]], cap: float) -> Path | None:
    """Steady throughput and speed-up against capped workers, per workload (matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, (rates, speedup) = plt.subplots(1, 2, figsize=(11, 4.2))
    top = 1
    for wl in dict.fromkeys(r["workload"] for r in runs):
        points = sorted((r["workers"], r["steady_records_per_s"]) for r in runs
                        if r["workload"] == wl and r["cap"] is not None and r.get("steady_records_per_s"))
        if not points:
            continue
        xs, ys = zip(*points, strict=True)
        rates.plot(xs, [y / 1000 for y in ys], marker="o", label=wl)
        base = dict(points).get(1)
        if base:
            speedup.plot(xs, [y / base for y in ys], marker="o", label=wl)
        top = max(top, *xs)
    ideal = list(range(1, top + 1))
    speedup.plot(ideal, ideal, linestyle="--", color="grey", label="linear")
    speedup.scatter(list(SPEEDUP_TARGETS), list(SPEEDUP_TARGETS.values()), marker="_", s=300, color="red",
                    label="issue #56 floor")
    rates.set(xlabel=f"workers (each capped at {cap:g} core)", ylabel="thousand records/s (steady)",
              title="throughput")
    speedup.set(xlabel="workers", ylabel="× one worker", title="speed-up")
    for ax in (rates, speedup):
        ax.set_xticks(ideal)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _table(runs: list[dict[str, Any]]) -> str:
    head = (f"{'workload':<8} {'config':<11} {'steady/s':>10} {'e2e/s':>9} {'secs':>7} {'exact':>5} "
            f"{'workers':>7} {'driver':>7} {'broker':>7} {'master':>7} {'throttled':>9}")
    lines = [head, "(cores busy: CPU-s ÷ s; workers and driver over the query's run, broker and master over the "
                   "driver process's life)"]
    for r in runs:
        if "error" in r:
            lines.append(f"{r['workload']:<8} {r['config']:<11} ERROR {r['error'][:200]}")
            continue
        steady = f"{r['steady_records_per_s']:,.0f}" if r.get("steady_records_per_s") else "n/a"
        lines.append(f"{r['workload']:<8} {r['config']:<11} {steady:>10} {r['records_per_s']:>9,.0f} "
                     f"{r['seconds']:>7.1f} {'yes' if r['exact'] else 'NO':>5} {r['worker_cores_busy'] or 0:>7.2f} "
                     f"{r['driver_cores_busy']:>7.2f} {r['broker_cores_busy']:>7.2f} {r['master_cores_busy']:>7.2f} "
                     f"{r['throttled_periods']:>9,}")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.scaleout", description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", default=",".join(DEFAULT_WORKLOADS))
    p.add_argument("--workers", default="1,2,4", help="capped worker counts (comma-separated)")
    p.add_argument("--cap", type=float, default=0.3, help="CPU per capped worker, in cores (default 0.3)")
    p.add_argument("--records", type=int, default=400_000,
                   help="input records per workload (W4: this many quotes' worth of messages, ~20 quotes each)")
    p.add_argument("--partitions", type=int, default=4, help="input partitions (and shuffle partitions)")
    p.add_argument("--batches", type=int, default=8, help="micro-batches a run's input is cut into (about)")
    p.add_argument("--warmup-batches", type=int, default=1, help="micro-batches left out of the steady rate")
    p.add_argument("--worker-memory", default="1g")
    p.add_argument("--timeout", type=float, default=1800.0, help="per run, seconds")
    p.add_argument("--json", type=Path, help="write the figures here (and the picture to PATH.png)")
    p.add_argument("--cleanup", action="store_true",
                   help="remove namespaces, links and cgroups a killed run left, then exit")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["driver"]:
        return driver_main(argv[1:])
    args = parse_args(argv)
    if os.geteuid() != 0:
        raise SystemExit("python -m benchmarks.scaleout needs root (network namespaces, CPU cgroups)")
    found = cluster.leftovers()
    if args.cleanup:
        errors = cluster.remove_leftovers(found)
        print(f"removed {found}" + (f"; errors: {errors}" if errors else ""))
        return 1 if errors else 0
    if any(found.values()):
        raise SystemExit(f"an earlier run left {found}; remove them with python -m benchmarks.scaleout --cleanup")
    cores = os.cpu_count() or 1
    configs = run_configs([int(n) for n in args.workers.split(",")], args.cap, cores)
    workloads = [scaled(WORKLOADS[n.strip()], args.partitions) for n in args.workloads.split(",") if n.strip()]
    log_dir = Path(tempfile.mkdtemp(prefix="streamsql-scaleout-"))
    meta: dict[str, Any] = {"command": " ".join(["python -m benchmarks.scaleout", *argv]), "cores": cores,
                            "cap": args.cap, "partitions": args.partitions, "records": args.records,
                            "batches": args.batches, "warmup_batches": args.warmup_batches,
                            "loadavg_start": loadavg(), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                            "logs": str(log_dir)}
    print(f"scale-out: {', '.join(w.name for w in workloads)}; {', '.join(c.label for c in configs)}; "
          f"{cores} cores, load {meta['loadavg_start']}; logs in {log_dir}", flush=True)
    runs: list[dict[str, Any]] = []
    cleanup = cluster.Cleanup()
    from streamsql.kafka.broker import EmbeddedBroker

    with cluster.interrupts_raise():
        try:
            address = cluster.make_lan(cleanup)
            broker = EmbeddedBroker(host=address)
            cleanup.push("broker", broker.stop)
            broker.start()
            inputs = {w.name: _produce(broker.bootstrap_servers, w, input_records(w, args.records), log_dir)
                      for w in workloads}
            for config in configs:
                p = cluster.plan(config.workers, config.cap, cores)
                sim = cluster.SimulatedCluster(p, log_dir / config.label, sys.executable, args.worker_memory)
                cleanup.push(f"cluster {config.label}", lambda s=sim: _report_errors(s.stop()))  # type: ignore[misc]
                started = time.monotonic()
                sim.start()
                print(f"{config.label}: master and {config.workers} worker(s) up in {time.monotonic() - started:.1f}s",
                      flush=True)
                for w in workloads:
                    row = _run(args, config, w, inputs[w.name], sim, broker, log_dir, cleanup)
                    runs.append(row)
                    print("  " + (_table([row]).splitlines()[-1]), flush=True)
                _report_errors(sim.stop())
        finally:
            _report_errors(cleanup.run())
    meta["loadavg_end"] = loadavg()
    checks = assess(runs, args.cap, cores)
    print()
    print(_table(runs))
    print()
    for c in checks:
        status = "PASS" if c["ok"] else "FAIL" if c["ok"] is False else "n/a "
        print(f"{status}  {c['check']}: {c['detail']}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"meta": meta, "runs": runs, "checks": checks}, indent=2) + "\n")
        png = chart(args.json.with_suffix(".png"), runs, args.cap)
        print(f"wrote {args.json}" + (f" and {png}" if png else " (no picture: matplotlib not installed)"))
    return 0 if all(c["ok"] for c in checks) else 1


def _report_errors(errors: list[str]) -> None:
    for e in errors:
        print(f"cleanup: {e}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
