"""docs/reference.md is what the code says: the page equals its generator's output, and every
property and environment variable the code reads is documented in the lists it is generated from."""

from __future__ import annotations

import re
from pathlib import Path

from streamsql.runtime.config import DEFAULT_PROPERTIES, ENVIRONMENT_DOCS, PROPERTY_DOCS
from streamsql.surfaces.reference import render

ROOT = Path(__file__).resolve().parents[3]
PROPERTY_LITERAL = re.compile(r"""["'](ksql\.[a-z0-9_.]*[a-z0-9]|streamsql\.data\.dir|streamsql\.aggregation\.[a-z]+|"""
                              r"""auto\.offset\.reset)["']""")
ENV_LITERAL = re.compile(r"""["'](STREAMSQL_[A-Z_]+)["']""")


def _sources() -> list[Path]:
    return [*(ROOT / "streamsql").rglob("*.py"), *(ROOT / "tests").rglob("*.py"), ROOT / "test.sh"]


def test_the_reference_page_is_generated_from_the_code() -> None:
    page = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    assert page == render(), "docs/reference.md is stale: python -m streamsql.surfaces.reference > docs/reference.md"


def test_every_property_the_code_reads_is_documented() -> None:
    read = {m for p in (ROOT / "streamsql").rglob("*.py") for m in PROPERTY_LITERAL.findall(p.read_text())}
    assert "ksql.streams.cache.max.bytes.buffering" in read and "auto.offset.reset" in read  # the scan works
    assert read - set(PROPERTY_DOCS) == set()
    for name, default in DEFAULT_PROPERTIES.items():
        assert PROPERTY_DOCS[name][0] == default, name


def test_every_environment_variable_is_documented() -> None:
    read = {m for p in _sources() if p.name != "test_reference.py" for m in ENV_LITERAL.findall(p.read_text())}
    read |= set(re.findall(r"\$\{?(STREAMSQL_[A-Z_]+)", (ROOT / "test.sh").read_text()))
    assert {"STREAMSQL_BOOTSTRAP_SERVERS", "STREAMSQL_QTT_DIR"} <= read  # the scan works
    families = [name[:-1] for name in ENVIRONMENT_DOCS if name.endswith("*")]  # STREAMSQL_KAFKA_*
    assert {n for n in read - set(ENVIRONMENT_DOCS) if not n.startswith(tuple(families))} == set()
