"""Pure parts of the REST server and the RQTT runner: entity shapes, envelopes, value encoding,
override rules, response matching. (The HTTP behaviour is tested against a real server in
tests/integration/test_server.py.)"""

from __future__ import annotations

import datetime as dt
import decimal
import re

import pytest

from streamsql import entities
from streamsql import types as t
from streamsql.errors import ConfigError
from streamsql.runtime import results as r
from streamsql.server.errors import client_message
from streamsql.server.authorization import Account, load_users
from streamsql.server.errors import ServerError, statement_error
from streamsql.server.service import normalize_overrides
from streamsql.sql import parse
from streamsql.conformance.rqtt import is_rqtt_path, partial_match, query_mismatch


def test_error_envelopes_follow_ksqldb() -> None:
    generic = ServerError(40000, "bad").envelope()
    assert generic == {"@type": "generic_error", "error_code": 40000, "message": "bad"}
    err = statement_error("line 1:1: Syntax error", "SELEC 1;", [{"@type": "streams"}])
    assert err.status == 400 and err.envelope()["statementText"] == "SELEC 1;"
    assert err.envelope()["entities"] == [{"@type": "streams"}]
    assert ServerError(50301, "late").status == 503


def test_command_ids_and_current_status() -> None:
    create, = parse("CREATE STREAM s (id INT KEY, v INT) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON');")
    assert entities.command_id(create) == "stream/`S`/create"
    term, = parse("TERMINATE csas_x_1;")
    assert entities.command_id(term) == "terminate/CSAS_X_1/execute"
    entity = entities.to_entity(r.CommandStatus(create.text, "Stream created"), create, None, 7)
    assert entity == {"@type": "currentStatus", "statementText": create.text.rstrip(";") + ";",
                      "commandId": "stream/`S`/create", "commandStatus": {"status": "SUCCESS", "message": "Stream created"},
                      "commandSequenceNumber": 7, "warnings": []}
    set_stmt, = parse("SET 'auto.offset.reset'='earliest';")
    assert entities.to_entity(r.CommandStatus(set_stmt.text, "ok"), set_stmt) is None


def test_schema_info_and_headers() -> None:
    ty = t.Struct((t.StructField("A", t.Array(t.INTEGER)), t.StructField("D", t.Decimal(4, 2))))
    info = entities.schema_info(ty)
    assert info["type"] == "STRUCT" and info["fields"][0]["schema"]["memberSchema"]["type"] == "INTEGER"
    assert info["fields"][1]["schema"]["parameters"] == {"precision": 4, "scale": 2}
    cols = [("ID", "STRING"), ("S", "STRUCT<`F1` STRING>")]
    assert entities.header_schema(cols, {"ID"}) == "`ID` STRING KEY, `S` STRUCT<`F1` STRING>"
    assert entities.plain_type("STRUCT<`F1` STRING>") == "STRUCT<F1 STRING>"


def test_row_values_as_ksqldb_writes_them() -> None:
    ts = dt.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=dt.UTC)
    assert entities.json_value([ts, dt.date(2024, 1, 2), decimal.Decimal("1.50"), b"\x01", {"k": [1]}]) == [
        "2024-01-02T03:04:05.678", "2024-01-02", 1.5, "AQ==", {"k": [1]}]


def test_overrides_are_normalized_and_the_denylist_holds() -> None:
    assert normalize_overrides({"ksql.streams.auto.offset.reset": "earliest", "x": True}) == {
        "auto.offset.reset": "earliest", "x": "true"}
    with pytest.raises(ServerError) as e:
        normalize_overrides({"ksql.service.id": "other"})
    assert e.value.error_code == 40000 and "prohibited" in e.value.message


def test_client_message_never_shows_a_trace() -> None:
    wrapped = ("[STREAM_FAILED] Query [id = 1] terminated with exception: [FOREACH_BATCH_USER_FUNCTION_ERROR] "
               "Return Message: Traceback (most recent call last):\n  File \"x.py\", line 1, in f\n"
               "pyspark.errors.exceptions.captured.AnalysisException: [AMBIGUOUS_REFERENCE] Reference `X` is "
               "ambiguous. SQLSTATE: 42704\n=== Streaming Query ===\nIdentifier: x")
    assert client_message(wrapped) == "[AMBIGUOUS_REFERENCE] Reference `X` is ambiguous."


def test_users_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "users"
    path.write_text("# users\nfred: letmein,admin\nann=secret\n")
    assert load_users(str(path)) == {"fred": Account("letmein", ("admin",)), "ann": Account("secret")}
    path.write_text("nobody\n")
    with pytest.raises(ConfigError, match=f"^{re.escape(str(path))}:1: expected 'user: password"):
        load_users(str(path))


def test_rqtt_matching(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert partial_match({"@type": "currentStatus"}, {"@type": "currentStatus", "commandId": "x"})
    assert not partial_match({"@type": "streams"}, {"@type": "currentStatus"})
    expected = [{"header": {"schema": "`ID` STRING KEY, `N` BIGINT"}}, {"row": {"columns": ["a", 1]}},
                {"row": {"columns": ["b", 2]}}]
    actual = [{"header": {"queryId": "q", "schema": "`ID` STRING KEY, `N` BIGINT"}}, {"row": {"columns": ["b", 2]}},
              {"row": {"columns": ["a", 1]}}]
    assert query_mismatch(expected, actual) is None  # pull rows in any order
    schema_mismatch = query_mismatch([{"header": {"schema": "`X` INTEGER"}}], [{"header": {"schema": "`Y` INTEGER"}}])
    assert schema_mismatch is not None and "schema" in schema_mismatch
    assert "`X` INTEGER" in schema_mismatch and "`Y` INTEGER" in schema_mismatch  # names both
    short = query_mismatch(expected, actual[:2])  # 3 elements expected, 2 came
    assert short is not None and short.startswith("expected 3 elements") and "got 2" in short
    assert is_rqtt_path(tmp_path / "rqtt" / "push-queries.json")
    assert not is_rqtt_path(tmp_path / "qtt" / "sum.json")


def test_query_rows_mark_table_deletes_as_tombstones() -> None:
    """push-queries.json: a deleted table row is ``{"row": {"columns": [...], "tombstone": true}}``."""
    from streamsql.runtime.results import TombstoneRow
    from streamsql.server.app import _row_entity

    assert _row_entity([1, "a"]) == {"row": {"columns": [1, "a"]}}
    assert _row_entity(TombstoneRow([1, None])) == {"row": {"columns": [1, None], "tombstone": True}}


def test_function_types_are_ksqldb_enum_names_and_the_shell_renders_what_the_server_sends() -> None:
    """ksqlDB's ``FunctionType`` is a Java enum serialised by name (SCALAR, AGGREGATE, TABLE); the
    server wrote them in lower case before the two encoders became one."""
    show, = parse("SHOW FUNCTIONS;")
    result = r.FunctionList(show.text, [r.FunctionInfo("ABS", "SCALAR", "MATHEMATICAL"),
                                        r.FunctionInfo("COUNT", "AGGREGATE", "AGGREGATE")])
    served = entities.to_entity(result, show, None, None)
    assert served is not None
    assert [f["type"] for f in served["functions"]] == ["SCALAR", "AGGREGATE"]
    shown = entities.to_entity(result)  # the shell's JSON output: the result alone
    assert shown is not None and shown["functions"] == served["functions"]
    back = entities.result_from_entity(served)
    assert isinstance(back, r.FunctionList) and back.functions == result.functions


@pytest.mark.parametrize("flag", ["--max-connections", "--request-header-timeout-ms"])
@pytest.mark.parametrize(("value", "problem"), [("0", "must be at least 1, not 0"), ("-5", "must be at least 1, not -5"),
                                                ("lots", "expected a whole number, not 'lots'")])
def test_server_limits_refuse_values_that_are_not_a_positive_whole_number(
        flag: str, value: str, problem: str, capsys: pytest.CaptureFixture[str]) -> None:
    from streamsql.surfaces.cli import build_parser

    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["server", flag, value])
    assert e.value.code == 2
    assert f"argument {flag}: {problem}" in capsys.readouterr().err


def test_non_finite_doubles_are_written_as_ksqldb_writes_them_in_strict_json() -> None:
    """Jackson (ksqlDB's REST and JSON serde) quotes NaN and the infinities; a bare ``NaN`` is
    not JSON and strict clients refuse it (issue #52)."""
    import json
    import math

    from streamsql.surfaces.console import stream_row_json

    row = [math.nan, math.inf, -math.inf, 1.5, {"m": math.nan}, [math.inf]]
    assert entities.json_value(row) == ["NaN", "Infinity", "-Infinity", 1.5, {"m": "NaN"}, ["Infinity"]]

    def refuse(name: str) -> None:
        raise ValueError(name)

    text = stream_row_json(row)  # the shell's JSON output mode
    assert json.loads(text, parse_constant=refuse) == ["NaN", "Infinity", "-Infinity", 1.5, {"m": "NaN"}, ["Infinity"]]


def test_unexpected_errors_are_counted_in_prometheus_text() -> None:
    from streamsql.server.errors import UnexpectedErrors

    counter = UnexpectedErrors()
    counter.record()
    counter.record()
    assert counter.count == 2
    assert b"\nstreamsql_unexpected_errors_total 2\n" in counter.exposition()
    assert b"# TYPE streamsql_unexpected_errors_total counter" in counter.exposition()


@pytest.mark.parametrize("raw, problem", [
    (b"[" * 50_000 + b"]" * 50_000, "nested too deeply"),
    (b'{"a": NaN}', "'NaN' is not a JSON value"),
    (b'{"a": -Infinity}', "'-Infinity' is not a JSON value"),
    (b"\xff{", "Invalid JSON in request"),
])
def test_request_json_is_strict_and_never_raises_more_than_a_400(raw: bytes, problem: str) -> None:
    from streamsql.server.app import parse_json

    with pytest.raises(ServerError) as caught:
        parse_json(raw, "request")
    assert caught.value.status == 400 and problem in caught.value.message
