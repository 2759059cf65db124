"""The sink connector classes streamsql runs, by Connect's class names and short aliases, and a
connector statement's configuration parsed with its class. Each connector module declares its
class (``CONNECTOR``) and parses its own keys with ``config.py``'s helpers; the table of them is
here, so the configuration module names none of them (a new connector: its module, and one line
below).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streamsql.connectors import elasticsearch, file, s3
from streamsql.connectors.config import ConnectorClass, ConnectorError, check_sink

_CLASSES: dict[str, ConnectorClass] = {
    name: cls for cls in (elasticsearch.CONNECTOR, s3.CONNECTOR, file.CONNECTOR) for name in (cls.name, *cls.aliases)}


def connector_class(name: str | None) -> ConnectorClass:
    if not name:
        raise ConnectorError("Connector config is missing the required key 'connector.class'")
    found = _CLASSES.get(name)
    if found is None:
        known = sorted({c.name for c in _CLASSES.values()})
        raise ConnectorError(f"Failed to find any class that implements Connector and which name matches {name}, "
                             f"available connectors are: {', '.join(known)}")
    return found


def parse_sink(name: str, kind: str, config: Mapping[str, str]) -> tuple[ConnectorClass, Any]:
    """The connector class and its typed configuration, or a ConnectorError naming the key."""
    return check_sink(connector_class(config.get("connector.class")), name, kind, config)
