"""Slow drills, on demand: the tests marked ``drill``.

Each takes a minute or more on 2 cores (a SIGKILLed aggregation recovering its exact table; the
crash drills at scale, ``-k crash_drill``: run and server killed three times over 200k records
under both delivery guarantees; seed 003 on a Spark standalone cluster against local mode,
``-k cluster``; this harness's own ``--quick`` run), so the suite (``./test.sh``,
which must stay under 30 minutes) leaves them out. They use the suite's fixtures (one broker, one
SparkSession): ``python -m benchmarks.drills`` runs them all; extra arguments go to pytest
(``-k crash_drill``).
"""

from __future__ import annotations

import subprocess
import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    return subprocess.call([sys.executable, "-m", "pytest", "-m", "drill", "-p", "no:cacheprovider", *args])


if __name__ == "__main__":
    raise SystemExit(main())
