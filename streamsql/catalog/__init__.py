"""The catalog of streams, tables, types, queries and connectors, and the command log it is rebuilt from."""

from streamsql.catalog.catalog import Catalog, ConnectorInfo, QueryInfo, Source
from streamsql.catalog.commands import Command, CommandLog, FileCommandLog

__all__ = ["Catalog", "Command", "CommandLog", "ConnectorInfo", "FileCommandLog", "QueryInfo", "Source"]
