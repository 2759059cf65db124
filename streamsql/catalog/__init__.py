"""The catalog of streams, tables, types and queries, and the command log it is rebuilt from."""

from streamsql.catalog.catalog import Catalog, QueryInfo, Source
from streamsql.catalog.commands import Command, CommandLog, FileCommandLog

__all__ = ["Catalog", "Command", "CommandLog", "FileCommandLog", "QueryInfo", "Source"]
