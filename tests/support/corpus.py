"""Where ksqlDB's query-validation tests (the conformance corpus, its ``qtt/`` folder of JSON
files) are for the tests that read them: ``STREAMSQL_QTT_DIR``, else ``shared/ksqldb-qtt`` beside
the repository. No other place is guessed: a clone elsewhere sets the variable, and when the
corpus is missing the test command stops at once saying so (``tests/conftest.py``), rather than
skipping the conformance tests."""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "STREAMSQL_QTT_DIR"
REPO = Path(__file__).resolve().parents[2]


class CorpusMissing(Exception):
    pass


def corpus_dir() -> Path:
    """The directory holding the corpus's ``qtt/`` folder; :class:`CorpusMissing` names
    ``STREAMSQL_QTT_DIR`` when there is none."""
    configured = os.environ.get(ENV_VAR)
    if configured:
        path = Path(configured).expanduser()
        if not (path / "qtt").is_dir():
            raise CorpusMissing(f"{ENV_VAR}={configured} holds no qtt/ folder: point it at the directory that "
                                f"holds ksqlDB's query-validation tests as qtt/*.json")
        return path
    beside = REPO.parent / "shared" / "ksqldb-qtt"
    if (beside / "qtt").is_dir():
        return beside
    raise CorpusMissing(f"ksqlDB's query-validation tests (the conformance corpus) were not found at {beside}: "
                        f"set {ENV_VAR} to the directory that holds their qtt/ folder")


def missing_reason() -> str | None:
    """Why the corpus cannot be found, or None when it can."""
    try:
        corpus_dir()
    except CorpusMissing as e:
        return str(e)
    return None
