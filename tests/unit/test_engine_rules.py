"""Statement rules the engine checks before anything runs, without Spark or Kafka."""

from __future__ import annotations

import pytest

from streamsql.errors import AnalysisError
from streamsql.runtime.engine import _check_header_type
from streamsql.sql import parse


def columns(ddl: str):  # type: ignore[no-untyped-def]
    [stmt] = parse(ddl)
    return stmt.columns  # type: ignore[attr-defined]


def test_header_columns_have_the_types_kafka_headers_have() -> None:
    """ksqlDB's headers case: HEADER('key') must be BYTES, HEADERS the array of key/value structs
    (field names in any case)."""
    k, h1, v = columns("CREATE STREAM S (K STRING KEY, H1 INT HEADER('key'), V BIGINT) "
                       "WITH (kafka_topic='s', value_format='json');")
    with pytest.raises(AnalysisError, match=r"^Invalid type for HEADER\('key'\) column: expected BYTES, got INTEGER$"):
        _check_header_type(h1)
    _check_header_type(k)
    _check_header_type(v)
    [_, ok, bad] = columns("CREATE STREAM S (K STRING KEY, H ARRAY<STRUCT<key STRING, value BYTES>> HEADERS, "
                           "B ARRAY<STRING> HEADERS) WITH (kafka_topic='s', value_format='json');")
    _check_header_type(ok)
    [quoted] = columns("CREATE STREAM S (H ARRAY<STRUCT<`key` STRING, `VALUE` BYTES>> HEADERS) "
                       "WITH (kafka_topic='s', value_format='json');")
    with pytest.raises(AnalysisError, match=r"got ARRAY<STRUCT<`key` STRING, `VALUE` BYTES>>$"):
        _check_header_type(quoted)  # a quoted lower-case field name is another field
    with pytest.raises(AnalysisError, match=r"^Invalid type for HEADERS column: expected "
                                            r"ARRAY<STRUCT<`KEY` STRING, `VALUE` BYTES>>, got ARRAY<STRING>$"):
        _check_header_type(bad)
