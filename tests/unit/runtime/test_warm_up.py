"""``STREAMSQL_WARM_UP`` switches the session's warm-up queries off."""

from __future__ import annotations

import pytest

from streamsql.runtime import warm_up


@pytest.mark.parametrize(("value", "on"), [(None, True), ("1", True), ("0", False), ("false", False),
                                           ("OFF", False), ("no", False), ("yes", True)])
def test_the_variable_turns_the_warm_up_off(monkeypatch, value: str | None, on: bool) -> None:  # type: ignore[no-untyped-def]
    if value is None:
        monkeypatch.delenv("STREAMSQL_WARM_UP", raising=False)
    else:
        monkeypatch.setenv("STREAMSQL_WARM_UP", value)
    assert warm_up.enabled() is on
