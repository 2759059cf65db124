"""Random statements from ksqlDB's own words never get a stack trace back (issue #18 item 8): the
parser either parses a token sequence or names what is wrong with a ParseError (line and column);
any other exception is a defect. The REST side of the same fuzzer is in tests/integration/test_server.py."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamsql.errors import ParseError, StreamsqlError
from streamsql.sql import parse

WORDS = """CREATE STREAM TABLE SOURCE OR REPLACE AS SELECT FROM WHERE GROUP BY HAVING WINDOW TUMBLING HOPPING
SESSION SIZE ADVANCE GRACE PERIOD RETENTION SECONDS MINUTES HOURS DAYS EMIT CHANGES FINAL JOIN LEFT RIGHT INNER
OUTER FULL ON WITHIN INSERT INTO VALUES DROP DELETE TOPIC IF EXISTS NOT NULL TRUE FALSE CASE WHEN THEN ELSE END
CAST STRUCT ARRAY MAP KEY PRIMARY PARTITION PARTITIONS LIMIT SHOW LIST DESCRIBE EXTENDED EXPLAIN TERMINATE ALL SET
UNSET DEFINE UNDEFINE PRINT RUN SCRIPT CONNECTOR CONNECTORS SINK TYPE TYPES ASSERT SCHEMA WITH KAFKA_TOPIC
VALUE_FORMAT KEY_FORMAT FORMAT VARCHAR STRING INT INTEGER BIGINT DOUBLE DECIMAL BOOLEAN BYTES DATE TIME TIMESTAMP
LIKE BETWEEN AND OR IN IS DISTINCT HEADERS HEADER QUERIES STREAMS TABLES TOPICS FUNCTIONS PROPERTIES VARIABLES
ROWTIME ROWKEY WINDOWSTART WINDOWEND COUNT SUM ABS LATEST_BY_OFFSET EXPLODE x y orders o c id amount""".split()
PUNCTUATION = ["=", ",", "(", ")", ";", "*", "+", "-", "/", "%", "->", "=>", "<", ">", "<=", ">=", "<>", "!=",
               ".", ":", "[", "]", "'", '"', "`", "${", "}", "\n", "--", "/*", "*/", "@", "#", "\\", "||"]
LITERALS = ["'text'", "'it''s'", "'2024-01-01'", '"Quoted Id"', "`back`", "${v}", "1", "0", "-1", "1.5", "1e400",
            "9223372036854775808", "X'0A'", "'\u00e9\u4e2d'", "\u00e9t\u00e9", "\x00", "\ud7ff"]
TOKENS = st.sampled_from(WORDS + PUNCTUATION + LITERALS)
STATEMENTS = st.lists(TOKENS, min_size=1, max_size=30).map(" ".join)
#: a statement's beginning that takes the parser deep before the noise starts
PREFIXES = st.sampled_from(["", "CREATE STREAM s (", "CREATE TABLE t AS SELECT ", "SELECT * FROM o WHERE ",
                            "INSERT INTO o (id) VALUES (", "CREATE STREAM s WITH (KAFKA_TOPIC='t', ",
                            "SELECT id, COUNT(*) FROM o WINDOW TUMBLING (SIZE ", "DEFINE v = '", "SET '"])


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(PREFIXES, STATEMENTS)
def test_random_statements_parse_or_name_the_problem(prefix: str, tail: str) -> None:
    text = prefix + tail
    try:
        parse(text)
    except ParseError as e:
        assert e.line >= 1 and e.column >= 0 and str(e).startswith(f"line {e.line}:{e.column}: ")
    except StreamsqlError as e:  # a rule the parser checks (a variable, a literal out of range)
        assert str(e).strip()
