"""Where connectors may write: the operator's directory for files, the operator's list of URLs.

A connector runs inside the server with the server's rights, so its configuration is a client
reaching the host: a FileStream sink's ``file`` (or an S3 sink's ``store.url = file:///…``) could
write anywhere the server can — into the seed functions the server imports at start, which runs
the client's code —, and a URL makes the server send records to any address.

- Files go under ``streamsql.connect.file.dir`` (default ``<data dir>/files``): the path is
  resolved (``..``, symlinks — an existing symlink pointing out of it is an escape) and refused
  unless it lies inside. Whatever the setting, nothing is written inside a directory the engine
  loads code from: ``ksql.extension.dir``, the seed functions, the streamsql package, the Python
  environment (``sys.prefix``). The executor checks the resolved path again when it writes and
  opens the file without following a final symlink, so a link made after the statement does not
  escape either.
- URLs (Elasticsearch ``connection.url``, S3 ``store.url``, a converter's ``schema.registry.url``)
  are checked against ``streamsql.connect.url.allowlist`` when it is set: comma-separated entries,
  each a URL prefix (``https://es.internal:9200/``; matched at a path boundary, scheme and host
  without regard to case, credentials in the URL ignored) or a ``host`` / ``host:port``.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from streamsql.connectors.config import ConnectorError, url_without_password

#: the server property naming the directory a FileStream sink connector's ``file`` must be under
#: (default ``<data dir>/files``; the operator's: ``runtime/property_policy.py``)
CONNECT_FILE_DIR_PROPERTY = "streamsql.connect.file.dir"
#: the server property listing the URL prefixes and ``host[:port]`` entries a connector may send
#: to (unset: any)
CONNECT_URL_ALLOWLIST_PROPERTY = "streamsql.connect.url.allowlist"
_DEFAULT_PORTS = {"http": 80, "https": 443}


def real(path: str | Path) -> Path:
    """``path`` made absolute with every ``..`` and existing symlink resolved."""
    return Path(os.path.realpath(os.path.expanduser(str(path))))


def inside(path: Path, directory: Path) -> bool:
    return path == directory or directory in path.parents


def code_directories(extension_dir: str | None) -> tuple[Path, ...]:
    """The directories the engine loads code from: nothing may be written under them."""
    from streamsql.seeds import FUNCTIONS_DIR

    package = Path(__file__).parent.parent  # streamsql itself
    dirs = [package, Path(FUNCTIONS_DIR), Path(sys.prefix), Path(sys.base_prefix)]
    if extension_dir:
        dirs.append(Path(extension_dir))
    # a Python installed at the root (prefix ``/``) would make every path code's: it is left out
    return tuple(d for d in dict.fromkeys(real(d) for d in dirs) if d != Path(d.anchor))


@dataclass(frozen=True)
class ConnectorPolicy:
    file_dir: Path
    code_dirs: tuple[Path, ...]
    #: URL prefixes and host[:port] entries; empty: any URL
    url_allowlist: tuple[str, ...] = ()

    @classmethod
    def from_properties(cls, properties: dict[str, str], data_dir: Path,
                        extension_dir: str | None) -> ConnectorPolicy:
        """The policy of an engine configured with ``properties`` (the config file's)."""
        file_dir = properties.get(CONNECT_FILE_DIR_PROPERTY) or str(Path(data_dir) / "files")
        allow = tuple(e.strip() for e in (properties.get(CONNECT_URL_ALLOWLIST_PROPERTY) or "").split(",")
                      if e.strip())
        return cls(real(file_dir), code_directories(extension_dir), allow)

    # --- files ---------------------------------------------------------------------------------

    def check_file(self, key: str, path: str) -> Path:
        """The resolved path of a file a connector will write, or a ConnectorError naming the key."""
        resolved = real(path)
        for code in self.code_dirs:
            if inside(resolved, code) or inside(self.file_dir, code):
                raise ConnectorError(f"Invalid value {path} for configuration {key}: connectors may not write "
                                     f"into {code}, a directory the server loads code from")
        if not inside(resolved, self.file_dir):
            raise ConnectorError(f"Invalid value {path} for configuration {key}: connectors write files under "
                                 f"{self.file_dir} only (the server's {CONNECT_FILE_DIR_PROPERTY})")
        return resolved

    # --- URLs ----------------------------------------------------------------------------------

    def check_url(self, key: str, url: str) -> None:
        if not self.url_allowlist:
            return
        if not any(_matches(url, entry) for entry in self.url_allowlist):
            raise ConnectorError(f"Invalid value {url_without_password(url)} for configuration {key}: the server "
                                 f"allows connectors to reach only {', '.join(self.url_allowlist)} (its "
                                 f"{CONNECT_URL_ALLOWLIST_PROPERTY})")

    def check_urls(self, pairs: Iterable[tuple[str, str | None]]) -> None:
        for key, url in pairs:
            if url:
                for one in url.split(","):
                    if one.strip():
                        self.check_url(key, one.strip())

    # --- a connector's whole configuration --------------------------------------------------

    def apply(self, config: Any) -> Any:
        """``config`` (a sink's typed configuration) checked; a file sink's path resolved and its
        directory recorded so the executor checks it again when it writes."""
        from streamsql.connectors.elasticsearch import ElasticsearchSinkConfig
        from streamsql.connectors.file import FileSinkConfig
        from streamsql.connectors.s3 import S3SinkConfig

        converters = [("key.converter.schema.registry.url", config.key_converter.registry_url),
                      ("value.converter.schema.registry.url", config.value_converter.registry_url)]
        self.check_urls(converters)
        if isinstance(config, FileSinkConfig):
            resolved = self.check_file("file", config.file)
            return dataclasses.replace(config, file=str(resolved), root=str(self.file_dir))
        if isinstance(config, ElasticsearchSinkConfig):
            self.check_urls(("connection.url", u) for u in config.urls)
        if isinstance(config, S3SinkConfig) and config.store_url:
            parts = urlsplit(config.store_url)
            if parts.scheme.lower() == "file":
                self.check_file("store.url", parts.path or "/")
            else:
                self.check_url("store.url", config.store_url)
        return config


def _host_port(url: str) -> tuple[str, int | None, str, str]:
    """(host, port, scheme, path) of a URL, lower-cased host and scheme, the scheme's default port."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = -1  # an unparsable port matches nothing
    if port is None:
        port = _DEFAULT_PORTS.get(scheme)
    return (parts.hostname or "").lower(), port, scheme, parts.path or "/"


def _matches(url: str, entry: str) -> bool:
    """Whether ``url`` is allowed by one allow-list ``entry`` (a URL prefix or host[:port])."""
    host, port, scheme, path = _host_port(url)
    if not host:
        return False
    if "://" in entry:
        e_host, e_port, e_scheme, e_path = _host_port(entry)
        if (scheme, host, port) != (e_scheme, e_host, e_port):
            return False
        prefix = e_path.rstrip("/")
        return path.rstrip("/") == prefix or path.startswith(prefix + "/")
    name, _, wanted_port = entry.strip().lower().rpartition(":") if ":" in entry else (entry.strip().lower(), "", "")
    if name != host:
        return False
    return not wanted_port or (wanted_port.isdigit() and int(wanted_port) == port)
