"""The session's JVM maps the class archive ``scripts/setup.sh`` built for this environment."""

from __future__ import annotations

import pytest

from streamsql.runtime import class_archive

pytestmark = pytest.mark.integration


def test_the_session_jvm_maps_the_class_archive(spark) -> None:  # type: ignore[no-untyped-def]
    from pyspark import SparkContext

    path = class_archive.archive_path()
    assert path is not None and path.is_file(), (
        f"no class archive at {path}: scripts/setup.sh builds it (python -m streamsql.setup.class_archive)")
    pid = SparkContext._gateway.proc.pid  # type: ignore[union-attr]
    with open(f"/proc/{pid}/maps") as f:
        maps = f.read()
    # mapped, not only named: the JVM accepted it (same JVM build, same jars)
    assert str(path) in maps
