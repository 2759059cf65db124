"""`streamsql --version` (issue #55)."""

from __future__ import annotations

import pytest

from streamsql import __version__
from streamsql.surfaces.cli import main


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ended:
        main(["--version"])
    assert ended.value.code == 0
    assert capsys.readouterr().out.strip() == f"streamsql {__version__}"
