"""A client's session: the properties SET and the variables DEFINE have given it.

ksqlDB keeps these per CLI session, and a REST request carries its own (``streamsProperties``,
``sessionVariables``). The engine runs every statement under one session: its own (the one the
CLI, the shell and the runner use), or one a caller passes (the server, one per request; a
replayed command, with the properties it was logged with). A statement reads its properties
through ``Engine.prop``, which looks at the session it runs under, then the engine's
configuration, then ksqlDB's defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Session:
    """Property overrides (``SET``) and variables (``DEFINE``) of one client."""

    properties: dict[str, str] = field(default_factory=dict)
    variables: dict[str, str] = field(default_factory=dict)
