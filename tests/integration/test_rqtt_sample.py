"""ksqlDB's REST query-validation tests (RQTT) through a real ``streamsql server`` process, a
sample of them: the runner (``streamsql test <corpus>/rqtt``) starts the server once and runs the
cases one after another, resetting the server (``/ksql/terminate``) between them. The whole RQTT
set runs on demand (docs/conformance.md); the sample keeps the runner and the reset between
cases in every suite run.
"""

from __future__ import annotations

import io

import pytest

from streamsql.conformance.rqtt import run_rqtt_files
from tests.support.corpus import corpus_dir

pytestmark = pytest.mark.integration


def test_cases_after_a_pull_query_over_a_source_table(bootstrap: str) -> None:
    """The second case used to find the server dead: the first case's pull query had read the
    source table's changelog with this process's cached Kafka reader, and deleting topics
    during the reset (on tansu) crashed librdkafka in the server process (SIGSEGV)."""
    path = corpus_dir() / "rqtt" / "pull-queries-against-cst-materialized.json"
    out = io.StringIO()
    results = run_rqtt_files([path], bootstrap, out, verbose=True)
    assert len(results) == 2, out.getvalue()
    assert [r.status for r in results] == ["passed", "passed"], out.getvalue()
