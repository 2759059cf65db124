"""The conformance ratchet: QTT test ids listed in ``tests/qtt_ratchet.txt`` must keep passing.

The suite re-runs a sample that touches every listed file (each file's first id, and its last
for a file with more than BIG_FILE ids: :func:`sample`), which keeps the README's test command
within its 30-minute budget; ``STREAMSQL_QTT_RATCHET=third`` re-runs a deterministic third (each
file's first and last id and every third between: :func:`stratified`), ``=full`` every id (~12
minutes on 2 cores; run before a change to the engine's semantics lands). Standalone:
``streamsql test <corpus>/qtt --ids tests/qtt_ratchet.txt``. Runs in-process on the session's
broker and SparkSession (one engine per case). A test that stops passing fails this test, named
with its reason; the summary line is written past pytest's capture, so CI's output shows it. To
add newly passing tests, run ``streamsql test <corpus>/qtt --json /tmp/qtt.json`` and append the
passed ids (docs/conformance.md).
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
#: in the sample, a file with more listed ids than this has its last one re-run too (~160 of
#: ~1,530 ids)
BIG_FILE = 40
#: the third re-runs every STRIDE-th id of a file besides its first and last
STRIDE = 3


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


def stratified(ids: list[str], stride: int = STRIDE) -> list[str]:
    """Each file's first and last id and every ``stride``-th between, in list order: every file and
    about 1/``stride`` of each file's cases, the same ids on every run."""
    by_file: dict[str, list[str]] = {}
    for i in ids:
        by_file.setdefault(i.split("/", 1)[0], []).append(i)
    keep = set()
    for group in by_file.values():
        keep.update(group[::stride])
        keep.add(group[-1])
    return [i for i in ids if i in keep]


def chosen(listed: list[str], mode: str | None) -> list[str]:
    """The ids a run re-runs for ``STREAMSQL_QTT_RATCHET`` = ``mode`` (unset: the sample)."""
    if mode == "full":
        return listed
    if mode in (None, "", "sample"):
        return sample(listed)
    if mode == "third":
        return stratified(listed)
    raise ValueError(f"STREAMSQL_QTT_RATCHET={mode!r}: expected full, third or sample")


@pytest.mark.qtt_corpus
@pytest.mark.timeout(5400)  # on 2 cores: the full list ~12 minutes, the third ~5-9, the sample ~2
def test_ratchet_ids_still_pass(bootstrap, spark, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    root = corpus_dir() / "qtt"
    listed = read_ids(RATCHET)
    # ids are compared without surrounding blanks: the list file cannot keep a test name's trailing
    # space (transform-map has one)
    cases = {c.id.strip(): c for f in case_files.collect_files([root]) for c in case_files.load_file(f)}
    unknown = [i for i in listed if i not in cases]
    assert not unknown, f"ratchet ids not in the corpus: {unknown}"
    assert len(set(listed)) == len(listed), "the ratchet lists an id twice"
    ids = chosen(listed, os.environ.get("STREAMSQL_QTT_RATCHET"))
    # 2 × cores cases at a time (each on its own engine), as `streamsql test` does: a case also
    # waits on Spark and the broker, which more cases in flight fill.
    runner = qtt.QttRunner(bootstrap, spark, work_dir=tmp_path / "qtt", timeout_s=120, parallel=DEFAULT_PARALLEL)
    started = time.monotonic()
    try:
        with qtt.runner_settings(spark):  # the settings `streamsql test` runs cases with
            results = runner.run(cases[i] for i in ids)
    finally:
        runner.close()
    failing = [f"{r.id} ({r.status}): {r.reason}" for r in results if r.status != "passed"]
    report = [f"qtt ratchet: {len(results)} of {len(listed)} listed ids in {time.monotonic() - started:.0f}s; "
              f"{case_results.summary_line(results)}"]
    with capsys.disabled():  # past pytest's capture: CI's output shows it, passed or not
        print("\n" + "\n".join(report), flush=True)
    assert not failing, f"{len(failing)} QTT test(s) stopped passing:\n" + "\n".join(failing)
