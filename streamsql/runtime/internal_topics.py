"""The topics that belong to the server, not to its clients, and what clients may not do to them.

ksqlDB keeps a list of read-only topics (``ReservedInternalTopics``): its own
``_confluent-ksql-…`` topics (the command topic among them), the processing log, and Kafka's and
Confluent's (``ksql.readonly.topics``: ``_confluent.*``, ``__confluent.*``, ``_schemas``,
``__consumer_offsets``, ``__transaction_state``, Connect's ``connect-configs``/``-offsets``/
``-status``). It refuses INSERT VALUES ("Cannot insert values into read-only topic: X") and INSERT
INTO … SELECT ("Cannot insert into read-only topic: X") into a source over one.

streamsql goes further, because here a client reaching them reaches the host: the command topic is
replayed at every start (a forged record would run as a statement), holds every statement with its
properties, and its loss loses the catalog. So for the **internal** topics (streamsql's own
``_streamsql-…`` — command topic, changelogs —, ksqlDB's ``_confluent…``, every ``__…`` topic of
Kafka's, the registry's ``_schemas``, Connect's), a client may not declare a stream or table over
one, write into one (CREATE … AS SELECT, INSERT INTO, INSERT VALUES, ``/inserts-stream``), delete
one (DROP … DELETE TOPIC), PRINT one, or point a connector at one. The **processing log**
(``<service id>ksql_processing_log``, any service's) is read-only: reading it — a stream over it,
queries, PRINT — is what it is for (as in ksqlDB); writing into it or deleting it is refused.

Names are matched without regard to case: a broker treats ``_Schemas`` as another topic, but
nothing a client needs is called so, and matching so keeps a look-alike of the command topic out
too.
"""

from __future__ import annotations

import re

from streamsql.errors import AnalysisError

#: topics owned by the server, Kafka, the registry or Connect (ksqlDB's read-only defaults, and
#: every double-underscore topic: Kafka's own)
_INTERNAL = re.compile(r"(_streamsql-|_confluent|__).*|_schemas|connect-(configs|offsets|status|statuses)",
                       re.IGNORECASE | re.DOTALL)
#: ksqlDB's processing-log topic name (after the service id)
PROCESSING_LOG_SUFFIX = "ksql_processing_log"


def is_internal(topic: str) -> bool:
    """Whether no client may declare, write, print or delete ``topic``."""
    return _INTERNAL.fullmatch(topic.strip()) is not None


def is_read_only(topic: str) -> bool:
    """Whether no client may write into ``topic``: an internal one or a processing log."""
    return is_internal(topic) or topic.strip().lower().endswith(PROCESSING_LOG_SUFFIX)


# --- the checks statements make (ksqlDB's messages where ksqlDB has one) ---------------------------

def check_declare(topic: str, kind: str) -> None:
    """CREATE STREAM / TABLE over ``topic`` (the processing log may be read)."""
    if is_internal(topic):
        raise AnalysisError(f"Cannot create {kind.lower()} over internal topic: {topic}. The server's, "
                            f"Kafka's and the registry's own topics are not readable by clients.")


def check_insert_values(topic: str) -> None:
    """INSERT INTO … VALUES and ``/inserts-stream``."""
    if is_read_only(topic):
        raise AnalysisError(f"Cannot insert values into read-only topic: {topic}")


def check_insert(topic: str) -> None:
    """A persistent query writing ``topic``: INSERT INTO … SELECT, CREATE … AS SELECT."""
    if is_read_only(topic):
        raise AnalysisError(f"Cannot insert into read-only topic: {topic}")


def check_delete(topic: str) -> None:
    """DROP … DELETE TOPIC."""
    if is_read_only(topic):
        raise AnalysisError(f"Cannot delete read-only topic: {topic}")


def check_print(topic: str) -> None:
    """PRINT (the processing log may be printed)."""
    if is_internal(topic):
        raise AnalysisError(f"Cannot print internal topic: {topic}")


def check_connector(topics: tuple[str, ...] | list[str]) -> None:
    """A sink connector's ``topics``: it would copy an internal topic out of Kafka."""
    internal = [t for t in topics if is_internal(t)]
    if internal:
        raise AnalysisError(f"Connector topics {internal}: internal topics cannot be sunk by a connector")

