"""``python -m benchmarks.profile [--workload W1] [--records N]``: where a workload's Python time goes.

Runs one workload for streamsql alone (the same harness, broker and data as ``python -m
benchmarks``) under py-spy, which samples every Python process of the run: the driver (Spark's
``foreachBatch`` callbacks, the aggregation processor), Spark's Python workers (the Kafka source's
``read()``, decoding, UDFs, the Kafka sink) and the streaming source runner (offsets). The summary
gives the share of samples per process kind and the functions with the most self and inclusive
time. The JVM is not visible to py-spy: its CPU seconds are in the run's own per-process
accounting, printed at the end of the benchmark output.

Profiling slows the Python processes down; compare shares, not rates.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

_PROCESS = re.compile(r'^process \d+:"')  # py-spy's frame naming a process (a function may be called "process")
_FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*?)(?::\d+)?\)$")


def process_kind(command: str) -> str:
    """A sampled process, named by its role in the run."""
    if "pyspark.daemon" in command or "pyspark.worker" in command:
        return "spark python worker"
    if "python_streaming_source_runner" in command:
        return "streaming source runner"
    if "benchmarks.child" in command:
        return "driver (streamsql engine)"
    if "-m benchmarks" in command:
        return "harness (producer, output watcher)"
    return "other"


def function_of(frame: str) -> str:
    """``func (path/file.py:123)`` → ``func (file.py)``: lines of one function counted together,
    paths shortened to the package-relative part."""
    m = _FRAME.match(frame.strip())
    if m is None:
        return frame.strip()
    path = m.group("file")
    for marker in ("site-packages/", "/work/main/", "lib/python3.11/"):
        if marker in path:
            path = path.split(marker, 1)[1]
    return f"{m.group('func')} ({path})"


def summarize(raw: Path, top: int = 15) -> str:
    """The report of one py-spy ``--format raw`` file recorded with ``--subprocesses``."""
    kinds: Counter[str] = Counter()
    self_time: dict[str, Counter[str]] = {}
    inclusive: dict[str, Counter[str]] = {}
    total = 0
    for line in raw.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = stack.split(";")
        # py-spy nests each child process's frames under its ancestors' "process ..." frames:
        # the innermost one is the process sampled
        last = max((i for i, f in enumerate(frames) if _PROCESS.match(f)), default=-1)
        kind = process_kind(frames[last]) if last >= 0 else "other"
        functions = [function_of(f) for f in frames[last + 1:]]
        if not functions:
            continue
        total += count
        kinds[kind] += count
        self_time.setdefault(kind, Counter())[functions[-1]] += count
        for f in set(functions):
            inclusive.setdefault(kind, Counter())[f] += count
    lines = [f"{total} samples", "", "share of samples per process kind:"]
    for kind, n in kinds.most_common():
        lines.append(f"  {100 * n / max(total, 1):5.1f}%  {kind}")
    for kind, n in kinds.most_common():
        if n < total * 0.02:
            continue
        lines += ["", f"== {kind}: top self time (% of this kind's samples)"]
        lines += [f"  {100 * c / n:5.1f}%  {f}" for f, c in self_time[kind].most_common(top)]
        lines += ["", f"== {kind}: top inclusive time in streamsql's own code"]
        own = [(f, c) for f, c in inclusive[kind].most_common() if "streamsql/" in f]
        lines += [f"  {100 * c / n:5.1f}%  {f}" for f, c in own[:top]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.profile", description=__doc__.split("\n\n")[0])
    p.add_argument("--workload", default="W1")
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--rate", type=int, default=50, help="py-spy samples per second per process")
    p.add_argument("--raw", type=Path, help="keep py-spy's raw samples here")
    p.add_argument("--top", type=int, default=15)
    args = p.parse_args(argv)
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        print("py-spy is not installed: pip install -e '.[bench]'", file=sys.stderr)
        return 2
    raw = args.raw or Path(tempfile.mkdtemp(prefix="streamsql-profile-")) / f"{args.workload}.raw"
    command = [spy, "record", "--subprocesses", "--nonblocking", "-r", str(args.rate), "--format", "raw",
               "-o", str(raw), "--", sys.executable, "-m", "benchmarks", "--workloads", args.workload,
               "--systems", "streamsql", "--records", str(args.records), "--latency-seconds", "0"]
    print("$", " ".join(command), flush=True)
    rc = subprocess.run(command).returncode
    if not raw.exists():
        print(f"py-spy wrote no samples (exit {rc})", file=sys.stderr)
        return rc or 1
    print()
    print(summarize(raw, args.top))
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
