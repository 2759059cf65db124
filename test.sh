#!/usr/bin/env bash
# Set everything up, lint and type-check streamsql (ruff, mypy; configured in pyproject.toml), check its
# import layers (.importlinter), then run the whole test suite (unit + integration against a real broker
# process and a real SparkSession). Any step failing fails the command.
set -euo pipefail
cd "$(dirname "$0")"
# the conformance tests read ksqlDB's query-validation tests: say at once when they cannot be found
# (the same rule as tests/support/corpus.py, which stops pytest when a run that needs them lacks them)
qtt="${STREAMSQL_QTT_DIR:-../shared/ksqldb-qtt}"
if [ $# -eq 0 ] && [ ! -d "$qtt/qtt" ]; then
  echo "test.sh: ksqlDB's query-validation tests were not found at $qtt/qtt: set STREAMSQL_QTT_DIR to the directory that holds their qtt/ folder" >&2
  exit 4
fi
scripts/setup.sh
echo "test.sh: checking the code: ruff, mypy, the import layers (about 1 minute)"
.venv/bin/ruff check streamsql
.venv/bin/mypy streamsql
# the import layering (.importlinter): every package in its layer, no import cycle anywhere
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" .venv/bin/lint-imports --no-cache
# the suite's order: the files' own (CI) unless STREAMSQL_RANDOM_ORDER=1 (pytest-randomly; the
# last line names the seed): random runs still find order dependencies (docs/reliability.md)
order=(-p no:randomly)
if [ "${STREAMSQL_RANDOM_ORDER:-}" = 1 ]; then order=(); fi
if [ $# -eq 0 ]; then
  echo "test.sh: running the whole test suite (under 30 minutes on 2 cores; a dot per test)"
fi
exec .venv/bin/python -m pytest -q "${order[@]}" "$@"
