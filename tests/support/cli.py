"""``streamsql`` commands as a user runs them: a separate process of this checkout's code, with no
Kafka address in the environment (so the data directory's local broker is used)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_streamsql(*args: str, cwd: Path, timeout: float = 300,
                  input: str | None = None) -> subprocess.CompletedProcess[str]:
    """``input``: piped to its standard input (else it inherits this process's)."""
    env = {k: v for k, v in os.environ.items() if k != "STREAMSQL_BOOTSTRAP_SERVERS"}
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])  # this checkout's code
    return subprocess.run([sys.executable, "-m", "streamsql", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, input=input)
