"""The runner writes to ``sys.stdout`` as it is when it runs, not as it was when the module was
imported (a default argument bound then kept a test's capture stream, closed afterwards: a test
run in a random order failed with "I/O operation on closed file")."""

from __future__ import annotations

import importlib
import io
import sys
from types import SimpleNamespace

import pytest


def test_results_go_to_the_current_stdout(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import streamsql.surfaces.runner as runner

    at_import = io.StringIO()
    monkeypatch.setattr(sys, "stdout", at_import)
    runner = importlib.reload(runner)  # imported while another stream was sys.stdout
    monkeypatch.undo()
    at_import.close()
    engine = SimpleNamespace(session=SimpleNamespace(variables={}), catalog=SimpleNamespace(types={}))  # parsing needs only these
    assert runner.run_script(engine, "SELEKT 1;", until_idle=False) == 1  # type: ignore[arg-type]
    assert capsys.readouterr().out.startswith("Error: line 1:1: ")
