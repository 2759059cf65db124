"""The conformance ratchet: QTT test ids listed in ``tests/qtt_ratchet.txt`` must keep passing.

The suite re-runs every listed id; ``STREAMSQL_QTT_RATCHET=sample`` re-runs only a sample that
touches every listed file (its first id, and its last for a file with more than BIG_FILE ids; see
:func:`sample`), for a quicker local run. Standalone: ``streamsql test <corpus>/qtt --ids
tests/qtt_ratchet.txt``. Runs in-process on the session's broker and SparkSession (one engine per case). A test that
stops passing fails this test, named with its reason. To add newly passing tests, run
``streamsql test <corpus>/qtt --json /tmp/qtt.json`` and append the passed ids (see
docs/conformance.md).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from streamsql.conformance import cases as case_files
from streamsql.conformance import qtt
from streamsql.conformance import results as case_results
from streamsql.conformance.command import DEFAULT_PARALLEL, read_ids
from tests.support.corpus import corpus_dir

pytestmark = pytest.mark.integration

RATCHET = Path(__file__).resolve().parents[1] / "qtt_ratchet.txt"
#: in the sample, a file with more listed ids than this has its last one re-run too (~150 of
#: ~1,530 ids). Every id took 20 minutes of a fresh clone's run in session 32 and ~10 since
#: session 33's per-case costs (docs/conformance.md), which lets the README's command run them all.
BIG_FILE = 40


def sample(ids: list[str], big_file: int = BIG_FILE) -> list[str]:
    """The first id of each file and the last of each file with more than ``big_file``, in list
    order."""
    by_file: dict[str, list[str]] = {}
    for i in ids:
        by_file.setdefault(i.split("/", 1)[0], []).append(i)
    keep = set()
    for group in by_file.values():
        keep.update([group[0], group[-1]] if len(group) > big_file else [group[0]])
    return [i for i in ids if i in keep]


@pytest.mark.qtt_corpus
@pytest.mark.timeout(5400)  # the full list ~10 minutes on 2 cores, the sample ~1
def test_ratchet_ids_still_pass(bootstrap, spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    root = corpus_dir() / "qtt"
    listed = read_ids(RATCHET)
    # ids are compared without surrounding blanks: the list file cannot keep a test name's trailing
    # space (transform-map has one)
    cases = {c.id.strip(): c for f in case_files.collect_files([root]) for c in case_files.load_file(f)}
    unknown = [i for i in listed if i not in cases]
    assert not unknown, f"ratchet ids not in the corpus: {unknown}"
    ids = sample(listed) if os.environ.get("STREAMSQL_QTT_RATCHET") == "sample" else listed
    # 2 × cores cases at a time (each on its own engine), as `streamsql test` does: a case also
    # waits on Spark and the broker, which more cases in flight fill.
    runner = qtt.QttRunner(bootstrap, spark, work_dir=tmp_path / "qtt", timeout_s=120, parallel=DEFAULT_PARALLEL)
    started = time.monotonic()
    try:
        with qtt.runner_settings(spark):  # the settings `streamsql test` runs cases with
            results = runner.run(cases[i] for i in ids)
    finally:
        runner.close()
    failing = [f"{r.id}: {r.reason}" for r in results if r.status != "passed"]
    print(f"qtt ratchet: {len(results)} tests in {time.monotonic() - started:.0f}s; {case_results.summary_line(results)}")
    for r in case_results.retried(results):  # passed or not, a case run again is reported
        print(f"qtt ratchet: {r.id} took {r.attempts} attempts (infrastructure failure): {r.status}")
    assert not failing, f"{len(failing)} QTT test(s) stopped passing:\n" + "\n".join(failing)
