#!/usr/bin/env bash
# Set everything up, lint and type-check streamsql (ruff, mypy; configured in pyproject.toml),
# then run the whole test suite (unit + integration against a real broker process and a real
# SparkSession). Any step failing fails the command.
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh
.venv/bin/ruff check streamsql
.venv/bin/mypy streamsql
exec .venv/bin/python -m pytest -q "$@"
