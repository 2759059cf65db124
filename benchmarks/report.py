"""The results table, the JSON rows and the chart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: the JSON row shape (null where not measured)
ROW_KEYS = ("workload", "system", "records", "seconds", "records_per_s", "peak_rss_mb", "peak_pss_mb", "p50_ms",
            "p99_ms", "outputs")

#: the streamsql rows compared with the ceilings and the peer (each ``-steady`` row with the
#: peer's ``-steady`` row)
STREAMSQL_ROWS = ("streamsql", "streamsql-nocache", "streamsql-cold", "streamsql-steady", "streamsql-nocache-steady",
                  "streamsql-cold-steady")


def row(workload: str, system: str, records: int | None = None, seconds: float | None = None,
        peak_rss_mb: float | None = None, p50_ms: float | None = None, p99_ms: float | None = None,
        outputs: int | None = None, peak_pss_mb: float | None = None) -> dict[str, Any]:
    """One result row; ``outputs`` is the number of records the system had written to the output
    topic when it was done (null for the ceilings, which write nothing, and the steady rows);
    ``peak_pss_mb`` the process tree's peak PSS (shared pages divided among their sharers)."""
    rps = records / seconds if records and seconds else None
    return {"workload": workload, "system": system, "records": records, "outputs": outputs,
            "seconds": round(seconds, 3) if seconds is not None else None,
            "records_per_s": round(rps, 1) if rps is not None else None,
            "peak_rss_mb": round(peak_rss_mb, 1) if peak_rss_mb is not None else None,
            "peak_pss_mb": round(peak_pss_mb, 1) if peak_pss_mb is not None else None,
            "p50_ms": round(p50_ms, 1) if p50_ms is not None else None,
            "p99_ms": round(p99_ms, 1) if p99_ms is not None else None}


def _fmt(v: Any, spec: str = ",.0f") -> str:
    return "—" if v is None else format(v, spec)


def table(rows: list[dict[str, Any]], cores: int) -> str:
    head = f"{'workload':<8} {'system':<24} {'records':>10} {'seconds':>8} {'records/s':>11} {'per core':>10} " \
           f"{'peak RSS MB':>11} {'peak PSS MB':>11} {'p50 ms':>7} {'p99 ms':>7} {'outputs':>10}"
    lines = [head, "-" * len(head)]
    for r in rows:
        rps = r["records_per_s"]
        lines.append(f"{r['workload']:<8} {r['system']:<24} {_fmt(r['records']):>10} {_fmt(r['seconds'], '.2f'):>8} "
                     f"{_fmt(rps):>11} {_fmt(rps / cores if rps else None):>10} {_fmt(r['peak_rss_mb']):>11} "
                     f"{_fmt(r.get('peak_pss_mb')):>11} {_fmt(r['p50_ms']):>7} {_fmt(r['p99_ms']):>7} "
                     f"{_fmt(r.get('outputs')):>10}")
    return "\n".join(lines)


def ratios(rows: list[dict[str, Any]]) -> str:
    """streamsql throughput (with and without the record cache) over each ceiling and over the
    peer, per workload."""
    out = []
    for wl in dict.fromkeys(r["workload"] for r in rows):
        by = {r["system"]: r["records_per_s"] for r in rows if r["workload"] == wl}
        for mine in STREAMSQL_ROWS:
            if not by.get(mine):
                continue
            peer = "quixstreams-steady" if mine.endswith("-steady") else "quixstreams"
            parts = [f"{mine}/{other} = {by[mine] / by[other]:.2f}"
                     for other in ("ceiling-raw", "ceiling-json", peer) if by.get(other)]
            if parts:
                out.append(f"{wl}: " + ", ".join(parts))
    return "\n".join(out)


def twin_ratios(rows: list[dict[str, Any]], twins: dict[str, str]) -> str:
    """Per workload measured against a twin in the same run (the TABLE filter against the same
    filter over a STREAM): each streamsql row's records/s over the twin's same row."""
    out = []
    for wl, twin in twins.items():
        mine = {r["system"]: r["records_per_s"] for r in rows if r["workload"] == wl}
        theirs = {r["system"]: r["records_per_s"] for r in rows if r["workload"] == twin}
        parts = [f"{system} {mine[system] / theirs[system]:.2f}" for system in STREAMSQL_ROWS
                 if mine.get(system) and theirs.get(system)]
        if parts:
            out.append(f"{wl}/{twin} records/s: " + ", ".join(parts))
    return "\n".join(out)


def nexmark_per_core(rows: list[dict[str, Any]], flink: dict[str, int], cores: int) -> str:
    """Per Nexmark query: streamsql's end-to-end events/s per core (and steady, when measured)
    beside Flink's published per-core figure, and their ratio."""
    out = []
    for wl, reference in flink.items():
        by = {r["system"]: r["records_per_s"] for r in rows if r["workload"] == wl and r["records_per_s"]}
        for system in ("streamsql", "streamsql-steady"):
            if by.get(system):
                per_core = by[system] / cores
                out.append(f"{wl}: {system} {per_core:,.0f}/core, Flink {reference:,}/core "
                           f"({per_core / reference:.2f}×)")
    return "\n".join(out)


def write_json(path: Path, rows: list[dict[str, Any]], meta: dict[str, Any]) -> tuple[Path, Path | None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows, indent=2) + "\n")
    path.with_name(path.stem + ".meta.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
    return path, chart(path.with_suffix(".png"), rows, meta)


def chart(path: Path, rows: list[dict[str, Any]], meta: dict[str, Any]) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    workloads = list(dict.fromkeys(r["workload"] for r in rows))
    fig, axes = plt.subplots(len(workloads), 2, figsize=(11, 3.6 * len(workloads)), squeeze=False)
    for i, wl in enumerate(workloads):
        rs = [r for r in rows if r["workload"] == wl]
        names = [r["system"] for r in rs]
        colors = ["#d62728" if n.startswith("streamsql") else "#7f7f7f" if n.startswith("ceiling") else "#1f77b4"
                  for n in names]
        tp = [(r["records_per_s"] or 0) / 1000 for r in rs]
        ax = axes[i][0]
        bars = ax.barh(names, tp, color=colors)
        ax.bar_label(bars, labels=[f"{v:,.0f}k" if v else "n/a" for v in tp], padding=3, fontsize=8)
        ax.set_xlabel("thousand records/s (higher is better)")
        ax.set_title(f"{wl}: throughput")
        ax.invert_yaxis()
        ax.set_xlim(0, max(tp + [1]) * 1.25)
        mem = [r["peak_rss_mb"] or 0 for r in rs]
        ax = axes[i][1]
        bars = ax.barh(names, mem, color=colors)
        ax.bar_label(bars, labels=[f"{v:,.0f}" if v else "n/a" for v in mem], padding=3, fontsize=8)
        ax.set_xlabel("peak RSS of the process tree, MB (lower is better)")
        ax.set_title(f"{wl}: memory")
        ax.invert_yaxis()
        ax.set_xlim(0, max(mem + [1]) * 1.25)
    load = meta.get("loadavg_start")
    fig.suptitle(f"streamsql benchmarks, {meta.get('records', '?'):,} records, {meta.get('cores')} cores, "
                 f"load avg at start {load}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def finish_drill(report: dict[str, Any], failures: list[str], json_path: Path | None,
                 show: bool = True) -> int:
    """A reliability drill's end: its figures (with ``failures``) printed as JSON when ``show``
    and written to ``json_path`` if given, each failure on stderr; the exit code (1 on any)."""
    import sys

    report["failures"] = failures
    if show:
        print(json.dumps(report, indent=2))
    if json_path:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(report, indent=2) + "\n")
    for failure in failures:
        print(f"FAILED {failure}", file=sys.stderr)
    return 1 if failures else 0
