#!/usr/bin/env bash
# Set everything up, then run the whole test suite (unit + integration against a real broker
# process and a real SparkSession).
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh
exec .venv/bin/python -m pytest -q "$@"
