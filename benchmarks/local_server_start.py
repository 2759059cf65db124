"""How fast the CLI is against a running local server (issue #55): medians of N runs of

* ``streamsql shell`` on a terminal, from its start to the ``streamsql>`` prompt;
* ``streamsql run one.sql`` (one CREATE STREAM AS SELECT), from its start to "Created query".

    python -m benchmarks.local_server_start [--runs 5] [--json FILE]

A scratch directory gets its local broker and server first (not timed); both are stopped at the
end. The machine's load average is printed with the figures: on a shared machine it explains them.
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "STREAMSQL_BOOTSTRAP_SERVERS"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env.update(TERM="xterm", PROMPT_TOOLKIT_NO_CPR="1")
    return env


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "streamsql", *args], cwd=cwd, env=_env(), capture_output=True,
                          text=True, timeout=600, check=True)


def time_until(args: list[str], text: str, cwd: Path, timeout_s: float = 120) -> float:
    """Seconds from starting ``streamsql ARGS`` on a terminal until ``text`` is on it (then it is killed)."""
    master, slave = pty.openpty()
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "streamsql", *args], cwd=cwd, env=_env(), stdin=slave,
                            stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    seen = b""
    try:
        while text.encode() not in seen:
            if time.monotonic() - started > timeout_s:
                raise RuntimeError(f"no {text!r} within {timeout_s:.0f} s: {seen[-2000:]!r}")
            if select.select([master], [], [], 0.05)[0]:
                try:
                    seen += os.read(master, 65536)
                except OSError:
                    break
        return time.monotonic() - started
    finally:
        proc.kill()
        proc.wait()
        os.close(master)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="streamsql-bench-cli-") as scratch:
        cwd = Path(scratch)
        _cli("server", "start", cwd=cwd)
        try:
            _cli("shell", "-e", "CREATE STREAM b_in (k VARCHAR KEY, v INT) WITH (KAFKA_TOPIC='b_in', "
                                "VALUE_FORMAT='JSON', PARTITIONS=1);", cwd=cwd)
            shell = [time_until(["shell"], "streamsql>", cwd) for _ in range(args.runs)]
            runs = []
            for n in range(args.runs):
                (cwd / f"one_{n}.sql").write_text(f"CREATE STREAM b_out_{n} AS SELECT k, v FROM b_in;\n")
                runs.append(time_until(["run", f"one_{n}.sql"], "Created query", cwd))
        finally:
            _cli("server", "stop", cwd=cwd)
            _cli("broker", "stop", cwd=cwd)
    figures = {"shell_to_prompt_s": round(statistics.median(shell), 2),
               "run_to_created_query_s": round(statistics.median(runs), 2),
               "runs": args.runs, "load_average_1m": round(os.getloadavg()[0], 1), "cores": os.cpu_count(),
               "shell_s": [round(x, 2) for x in shell], "run_s": [round(x, 2) for x in runs]}
    print(json.dumps(figures, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
