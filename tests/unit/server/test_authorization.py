"""The role policy and the query limits without a server: the users file's roles, which role each
parsed statement needs, and the limits' counters and ksqlDB's messages. The same rules over real
HTTP are in tests/integration/test_server_roles.py."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from streamsql.errors import ConfigError
from streamsql.runtime.config import EngineConfig
from streamsql.server import authorization as authz
from streamsql.server.authorization import Account, Principal, RolePolicy, load_users
from streamsql.server.errors import ServerError
from streamsql.server.limits import LimitSettings, QueryLimits
from streamsql.sql import parse
from streamsql.surfaces.backends import hide_secrets


def test_users_file_roles_as_jetty_writes_them(tmp_path: Path) -> None:
    path = tmp_path / "users"
    path.write_text("# team\nana: a-pass, Admin ,ksql-user\ndev=d-pass,developer\nrita: r,reader\n"
                    "plain: p\n! jetty comment\nboth: b,reader,developer\n")
    users = load_users(str(path))
    assert users["ana"] == Account("a-pass", ("admin", "ksql-user")) and users["ana"].role == "admin"
    assert users["dev"].role == "developer" and users["rita"].role == "reader"
    assert users["plain"] == Account("p") and users["plain"].role is None
    assert users["both"].role == "developer"  # several: the highest
    policy = RolePolicy(users)
    assert policy.enforced
    assert policy.principal("plain") == Principal("plain", "reader")  # least privilege
    assert policy.principal("ana").role == "admin"
    assert "plain" in policy.warnings()[0] and "reader" in policy.warnings()[0]
    path.write_text("ana: ,admin\n")
    with pytest.raises(ConfigError, match="expected 'user: password"):
        load_users(str(path))


def test_a_file_without_streamsql_roles_keeps_everyone_admin(tmp_path: Path) -> None:
    """Today's files, and a ksqlDB file whose roles are only for ``authentication.roles``."""
    path = tmp_path / "users"
    path.write_text("fred: letmein,user\nharry: changeme\n")
    policy = RolePolicy(load_users(str(path)))
    assert not policy.enforced and policy.warnings() == []
    assert {policy.principal(u).role for u in ("fred", "harry")} == {"admin"}


NEEDS = {
    "SELECT * FROM s EMIT CHANGES;": "reader", "select * from t where k = 1;": "reader", "PRINT 'x';": "reader",
    "SHOW STREAMS;": "reader", "LIST TOPICS;": "reader", "SHOW CONNECTORS;": "reader", "DESCRIBE s;": "reader",
    "DESCRIBE CONNECTOR c;": "reader", "EXPLAIN q1;": "reader", "EXPLAIN CREATE STREAM x AS SELECT * FROM s;": "reader",
    "SET 'auto.offset.reset'='earliest';": "reader", "UNSET 'auto.offset.reset';": "reader",
    "DEFINE v = 'x';": "reader", "UNDEFINE v;": "reader", "ASSERT TOPIC t;": "reader",
    "CREATE STREAM s (a INT) WITH (kafka_topic='t', value_format='json');": "developer",
    "CREATE SOURCE TABLE t (k INT PRIMARY KEY, a INT) WITH (kafka_topic='t', value_format='json');": "developer",
    "create table c as select k, count(*) from s group by k;": "developer",
    "DROP STREAM s DELETE TOPIC;": "developer", "ALTER STREAM s ADD COLUMN b INT;": "developer",
    "CREATE TYPE pt AS STRUCT<x INT>;": "developer", "DROP TYPE pt;": "developer",
    "INSERT INTO s (a) VALUES (1);": "developer", "INSERT INTO s SELECT * FROM s2;": "developer",
    "TERMINATE q1;": "developer", "TERMINATE ALL;": "developer", "PAUSE q1;": "developer", "RESUME ALL;": "developer",
    "CREATE SINK CONNECTOR c WITH ('connector.class'='FileStreamSink');": "admin", "DROP CONNECTOR c;": "admin",
}


@pytest.mark.parametrize("text", sorted(NEEDS))
def test_each_statement_kind_needs_its_role(text: str) -> None:
    [stmt] = parse(text)
    kind, needed = authz.statement_kind(stmt)
    assert needed == NEEDS[text], kind
    for role in authz.ROLES:
        principal = Principal("u", role)
        if authz.allows(role, needed):
            authz.check_statements(principal, [stmt])
        else:
            with pytest.raises(ServerError) as refused:
                authz.check_statements(principal, [stmt])
            assert refused.value.status == 403 and refused.value.error_code == 40300
            assert refused.value.envelope()["@type"] == "generic_error"
            message = refused.value.message
            assert f"user 'u' has role '{role}'" in message and kind in message and f"role '{needed}'" in message


def test_a_request_is_refused_whole_at_its_first_forbidden_statement() -> None:
    statements = parse("SHOW STREAMS;\n-- then a write\nINSERT INTO s (a) VALUES (1);\nSELECT * FROM s EMIT CHANGES;")
    with pytest.raises(ServerError, match=r"INSERT VALUES statements \(line 3: INSERT INTO s \(a\) VALUES \(1\)\)"):
        authz.check_statements(Principal("rita", "reader"), statements)
    authz.check_statements(Principal("dev", "developer"), statements)


def test_push_slots_are_counted_and_freed() -> None:
    limits = QueryLimits(LimitSettings(max_push_queries=2))
    assert limits.try_acquire_push() and limits.try_acquire_push()
    assert not limits.try_acquire_push()
    refusal = limits.push_refused("SELECT * FROM s EMIT CHANGES")
    assert refusal.error_code == 40001 and refusal.statement_text == "SELECT * FROM s EMIT CHANGES"
    assert refusal.message == ("Not executing statement(s) as it would cause the number of active, push queries to "
                               "exceed the configured limit. Terminate existing PUSH queries, or increase the "
                               "'ksql.max.push.queries' setting via the 'ksql-server.properties' file. Current push "
                               "query count: 2. Configured limit: 2.")
    limits.release_push()
    assert limits.try_acquire_push()


def test_pull_rate_is_a_one_second_bucket() -> None:
    limits = QueryLimits(LimitSettings(pull_max_qps=3))
    for _ in range(3):
        limits.check_pull_rate()
    with pytest.raises(ServerError) as refused:
        limits.check_pull_rate()
    assert refused.value.status == 429 and refused.value.error_code == 42900
    assert refused.value.message == "Host is at rate limit for pull queries. Currently set to 3.0 qps."
    time.sleep(0.4)  # 3 per second: one more token after a third of a second
    limits.check_pull_rate()
    unlimited = QueryLimits()
    for _ in range(10_000):
        unlimited.check_pull_rate()


def test_persistent_limit_counts_what_the_request_starts_and_stops() -> None:
    limits = QueryLimits(LimitSettings(persistent_active_limit=2))
    running = {"CSAS_A_1"}
    limits.check_persistent(parse("CREATE STREAM b AS SELECT * FROM a;"), running, "x")
    two = parse("CREATE STREAM b AS SELECT * FROM a; INSERT INTO b SELECT * FROM c;")
    with pytest.raises(ServerError) as refused:
        limits.check_persistent(two, running, "the request")
    assert refused.value.error_code == 40001 and refused.value.statement_text == "the request"
    assert refused.value.message.startswith("Not executing statement(s) as it would cause the number of active, "
                                            "persistent queries to exceed the configured limit. Use the TERMINATE "
                                            "command to terminate existing queries, or increase the "
                                            "'ksql.query.persistent.active.limit' setting")
    assert refused.value.message.endswith("Current persistent query count: 1. Configured limit: 2.")
    limits.check_persistent(parse("TERMINATE csas_a_1;") + two, running, "x")  # frees one first
    limits.check_persistent(parse("SHOW QUERIES; TERMINATE ALL;"), {"A", "B", "C"}, "x")  # starts none


def test_limits_are_read_from_the_server_config() -> None:
    config = EngineConfig("localhost:9092", properties={"ksql.max.push.queries": "2",
                                                        "ksql.query.pull.max.qps": "50"})
    assert LimitSettings.from_config(config) == LimitSettings(2, 2**31 - 1, 50)
    assert LimitSettings.from_config(EngineConfig("b:1")) == LimitSettings(100, 2**31 - 1, 2**31 - 1)
    for bad in ({"ksql.max.push.queries": "many"}, {"ksql.query.pull.max.qps": "0"},
                {"ksql.query.persistent.active.limit": "-1"}):
        with pytest.raises(ConfigError, match=next(iter(bad))):
            LimitSettings.from_config(EngineConfig("b:1", properties=bad))


def test_the_shell_hides_secret_values() -> None:
    assert hide_secrets("SET 'sasl.password'='s3cret';") == "SET 'sasl.password'='[hidden]';"
    assert hide_secrets("set 'SASL.JAAS.CONFIG' = 'x required password=\"p\";' ;") == \
        "set 'SASL.JAAS.CONFIG' = '[hidden]' ;"
    assert hide_secrets("SET 'ksql.schema.registry.basic.auth.user.info'='u:p';").endswith("='[hidden]';")
    assert hide_secrets("SET 'ssl.key'='k'; SET 'auto.offset.reset'='earliest';") == \
        "SET 'ssl.key'='[hidden]'; SET 'auto.offset.reset'='earliest';"
    assert hide_secrets("Successfully changed local property 'my.secret' to 'it''s'.") == \
        "Successfully changed local property 'my.secret' to '[hidden]'."
    assert hide_secrets("CREATE SINK CONNECTOR c WITH (\"connection.password\"='pw', 'topics'='t');") == \
        "CREATE SINK CONNECTOR c WITH (\"connection.password\"='[hidden]', 'topics'='t');"


def test_the_client_sends_basic_auth_from_user_and_password_or_the_url() -> None:
    import base64

    from streamsql.client import KsqlClient

    def credentials(client: KsqlClient) -> str:
        return base64.b64decode(client._headers["Authorization"].split()[1]).decode()

    assert credentials(KsqlClient("http://h:8088", user="rita", password="p:w")) == "rita:p:w"
    assert credentials(KsqlClient("http://ann:s%40cret@h:8088")) == "ann:s@cret"
    assert credentials(KsqlClient("http://ann:x@h:8088", user="rita", password="y")) == "rita:y"  # -u/-p win
    assert "Authorization" not in KsqlClient("http://h:8088")._headers
