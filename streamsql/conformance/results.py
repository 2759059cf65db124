"""A case's result and what is reported over many: the summary line, the JSON report
(``streamsql test --json``) and the most common failure reasons.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class CaseResult:
    id: str
    file: str
    status: str  # passed | failed | skipped
    reason: str = ""
    duration_s: float = 0.0
    #: runs it took: more than 1 when an infrastructure failure made the runner run it again
    attempts: int = 1
    #: its inputs were produced before its queries started (see the module docstring)
    fed_first: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "file": self.file, "status": self.status, "reason": self.reason,
                "duration_s": round(self.duration_s, 3), "attempts": self.attempts, "fed_first": self.fed_first}


def summarize(results: Sequence[CaseResult]) -> tuple[int, int, int]:
    passed = sum(r.status == "passed" for r in results)
    failed = sum(r.status == "failed" for r in results)
    skipped = sum(r.status == "skipped" for r in results)
    return passed, failed, skipped


def retried(results: Sequence[CaseResult]) -> list[CaseResult]:
    """Cases run more than once after an infrastructure failure (whatever their final status)."""
    return [r for r in results if r.attempts > 1]


def summary_line(results: Sequence[CaseResult]) -> str:
    p, f, s = summarize(results)
    again = len(retried(results))
    return (f"{p} passed, {f} failed" + (f", {s} skipped" if s else "")
            + (f" ({again} run again after an infrastructure failure)" if again else ""))


def file_line(file: str, results: Sequence[CaseResult]) -> str:
    p, f, s = summarize(results)
    secs = sum(r.duration_s for r in results)
    return f"{file}: {p} passed, {f} failed, {s} skipped ({secs:.1f}s)"


def write_report(path: Path, results: Sequence[CaseResult], elapsed_s: float) -> None:
    p, f, s = summarize(results)
    files: dict[str, list[CaseResult]] = {}
    for r in results:
        files.setdefault(r.file, []).append(r)
    path.write_text(json.dumps({
        "passed": p, "failed": f, "skipped": s, "elapsed_s": round(elapsed_s, 1),
        "retried": [{"id": r.id, "attempts": r.attempts, "status": r.status} for r in retried(results)],
        "files": {name: dict(zip(("passed", "failed", "skipped"), summarize(rs))) for name, rs in files.items()},
        "top_failures": [{"category": c, "tests": n} for c, n in top_failures(results)],
        "tests": [r.to_json() for r in results]}, indent=1), encoding="utf-8")


@functools.lru_cache(maxsize=8192)  # the report is rewritten after every case: categorise each reason once
def reason_category(reason: str) -> str:
    """A short key grouping failure reasons (for the top-N table): statement-specific names and
    numbers removed."""
    r = reason
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

    counts = Counter(reason_category(r.reason) for r in results if r.status == "failed")
    return counts.most_common(n)
