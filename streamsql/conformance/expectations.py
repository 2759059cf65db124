"""What a case expects besides output records: an ``expectedException`` (its class and message)
and ``post`` conditions on the catalog (sources, their schemas and formats).
"""

from __future__ import annotations

import re
from typing import Any

#: Where streamsql words the same error differently from ksqlDB: (pattern on ksqlDB's expected
#: text, replacement giving our wording, why). An expected message also matches when its rewritten
#: form is in our message. Documented in docs/conformance.md; add only same-error rewordings.
MESSAGE_REWRITES: list[tuple[str, str, str]] = [
    (r"Line: (\d+), Col: (\d+): ", r"line \1:\2: ", "location prefix: ksqlDB 'Line: 1, Col: 21: ', ours 'line 1:21: '"),
    (r"^Error in (?:WHERE|HAVING) expression: ", "", "ours names the failing comparison without the clause prefix"),
    (r"^Invalid (?:Predicate|Select): ", "", "ours names the failing expression without the clause prefix"),
    (r"\b(?:Stream|Table) (\S+) does not exist", r"Source \1 does not exist", "DROP of a missing source"),
]


#: ksqlDB's exception classes an ``expectedException`` names, each with its superclass (read from
#: ksqlDB's source: ParseFailedException extends KsqlStatementException extends KsqlException,
#: which extends Kafka Streams' StreamsException). The harness checks ``instanceOf(type)``.
KSQL_SUPERCLASS = {
    "io.confluent.ksql.parser.exception.ParseFailedException": "io.confluent.ksql.util.KsqlStatementException",
    "io.confluent.ksql.util.KsqlStatementException": "io.confluent.ksql.util.KsqlException",
    "io.confluent.ksql.util.KsqlException": "org.apache.kafka.streams.errors.StreamsException",
    "org.apache.kafka.streams.errors.StreamsException": "org.apache.kafka.common.KafkaException",
    "org.apache.kafka.common.KafkaException": "java.lang.RuntimeException",
    "java.lang.RuntimeException": "java.lang.Exception",
    "java.lang.Exception": "java.lang.Throwable",
}


def ksql_class(error: BaseException, rejected_statement: bool) -> str:
    """The class ksqlDB's harness catches where we raised ``error``: the one place our errors map
    to ksqlDB's hierarchy. A statement that fails to parse or to be built (ksqlDB's
    DefaultKsqlParser: "Failed to prepare statement: ...", e.g. an invalid WITH property) is a
    ParseFailedException, any other rejected statement a KsqlStatementException (ksqlDB's engine
    wraps every statement's failure in one); a failure while records are processed reaches the
    harness from Kafka Streams' TopologyTestDriver as a StreamsException."""
    from streamsql.errors import PREPARE_FAILED, ParseError

    if not rejected_statement:
        return "org.apache.kafka.streams.errors.StreamsException"
    if isinstance(error, ParseError) or str(error).startswith(PREPARE_FAILED):
        return "io.confluent.ksql.parser.exception.ParseFailedException"
    return "io.confluent.ksql.util.KsqlStatementException"


def is_instance(ksql_class_name: str, expected_type: str | None) -> bool:
    """``instanceOf(expected_type)`` in ksqlDB's hierarchy (:data:`KSQL_SUPERCLASS`); no type
    expected matches any class."""
    if not expected_type:
        return True
    name: str | None = ksql_class_name
    while name is not None:
        if name == expected_type:
            return True
        name = KSQL_SUPERCLASS.get(name)
    return False


def class_mismatch(expected: dict[str, Any], error: BaseException, rejected_statement: bool) -> str | None:
    """Why ``error`` is not the ``expectedException``'s class, or None when it is."""
    ours = ksql_class(error, rejected_statement)
    want = expected.get("type")
    if is_instance(ours, want):
        return None
    where = "a statement was rejected" if rejected_statement else "processing failed"
    return f"expected {want} but {where}, which ksqlDB throws as {ours}"


def message_matches(expected: str | None, actual: str) -> bool:
    if not expected:
        return True
    norm = lambda s: re.sub(r"\s+", " ", s).strip().lower()  # noqa: E731
    candidates = [expected]
    rewritten = expected
    for pattern, repl, _why in MESSAGE_REWRITES:
        rewritten = re.sub(pattern, repl, rewritten)
    if rewritten != expected:
        candidates.append(rewritten)
    return any(c in actual or norm(c) in norm(actual) for c in candidates)


# --------------------------------------------------------------------------------------------
# post conditions
# --------------------------------------------------------------------------------------------


def normalize_schema(text: str) -> str:
    s = text.replace("`", "").upper()
    s = re.sub(r"\bPRIMARY KEY\b", "KEY", s)  # ksqlDB compares LogicalSchemas: a key column is a key column
    s = re.sub(r"\bINTEGER\b", "INT", s)
    s = re.sub(r"\bVARCHAR\b", "STRING", s)
    s = re.sub(r"\s*([,<>()])\s*", r"\1", s)
    return re.sub(r"\s+", " ", s).strip()


def _format_name(node: Any) -> str | None:
    if node is None:
        return None
    if isinstance(node, dict):
        f = node.get("format")
        return str(f).upper() if f else None
    return str(node).upper()


def check_post(post: dict[str, Any] | None, catalog: Any) -> str | None:
    """ksqlDB's ``post.sources`` checks we can make: the source exists, its type, schema and
    key/value formats."""
    if not post:
        return None
    for src in post.get("sources") or []:
        name = str(src.get("name", ""))
        found = catalog.find(name)
        if found is None:
            return f"post: source {name} does not exist"
        kind = src.get("type")
        if kind and str(kind).upper() != found.kind.upper():
            return f"post: source {name} is a {found.kind.lower()}, expected a {str(kind).lower()}"
        schema = src.get("schema")
        if schema is not None:
            ours = ", ".join(c.sql() for c in found.columns)
            if normalize_schema(schema) != normalize_schema(ours):
                return f"post: source {name} schema: expected '{schema}' but was '{ours.replace('`', '')}'"
        kf = _format_name(src.get("keyFormat"))
        if kf and found.key_columns and kf != found.key_format.upper():
            return f"post: source {name} key format: expected {kf} but was {found.key_format}"
        vf = _format_name(src.get("valueFormat"))
        if vf and vf != found.value_format.upper():
            return f"post: source {name} value format: expected {vf} but was {found.value_format}"
    return None
