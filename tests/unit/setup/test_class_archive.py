"""Building the class archive (a setup step): a failed build leaves nothing behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamsql.setup import class_archive


def test_a_failed_build_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A dump run that fails (here: it cannot start, the module path is wrong) writes nothing."""
    import subprocess

    def failing_run(*args, **kwargs):  # type: ignore[no-untyped-def]
        return subprocess.CompletedProcess(args[0], 1, stdout=b"boom")

    monkeypatch.setattr(class_archive.subprocess, "run", failing_run)
    target = tmp_path / "a.jsa"
    assert class_archive.build(target) is False
    assert list(tmp_path.iterdir()) == []
