"""Spark starts a fresh Python process for each streaming query's offsets (its source runner):
it imports the data source's module and makes the stream reader. What that process imports is
paid at every query start (docs/performance.md), so it must stay the reader's own needs: not
the writer, not every format, not Arrow's compute kernels, not the SQL parser."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

PROBE = """
import json, sys
from pyspark.sql.types import StructType
from streamsql.kafka.datasource import KafkaDataSource
spec = lambda fmt, name, ty, role: json.dumps({"format": fmt, "columns": [{"name": name, "type": ty, "role": role}]})
options = {"kafka.bootstrap.servers": "127.0.0.1:9", "topic": "t", "keyFormat": spec("KAFKA", "K", "STRING", "key"),
           "valueFormat": spec("AVRO", "V", "INTEGER", "value")}
KafkaDataSource(options).streamReader(StructType([]))
print(json.dumps(sorted(m for m in sys.modules if m.startswith(("streamsql", "sqlglot", "pyarrow.compute",
                                                                  "fastavro", "google.protobuf")))))
"""


def test_the_source_runner_imports_only_what_the_stream_reader_needs() -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert "streamsql.kafka.source" in loaded  # the probe did make a reader
    heavy = {"streamsql.kafka.sink", "streamsql.formats.registry", "streamsql.formats.avro_format",
             "streamsql.formats.protobuf_format", "pyarrow.compute", "sqlglot", "fastavro", "google.protobuf"}
    assert loaded & heavy == set()
