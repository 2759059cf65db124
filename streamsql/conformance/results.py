"""A case's result and what is reported over many: the summary line, the JSON report
(``streamsql test --json``) and the most common failure reasons.

A case runs once. One the machine could not run (a Spark Python worker that did not connect back
in time on an overloaded machine) gets its own status, ``infrastructure``: counted apart in the
summary, never run again to turn it into a pass, and a failure in every figure (it is not passed).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

PASSED, FAILED, INFRASTRUCTURE, SKIPPED = "passed", "failed", "infrastructure", "skipped"

#: reasons that are the machine's, not the engine's: Spark gives a new Python worker 10 s to
#: connect back (PythonWorkerFactory), which a loaded machine misses, and a driver socket that
#: could not be opened; the query dies before the case's SQL is judged
INFRASTRUCTURE_FAILURE = re.compile(r"Python worker failed to connect back|CANNOT_OPEN_SOCKET")


@dataclass
class CaseResult:
    id: str
    file: str
    status: str  # PASSED | FAILED | INFRASTRUCTURE | SKIPPED
    reason: str = ""
    duration_s: float = 0.0
    #: its inputs were produced before its queries started (see the module docstring)
    fed_first: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "file": self.file, "status": self.status, "reason": self.reason,
                "duration_s": round(self.duration_s, 3), "fed_first": self.fed_first}


def judged(result: CaseResult) -> CaseResult:
    """``result`` with status ``infrastructure`` when it failed for a reason of the machine's
    (:data:`INFRASTRUCTURE_FAILURE`); the one place a failure is told apart, in every runner."""
    if result.status == FAILED and INFRASTRUCTURE_FAILURE.search(result.reason):
        result.status = INFRASTRUCTURE
    return result


class Counts(NamedTuple):
    passed: int
    failed: int
    infrastructure: int
    skipped: int

    @property
    def not_passed(self) -> int:
        """Failures as a figure counts them: an infrastructure failure is one."""
        return self.failed + self.infrastructure


def summarize(results: Sequence[CaseResult]) -> Counts:
    return Counts(*(sum(r.status == s for r in results) for s in (PASSED, FAILED, INFRASTRUCTURE, SKIPPED)))


def summary_line(results: Sequence[CaseResult]) -> str:
    c = summarize(results)
    return (f"{c.passed} passed, {c.failed} failed"
            + (f", {c.infrastructure} infrastructure failure{'s' if c.infrastructure > 1 else ''}"
               if c.infrastructure else "")
            + (f", {c.skipped} skipped" if c.skipped else ""))


def file_line(file: str, results: Sequence[CaseResult]) -> str:
    c = summarize(results)
    secs = sum(r.duration_s for r in results)
    infra = f", {c.infrastructure} infrastructure" if c.infrastructure else ""
    return f"{file}: {c.passed} passed, {c.failed} failed{infra}, {c.skipped} skipped ({secs:.1f}s)"


def write_report(path: Path, results: Sequence[CaseResult], elapsed_s: float) -> None:
    c = summarize(results)
    files: dict[str, list[CaseResult]] = {}
    for r in results:
        files.setdefault(r.file, []).append(r)
    path.write_text(json.dumps({
        **c._asdict(), "elapsed_s": round(elapsed_s, 1),
        "files": {name: summarize(rs)._asdict() for name, rs in files.items()},
        "top_failures": [{"category": c, "tests": n} for c, n in top_failures(results)],
        "tests": [r.to_json() for r in results]}, indent=1), encoding="utf-8")


@functools.lru_cache(maxsize=8192)  # the report is rewritten after every case: categorise each reason once
def reason_category(reason: str) -> str:
    """A short key grouping failure reasons (for the top-N table): statement-specific names and
    numbers removed."""
    r = reason
    if INFRASTRUCTURE_FAILURE.search(r):
        return "infrastructure failure (the machine's, not the engine's): counted as a failure"
    if r.startswith("only timestamps differ: records expected at timestamp 0"):
        return "output timestamp: expected 0, got the wall-clock time (sink writes timestamp 0 as 'now')"
    m = re.search(r"Not supported yet: ([A-Za-z_ '\-]+?)(?: \(|\(|:|$|\.)", r)
    if m:
        return f"Not supported yet: {m.group(1).strip()}"
    if r.startswith("expected exception message containing"):
        return "expected-exception test: rejected, but with a different message"
    if r.startswith("expected exception") and "statements were accepted" in r:
        return "expected-exception test: statements accepted (no error raised)"
    if r.startswith("Topic '") or r.startswith("output topic"):
        return "wrong output records (content differs)"
    if r.startswith("crash: "):
        return "crash: " + r.split(":")[1].strip() + " escaped the engine"
    if r.startswith("timeout"):
        return "timeout"
    r = re.sub(r"^statement (?:\d+|at line \d+) rejected: ", "rejected: ", r)
    if "Can't find any functions with the name" in r:
        return "rejected: unknown function (Can't find any functions with the name ...)"
    if r.startswith("rejected: Unsupported expression"):
        return "rejected: Unsupported expression (e.g. ARRAY[...] constructor, IS [NOT] DISTINCT FROM)"
    r = re.sub(r"'[^']*'", "'…'", r)
    r = re.sub(r"`[^`]*`", "`…`", r)
    r = re.sub(r"\b\d+\b", "N", r)
    return r[:120]


def top_failures(results: Sequence[CaseResult], n: int = 10) -> list[tuple[str, int]]:
    """The ``n`` most common failure categories (:func:`reason_category`) with their counts."""
    from collections import Counter

    counts = Counter(reason_category(r.reason) for r in results if r.status in (FAILED, INFRASTRUCTURE))
    return counts.most_common(n)
