"""The seed functions and pipelines shipped inside the package, so a wheel installed anywhere has
them: ``functions/`` (SPLIT_WORDS, HEAVY_HITTERS, GZIP and the rest, loaded into every engine's
function catalog) and ``pipelines/`` (the seed ``.sql`` files that ``streamsql demo`` and
``streamsql seeds`` use). A checkout also reaches them as ``udfs/`` and ``queries/`` at its root
(links to these directories)."""

from __future__ import annotations

from pathlib import Path

FUNCTIONS_DIR = Path(__file__).resolve().parent / "functions"
PIPELINES_DIR = Path(__file__).resolve().parent / "pipelines"


def pipelines() -> dict[str, Path]:
    """Each seed pipeline by name (its file name without ``.sql``)."""
    return {p.stem: p for p in sorted(PIPELINES_DIR.glob("*.sql"))}
