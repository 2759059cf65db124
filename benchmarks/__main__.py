"""``python -m benchmarks [--quick] [--json PATH]``: see README.md."""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks import report
from benchmarks.measure import TreeSampler, loadavg
from benchmarks.workloads import WORKLOADS, Workload

REPO = Path(__file__).resolve().parents[1]
SYSTEMS = ("ceiling-raw", "ceiling-json", "streamsql", "streamsql-nocache", "streamsql-cold", "quixstreams")
#: systems that write the output topic (the ceilings only read)
WRITERS = ("streamsql", "streamsql-nocache", "streamsql-cold", "quixstreams")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    p.add_argument("--quick", action="store_true", help="~1-minute smoke run (20k records, short latency probe)")
    p.add_argument("--json", type=Path, help="write the rows here (plus PATH.meta.json and a PNG chart beside it)")
    p.add_argument("--records", type=int, help="input records per workload (default 1,000,000; --quick 20,000)")
    p.add_argument("--workloads", default=",".join(WORKLOADS), help=f"comma-separated ({', '.join(WORKLOADS)})")
    p.add_argument("--systems", default=",".join(s for s in SYSTEMS if s != "streamsql-cold"),
                   help=f"comma-separated ({', '.join(SYSTEMS)}); streamsql-nocache is streamsql with "
                        "ksql.streams.cache.max.bytes.buffering=0, run only for workloads with an EMIT CHANGES "
                        "aggregation (elsewhere the record cache changes nothing); streamsql-cold is streamsql "
                        "whose session skips the warm-up (STREAMSQL_WARM_UP=0), not run unless named")
    p.add_argument("--latency-seconds", type=float,
                   help="measured seconds of the streamsql latency probe at --latency-rate (default 20; --quick 4; "
                        "0 = skip)")
    p.add_argument("--latency-rate", type=int, default=1000, help="records/s of the latency probe")
    p.add_argument("--latency-warmup", type=float, help="seconds produced before latency is measured (default 10; "
                                                        "--quick 5)")
    p.add_argument("--timeout", type=float, help="per system and workload, seconds (default 900; --quick 240)")
    p.add_argument("--verbose", action="store_true", help="pass the systems' logs through to stderr")
    args = p.parse_args(argv)
    if args.records is None:
        args.records = 20_000 if args.quick else 1_000_000
    if args.latency_seconds is None:
        args.latency_seconds = 4.0 if args.quick else 20.0
    if args.latency_warmup is None:
        args.latency_warmup = 5.0 if args.quick else 10.0
    if args.timeout is None:
        args.timeout = 240.0 if args.quick else 900.0
    return args


def produce(bootstrap: str, topic: str, w: Workload, count: int,
            round_robin: bool = False) -> tuple[int, dict[str, Any] | None, float]:
    """Write ``count`` records of ``w`` once; return the reference's output count (for an
    aggregation that emits changes: its updates without a record cache), the expected final value
    per output key (workloads with ``final``, else None) and the produce seconds (which include
    the reference's work). With ``round_robin`` the i-th keyless record goes to partition
    i % partitions (so its offset is i // partitions: what W4's reference needs over several
    partitions); keyed records go by key either way."""
    from confluent_kafka import Producer

    from streamsql.kafka.admin import KafkaAdmin
    from streamsql.kafka.clients import client_config, produce_waiting

    admin = KafkaAdmin(bootstrap)
    # explicit retention: Quix Streams derives its window state's changelog config from the input
    # topic's retention.ms, which tansu reports only when it was set
    admin.create_topic(topic, w.partitions, config={"retention.ms": "-1", "retention.bytes": "-1"})
    if w.table is not None:
        admin.create_topic(f"{topic}_table", w.partitions, config={"retention.ms": "-1", "retention.bytes": "-1"})
    admin.close()
    producer = Producer(client_config(bootstrap, {"partitioner": "murmur2_random", "linger.ms": 5,
                                                  "enable.idempotence": True}))
    if w.table is not None:  # the table first: every order finds its customer already there
        for key, value, ts in w.table(count):
            producer.produce(f"{topic}_table", value=value, key=key, timestamp=ts)
            producer.poll(0)
        producer.flush(60)
    reference = w.reference()
    final = w.final() if w.final is not None else None
    expected = 0
    t0 = time.monotonic()
    for i, (key, value, ts) in enumerate(w.generate(count, w.seed)):
        expected += reference(key, value)
        if final is not None:
            final.add(key, value, ts)
        record: dict[str, Any] = {"value": value, "key": key, "timestamp": ts}
        if round_robin and key is None:
            record["partition"] = i % w.partitions
        produce_waiting(producer, topic, record)
    left = producer.flush(60)
    if left:
        raise RuntimeError(f"{left} records not acknowledged")
    seconds = time.monotonic() - t0
    return expected, final.result() if final is not None else None, seconds


def run_system(args: argparse.Namespace, system: str, w: Workload, bootstrap: str, input_topic: str,
               expected: int, broker_pid: int | None, log_dir: Path, final_path: Path | None = None) -> dict[str, Any]:
    from streamsql.kafka.admin import KafkaAdmin

    output_topic = f"{input_topic}_{system.replace('-', '_')}_out"
    if system in WRITERS:
        admin = KafkaAdmin(bootstrap)
        admin.create_topic(output_topic, w.partitions)
        admin.close()
    cmd = [sys.executable, "-m", "benchmarks.child", system, "--workload", w.name, "--bootstrap", bootstrap,
           "--input-topic", input_topic, "--output-topic", output_topic, "--records", str(args.records),
           "--expected", str(expected), "--timeout", str(args.timeout)]
    if final_path is not None and system in WRITERS:
        cmd += ["--final", str(final_path)]
    if system.startswith("streamsql") and args.latency_seconds > 0 and w.latency:
        cmd += ["--latency-seconds", str(args.latency_seconds), "--latency-warmup", str(args.latency_warmup),
                "--latency-rate", str(args.latency_rate)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
               PYSPARK_PYTHON=sys.executable)
    log_path = log_dir / f"{w.name}-{system}.log"
    load_before = loadavg()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE,
                                stderr=None if args.verbose else log)
        sampler = TreeSampler(proc.pid, extra_pids={"broker": broker_pid} if broker_pid else None).start()
        try:
            out, _ = proc.communicate(timeout=args.timeout + 120)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        finally:
            sampler.stop()
    lines = [ln for ln in out.decode(errors="replace").splitlines() if ln.startswith("BENCH_RESULT ")]
    result: dict[str, Any] = json.loads(lines[-1].split(" ", 1)[1]) if lines else {
        "error": f"no result (exit code {proc.returncode}); log: {log_path}"}
    if "error" in result and not args.verbose:
        tail = log_path.read_text(errors="replace").splitlines()[-15:]
        result["log_tail"] = tail
    result.update(peak_rss_mb=max(sampler.peak_rss / 2**20, result.get("self_max_rss_mb") or 0),
                  peak_pss_mb=sampler.peak_pss / 2**20 if sampler.peak_pss else None,
                  cpu_s_by_process=sampler.cpu_by_kind(),
                  query_cpu_s_by_process=sampler.cpu_by_kind(since={
                      int(pid): secs for pid, secs in result.pop("cpu_at_query_start", {}).items()})
                  if "cpu_at_query_start" in result else None,
                  peak_pss_mb_by_process={k: round(v / 2**20, 1) for k, v in sorted(
                      sampler.peak_pss_by_process.items(), key=lambda kv: -kv[1])},
                  loadavg_before=load_before, loadavg_after=loadavg())
    return result


def rows_for(w: Workload, system: str, res: dict[str, Any]) -> list[dict[str, Any]]:
    if "error" in res:
        return [report.row(w.name, system, peak_rss_mb=None)]
    rows = [report.row(w.name, system, res.get("records"), res.get("seconds"), res.get("peak_rss_mb"),
                       res.get("p50_ms"), res.get("p99_ms"), outputs=res.get("outputs") if system in WRITERS else None,
                       peak_pss_mb=res.get("peak_pss_mb"))]
    # the steady rate is rows of the output query's input per second: a row only when those rows
    # are the input records (W2's are words, W4's quotes; the figures stay in the meta file)
    steady_is_records = res.get("input_rows") == res.get("records")
    if system.startswith("streamsql") and res.get("steady_records_per_s") and steady_is_records:
        rows.append(report.row(w.name, f"{system}-steady", res["steady_rows"], res["steady_s"]))
    if system == "quixstreams" and res.get("first_output_s") is not None and res["seconds"] > res["first_output_s"]:
        # after the consumer group join (first output); the join is a tansu artefact (child.py)
        rows.append(report.row(w.name, "quixstreams-steady", res["records"], res["seconds"] - res["first_output_s"]))
    return rows


def _phases(duration_ms: dict[str, int]) -> str:
    """A micro-batch's phases as Spark's progress reports them, the largest first."""
    phases = sorted(((k, v) for k, v in duration_ms.items() if k != "triggerExecution" and v), key=lambda kv: -kv[1])
    return ", ".join(f"{k} {v:,} ms" for k, v in phases)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from streamsql.kafka.broker import EmbeddedBroker

    workloads = [WORKLOADS[n.strip()] for n in args.workloads.split(",") if n.strip()]
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    for s in systems:
        if s not in SYSTEMS:
            raise SystemExit(f"unknown system {s!r}; known: {', '.join(SYSTEMS)}")
    cores = os.cpu_count() or 1
    meta: dict[str, Any] = {"command": " ".join(["python -m benchmarks", *(argv if argv is not None else sys.argv[1:])]),
                            "records": args.records, "cores": cores, "loadavg_start": loadavg(),
                            "python": platform.python_version(), "machine": platform.machine(),
                            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "workloads": {}}
    meta["versions"] = _versions()
    print(f"benchmarks: {args.records:,} records/workload, {cores} cores, load average {meta['loadavg_start']} "
          f"(1/5/15 min)", flush=True)
    log_dir = Path(tempfile.mkdtemp(prefix="streamsql-bench-"))
    rows: list[dict[str, Any]] = []
    broker = EmbeddedBroker().start()
    try:
        broker_pid = getattr(getattr(broker, "_proc", None), "pid", None)
        for w in workloads:
            topic = f"bench_{w.name.lower()}_{uuid.uuid4().hex[:6]}"
            expected, final, produce_s = produce(broker.bootstrap_servers, topic, w, args.records)
            final_path = None
            wmeta: dict[str, Any] = {"title": w.title, "input_topic": topic, "produce_s": round(produce_s, 2),
                                     "produce_records_per_s": round(args.records / produce_s), "systems": {}}
            if final is None:
                wmeta["expected_outputs"] = expected
                done_by = f"{expected:,} expected outputs"
            else:
                final_path = log_dir / f"{w.name}-final.json"
                final_path.write_text(json.dumps(final))
                wmeta.update(completion="final state", final_keys=len(final), updates_without_cache=expected)
                done_by = (f"done when each of {len(final):,} output keys holds its final value "
                           f"({expected:,} updates without a record cache)")
            meta["workloads"][w.name] = wmeta
            print(f"{w.name} ({w.title}): produced {args.records:,} records in {produce_s:.1f}s; {done_by}",
                  flush=True)
            for system in systems:
                if system == "quixstreams" and w.quix is None:
                    reference = (" (its reference: Flink's published per-core figure)" if w.flink_per_core
                                 else f" (its reference: {w.twin} in this run)" if w.twin else "")
                    print(f"  {system:<17} skipped: no peer version of this query{reference}", flush=True)
                    continue
                if system == "streamsql-nocache" and not w.record_cache:
                    print(f"  {system:<17} skipped: no EMIT CHANGES aggregation, the record cache changes nothing",
                          flush=True)
                    continue
                res = run_system(args, system, w, broker.bootstrap_servers, topic, expected, broker_pid, log_dir,
                                 final_path)
                wmeta["systems"][system] = res
                new = rows_for(w, system, res)
                rows.extend(new)
                wrote = res.get("outputs") if system in WRITERS else None
                status = res.get("error") or (f"{new[0]['records_per_s']:,.0f} records/s in {new[0]['seconds']:.2f}s"
                                              + (f", {wrote:,} output records" if wrote is not None else ""))
                if final is None and wrote is not None and wrote > expected:  # done at the count, but more came
                    status += f" (MORE than the {expected:,} expected: the output is wrong)"
                print(f"  {system:<17} {status} (peak RSS {res['peak_rss_mb']:.0f} MB, load {res['loadavg_after']})",
                      flush=True)
    finally:
        broker.stop()
    meta["loadavg_end"] = loadavg()
    print()
    print(report.table(rows, cores))
    print()
    r = report.ratios(rows)
    if r:
        print("ratios of records/s:\n" + r)
    for name, wmeta in meta["workloads"].items():
        for sname in ("streamsql", "streamsql-nocache", "streamsql-cold"):
            s = wmeta["systems"].get(sname) or {}
            if "spark_start_s" in s:
                warmed = f" of which warm-up {s['warm_up_s']:.1f}s" if s.get("warm_up_s") else ""
                print(f"{name} {sname}: Spark session start {s['spark_start_s']:.1f}s{warmed} (not in 'seconds'); "
                      f"first micro-batch {s.get('first_batch_rows', 0):,} rows in {s.get('first_batch_s', 0):.1f}s; "
                      f"{s.get('batches', 0)} batches with data"
                      + (f" (first: {_phases(s['first_batch_duration_ms'])})"
                         if s.get("first_batch_duration_ms") else "")
                      + (f"; latency at {s['latency_rate']}/s: p50 {s['p50_ms']:.0f} ms, p99 {s['p99_ms']:.0f} ms "
                         f"({s['latency_samples']} outputs)" if s.get("p50_ms") is not None else "")
                      + (f"; a new query's first output {s['first_output_after_create_s']:.2f}s after its CREATE"
                         if s.get("first_output_after_create_s") is not None else ""))
        if "final_keys" in wmeta:
            written = ", ".join(f"{system} {res['outputs']:,}" for system, res in wmeta["systems"].items()
                                if res.get("outputs") is not None and system in WRITERS)
            print(f"{name}: done by final state ({wmeta['final_keys']:,} keys); output records written: {written} "
                  f"(one update per input record: {wmeta['updates_without_cache']:,})")
        for system, res in wmeta["systems"].items():
            if res.get("cpu_s_by_process"):
                print(f"{name} {system}: CPU seconds {res['cpu_s_by_process']}")
            if res.get("query_cpu_s_by_process"):
                print(f"{name} {system}: CPU seconds from the query's start {res['query_cpu_s_by_process']}")
            if res.get("peak_pss_mb_by_process"):
                print(f"{name} {system}: peak PSS MB by process {res['peak_pss_mb_by_process']}")
    twins = report.twin_ratios(rows, {w.name: w.twin for w in workloads if w.twin})
    if twins:
        print("same-run ratios of twins:\n" + twins)
    nexmark = report.nexmark_per_core(rows, {w.name: w.flink_per_core for w in workloads if w.flink_per_core}, cores)
    if nexmark:
        print("Nexmark input events/s per core, beside Flink's published reference run (nexmark/nexmark, "
              "8 cores, in-process generator, blackhole sink):\n" + nexmark)
    print(f"load average: start {meta['loadavg_start']}, end {meta['loadavg_end']} (1/5/15 min, {cores} cores)")
    if args.json:
        path, png = report.write_json(args.json, rows, meta)
        print(f"wrote {path}" + (f" and {png}" if png else " (no chart: matplotlib not installed)"))
    failed = [f"{n}/{s}: {res['error']}" for n, wm in meta["workloads"].items() for s, res in wm["systems"].items()
              if "error" in res]
    for f in failed:
        print(f"FAILED {f}", file=sys.stderr)
    for n, wm in meta["workloads"].items():
        for s, res in wm["systems"].items():
            for line in res.get("log_tail", []):
                print(f"  [{n}/{s}] {line}", file=sys.stderr)
    return 1 if failed else 0


def _versions() -> dict[str, str]:
    from importlib import metadata

    out = {}
    for pkg in ("pyspark", "confluent-kafka", "quixstreams", "pyarrow"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


if __name__ == "__main__":
    sys.exit(main())
