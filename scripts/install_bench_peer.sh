#!/usr/bin/env bash
# The benchmark's peer (quixstreams) and the bench extra, into the project's .venv.
# quixstreams pins confluent-kafka<2.13 and pulls the registry client's authlib stack; it runs fine
# on our confluent-kafka, so it and its dependencies are installed without resolving its pins.
set -euo pipefail
cd "$(dirname "$0")/.."
PIP=".venv/bin/pip"
"$PIP" install -q -e '.[bench]'
"$PIP" install -q --no-deps quixstreams
"$PIP" install -q "rocksdict<0.4,>=0.3" "orjson<4,>=3.9" "pydantic<2.14,>=2.7" "pydantic-settings<2.16,>=2.3" \
    "jsonschema>=4.3.0" "jsonlines<5,>=4" "rich<16,>=13" "jsonpath-ng<2,>=1.7.0"
"$PIP" install -q --no-deps authlib joserfc cryptography cffi pycparser cachetools
.venv/bin/python -c "import quixstreams; print('quixstreams', quixstreams.__version__)"
