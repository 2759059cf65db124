"""The words completion offers, defined once for every surface that completes: the shell's
prompt (embedded or remote) and the server's web console.

:func:`engine_vocabulary` reads them from an engine; ``streamsql server`` answers them at
``GET /vocabulary`` (:func:`to_json`), which the remote shell and the console both read, so a name
the engine knows is offered the same way everywhere. The dialect's own words (keywords, types,
SHOW targets) travel with them, so the console does not keep a second list.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from streamsql.sql.parser import _SHOW_TARGETS as SHOW_LISTS

if TYPE_CHECKING:
    from streamsql.runtime.engine import Engine

KEYWORDS = sorted(set("""
    SELECT FROM WHERE GROUP BY HAVING PARTITION EMIT CHANGES FINAL LIMIT AS AND OR NOT NULL IS IN LIKE
    BETWEEN CASE WHEN THEN ELSE END CAST TRUE FALSE DISTINCT WINDOW TUMBLING HOPPING SESSION SIZE ADVANCE
    GRACE PERIOD RETENTION JOIN INNER LEFT RIGHT FULL OUTER ON WITHIN CREATE OR REPLACE SOURCE STREAM
    STREAMS TABLE TABLES TYPE TYPES WITH INSERT INTO VALUES DROP IF EXISTS DELETE TOPIC TOPICS SHOW LIST
    DESCRIBE EXTENDED EXPLAIN PRINT BEGINNING INTERVAL TERMINATE ALL SET UNSET DEFINE UNDEFINE QUERIES
    PROPERTIES FUNCTIONS FUNCTION VARIABLES KEY PRIMARY HEADERS HEADER ROWTIME ROWPARTITION ROWOFFSET
    WINDOWSTART WINDOWEND MILLISECOND MILLISECONDS SECOND SECONDS MINUTE MINUTES HOUR HOURS DAY DAYS
    RUN SCRIPT ESCAPE STRUCT ARRAY MAP ALTER ADD COLUMN ASSERT SCHEMA SUBJECT ID TIMEOUT PAUSE RESUME
    CONNECTOR CONNECTORS SINK
""".split()))
TYPES = sorted(set("""
    BOOLEAN INT INTEGER BIGINT DOUBLE DECIMAL VARCHAR STRING BYTES DATE TIME TIMESTAMP
""".split()))
#: what SHOW and LIST name: the parser's list
SHOW_TARGETS = list(SHOW_LISTS)


@dataclass
class Vocabulary:
    """The names completion offers: sources (name -> STREAM/TABLE) with their columns, query ids,
    functions, properties and variables."""

    sources: dict[str, str] = field(default_factory=dict)
    columns: dict[str, list[str]] = field(default_factory=dict)
    queries: list[str] = field(default_factory=list)
    functions: list[str] = field(default_factory=list)
    properties: list[str] = field(default_factory=list)
    variables: list[str] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)


def engine_vocabulary(engine: Engine) -> Vocabulary:
    """What ``engine`` knows now: its catalog's sources, columns, queries and topics, the
    functions, the properties (defaults and the session's) and the session's variables."""
    from streamsql.runtime.config import DEFAULT_PROPERTIES

    catalog = engine.catalog
    sources = list(catalog.sources.values())  # a copy: another request may change the catalog
    return Vocabulary({s.name: ("TABLE" if s.is_table else "STREAM") for s in sources},
                      {s.name: [c.name for c in s.columns] for s in sources}, sorted(catalog.queries),
                      sorted({f.name for f in engine.functions.all()}),
                      sorted(set(DEFAULT_PROPERTIES) | set(engine.session.properties)),
                      sorted(engine.session.variables), sorted({s.topic for s in sources}))


def to_json(vocab: Vocabulary) -> dict[str, Any]:
    """``GET /vocabulary``'s body: the vocabulary and the dialect's words."""
    return {**asdict(vocab), "keywords": KEYWORDS, "types": TYPES, "showTargets": SHOW_TARGETS}


def from_json(body: Any) -> Vocabulary:
    """A :class:`Vocabulary` from ``GET /vocabulary``'s body (fields it lacks stay empty)."""
    if not isinstance(body, dict):
        return Vocabulary()

    def names(key: str) -> list[str]:
        value = body.get(key)
        return [str(v) for v in value] if isinstance(value, list) else []

    sources = body.get("sources")
    columns = body.get("columns")
    return Vocabulary({str(k): str(v) for k, v in sources.items()} if isinstance(sources, dict) else {},
                      {str(k): [str(c) for c in v] for k, v in columns.items() if isinstance(v, list)}
                      if isinstance(columns, dict) else {},
                      names("queries"), names("functions"), names("properties"), names("variables"), names("topics"))
