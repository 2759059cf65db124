"""Summarise a ``streamsql test --json`` report as Markdown: pass rate per file and overall, and
the most common failure reasons (what docs/conformance.md and closing notes quote).

    python -m streamsql.conformance.report /tmp/qtt.json [--top 10]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from streamsql.conformance.results import CaseResult, summarize, top_failures


def _rate(passed: int, total: int) -> str:
    return f"{100 * passed / total:.0f}%" if total else "-"


def markdown(report: dict[str, Any], top: int = 10) -> str:
    results = [CaseResult(t["id"], t["file"], t["status"], t.get("reason", ""), t.get("duration_s", 0.0))
               for t in report["tests"]]
    files: dict[str, list[CaseResult]] = {}
    for r in results:
        files.setdefault(r.file, []).append(r)
    c = summarize(results)
    passed, skipped = c.passed, c.skipped
    run = len(results) - skipped
    # an infrastructure failure is not a pass: it is in every rate's denominator, and a failure
    lines = [f"**{passed} of {len(results)} cases passed ({_rate(passed, len(results))}; "
             f"{_rate(passed, run)} of the {run} not disabled), {c.not_passed} failed"
             + (f" ({c.infrastructure} of them infrastructure failures)" if c.infrastructure else "")
             + f", {skipped} skipped; {report.get('elapsed_s', 0) / 60:.1f} min.**", "",
             "| file | passed / cases | rate |", "|---|---|---|"]
    for name in sorted(files):
        rs = files[name]
        p = sum(r.status == "passed" for r in rs)
        lines.append(f"| {name.removesuffix('.json')} | {p}/{len(rs)} | {_rate(p, len(rs))} |")
    lines += ["", f"Top {top} failure reasons (tests per category):", "",
              "| tests | category |", "|---|---|"]
    lines += [f"| {n} | {c.replace('|', '/')} |" for c, n in top_failures(results, top)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("report", help="a report written by streamsql test --json")
    p.add_argument("--top", type=int, default=10)
    args = p.parse_args(argv)
    try:
        text = markdown(json.loads(Path(args.report).read_text(encoding="utf-8")), args.top)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"Error: {args.report} is not a report written by streamsql test --json ({type(e).__name__}: {e})",
              file=sys.stderr)
        return 2
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
