#!/usr/bin/env bash
# Main job: set everything up, then run the seed pipeline queries/fraud_filter.sql on sample
# payments with the embedded default (local Spark + embedded broker, no flags).
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh
echo "demo.sh: running the demo: the local broker, 20 000 sample payments, the fraud filter (about 1 minute)"
exec .venv/bin/streamsql demo "$@"
