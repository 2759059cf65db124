"""Roles and limits on a real ``streamsql server`` process (docs/security.md): one server for the
module, its users file written as Jetty's/ksqlDB's (``user: password,role...``) with an admin, a
developer, a reader and a user without a role, and ksqlDB's query limits set small
(``ksql.max.push.queries=2``, ``ksql.query.persistent.active.limit=2``,
``ksql.query.pull.max.qps=4``). Every statement kind is tried as every role, the way a user
probing the server would vary it (lowercase, comments, a read and a write in one request, the
query endpoints, ``/inserts-stream``, ``/ksql/terminate``); a refused request must have run none
of its statements. The shell's ``-u``/``-p`` against the same server, secrets the shell never
echoes, and ``/metrics`` counting from the server's start are here too."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from streamsql.conformance.server_process import REPO, ServerProcess
from tests.integration.test_shell import PtyShell

pytestmark = pytest.mark.integration

USERS = {"ana": "ana-pw", "dev": "dev-pw", "rita": "rita-pw", "nora": "nora-pw"}
#: the role each user gets: nora's line names none while the others do, so she may only read
ROLE = {"ana": "admin", "dev": "developer", "rita": "reader", "nora": "reader"}
KSQL_JSON = {"Accept": "application/vnd.ksql.v1+json", "Content-Type": "application/vnd.ksql.v1+json"}
PUSH_LIMIT, PERSISTENT_LIMIT = 2, 2
#: requests made before anything scrapes /metrics (test_metrics_count_from_the_servers_start)
EARLY_UNAUTHORIZED = 3


def uniq(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}".upper()


@pytest.fixture(scope="module")
def server(bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("server-roles")
    users = root / "users.properties"
    users.write_text("# the team: Jetty's PropertyFileLoginModule format, as ksqlDB reads it\n"
                     "ana: ana-pw,admin,ksql-user\n"
                     "dev: dev-pw, Developer\n"
                     "rita: rita-pw,reader\n"
                     "nora: nora-pw\n")
    proc = ServerProcess(bootstrap, root / "data", ["--auth-file", str(users)],
                         service_id=f"roles{uuid.uuid4().hex[:8]}_",
                         properties={"ksql.max.push.queries": str(PUSH_LIMIT),
                                     "ksql.query.persistent.active.limit": str(PERSISTENT_LIMIT),
                                     "ksql.query.pull.max.qps": "4"})
    proc.start(auth=("ana", USERS["ana"]))
    for _ in range(EARLY_UNAUTHORIZED):
        assert httpx.get(proc.url + "/info", timeout=30).status_code == 401
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def data(server: ServerProcess) -> dict[str, str]:
    """A stream with rows, and a table counting them per key (one persistent query), made by the
    admin before any test runs."""
    stream, table = uniq("RS"), uniq("RT")
    topic = f"roles_{uuid.uuid4().hex[:10]}"
    with as_user(server, "ana") as c:
        ok(ksql(c, f"CREATE STREAM {stream} (K VARCHAR KEY, V INT) WITH (KAFKA_TOPIC='{topic}', PARTITIONS=1, "
                   f"VALUE_FORMAT='JSON');"))
        ok(ksql(c, f"CREATE TABLE {table} AS SELECT K, COUNT(*) AS N FROM {stream} GROUP BY K;",
                streamsProperties={"auto.offset.reset": "earliest"}))
        ok(ksql(c, "".join(f"INSERT INTO {stream} (K, V) VALUES ('k{i % 2}', {i});" for i in range(4))))
        # the table counts them once its query has read them (its first micro-batch takes a few
        # seconds): the tests below compare against these counts
        deadline = time.monotonic() + 120
        while True:
            counts = pull(c, f"SELECT K, N FROM {table};")
            if sorted(row[1] for row in counts.json()[1:]) == [2, 2] or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    return {"stream": stream, "table": table, "topic": topic}


def as_user(server: ServerProcess, user: str, **kwargs: Any) -> httpx.Client:
    return httpx.Client(base_url=server.url, auth=(user, USERS[user]), timeout=600, **kwargs)


def ksql(client: httpx.Client, text: str, **extra: Any) -> httpx.Response:
    return client.post("/ksql", json={"ksql": text, **extra}, headers=KSQL_JSON)


def ok(resp: httpx.Response) -> Any:
    assert resp.status_code == 200, resp.text
    return resp.json()


def forbidden(resp: httpx.Response, user: str, kind: str) -> None:
    """ksqlDB's 403 envelope naming the user, the role and what was refused."""
    assert resp.status_code == 403, resp.text
    body = resp.json()
    assert body["@type"] == "generic_error" and body["error_code"] == 40300, body
    assert f"user '{user}' has role '{ROLE[user]}'" in body["message"] and kind in body["message"], body["message"]


def sources(server: ServerProcess) -> set[str]:
    with as_user(server, "ana") as c:
        [streams] = ok(ksql(c, "SHOW STREAMS;"))
        [tables] = ok(ksql(c, "SHOW TABLES;"))
    return {s["name"] for s in streams["streams"] + tables["tables"]}


def persistent_queries(server: ServerProcess) -> list[str]:
    with as_user(server, "ana") as c:
        [queries] = ok(ksql(c, "SHOW QUERIES;"))
    return [q["id"] for q in queries["queries"] if q.get("queryType", "PERSISTENT") == "PERSISTENT"]


def pull(client: httpx.Client, text: str) -> httpx.Response:
    """A pull query, waiting out the server's 4 qps if another test used them up this second."""
    for _ in range(20):
        resp = client.post("/query-stream", json={"sql": text}, headers={"Accept": "application/json"})
        if resp.status_code != 429:
            return resp
        time.sleep(0.5)
    return resp


# --- roles × statements ------------------------------------------------------------------------------


READS = ["SHOW STREAMS;", "list topics;", "SHOW QUERIES EXTENDED;", "show properties;", "SHOW CONNECTORS;",
         "SHOW FUNCTIONS;", "DESCRIBE FUNCTION ucase;", "-- a comment first\nSHOW TABLES;",
         "SET 'auto.offset.reset'='earliest'; SHOW STREAMS;", "DEFINE x = 'y'; UNDEFINE x;"]


@pytest.mark.parametrize("user", sorted(USERS))
def test_everyone_may_read(server: ServerProcess, data: dict[str, str], user: str) -> None:
    with as_user(server, user) as c:
        for text in [*READS, f"DESCRIBE {data['stream']} EXTENDED;", f"describe {data['table'].lower()};",
                     f"EXPLAIN SELECT * FROM {data['stream']} EMIT CHANGES;",
                     f"EXPLAIN CREATE STREAM never_made AS SELECT * FROM {data['stream']};"]:
            ok(ksql(c, text))
        for path in ("/info", "/healthcheck", "/status", "/metrics", "/v1/metadata"):
            assert c.get(path).status_code == 200, path
        rows = pull(c, f"SELECT * FROM {data['table']};")
        assert rows.status_code == 200, rows.text
        printed = c.post("/query", json={"ksql": f"PRINT '{data['topic']}' FROM BEGINNING LIMIT 1;"})
        assert printed.status_code == 200 and "key: k0" in printed.text, printed.text
    assert "NEVER_MADE" not in sources(server)


WRITES = {  # statement template -> the kind the refusal names; {s} the stream, {n} a new name
    "CREATE STREAM {n} (A INT) WITH (KAFKA_TOPIC='{n}', PARTITIONS=1, VALUE_FORMAT='JSON');": "CREATE STREAM",
    "create table {n} (k int primary key, a int) with (kafka_topic='{n}', partitions=1, value_format='json');":
        "CREATE TABLE",
    "/* sneaky */ CREATE STREAM {n} AS SELECT * FROM {s};": "CREATE STREAM AS SELECT",
    "INSERT INTO {s} (K, V) VALUES ('forged', 666);": "INSERT VALUES",
    "insert into {s} select * from {s};": "INSERT INTO ... SELECT",
    "DROP STREAM {s};": "DROP STREAM",
    "DROP TABLE IF EXISTS {n} DELETE TOPIC;": "DROP TABLE",
    "ALTER STREAM {s} ADD COLUMN W INT;": "ALTER STREAM",
    "CREATE TYPE {n} AS STRUCT<X INT>;": "CREATE TYPE",
    "DROP TYPE IF EXISTS {n};": "DROP TYPE",
    "TERMINATE ALL;": "TERMINATE",
    "terminate some_query;": "TERMINATE",
    "PAUSE ALL;": "PAUSE",
    "RESUME ALL;": "RESUME",
    "CREATE SINK CONNECTOR {n} WITH ('connector.class'='FileStreamSink', 'topics'='{s}', 'file'='out.txt');":
        "CREATE SINK CONNECTOR",
    "DROP CONNECTOR IF EXISTS {n};": "DROP CONNECTOR",
}


@pytest.mark.parametrize("user", ["rita", "nora"])
def test_readers_may_not_write_and_nothing_of_the_request_runs(server: ServerProcess, data: dict[str, str],
                                                                user: str) -> None:
    before, queries = sources(server), persistent_queries(server)
    with as_user(server, user) as c:
        for template, kind in WRITES.items():
            forbidden(ksql(c, template.format(n=uniq("N"), s=data["stream"])), user, kind)
        # a read then a write in one request: refused whole, the read included
        mixed = f"SHOW STREAMS;\nCREATE STREAM {uniq('MIXED')} (A INT) WITH (KAFKA_TOPIC='m', VALUE_FORMAT='JSON');"
        forbidden(ksql(c, mixed), user, "CREATE STREAM statements (line 2")
        # statements from variables are classified after substitution
        forbidden(ksql(c, "${verb} STREAM ${what};", sessionVariables={"verb": "DROP", "what": data["stream"]}),
                  user, "DROP STREAM")
        forbidden(c.post("/ksql/terminate", json={}), user, "TERMINATE CLUSTER")
        forbidden(c.post("/inserts-stream", content=json.dumps({"target": data["stream"]}) + "\n"), user,
                  "INSERT (/inserts-stream)")
        # the query endpoints run SELECT and PRINT only, whoever asks
        sneaky = c.post("/query", json={"ksql": f"INSERT INTO {data['stream']} (K, V) VALUES ('q', 1);"})
        assert sneaky.status_code == 400 and "only run SELECT and PRINT" in sneaky.json()["message"], sneaky.text
    with as_user(server, user, http1=False, http2=True) as h2:
        forbidden(h2.post("/inserts-stream", content=json.dumps({"target": data["stream"]}) + "\n"
                          + json.dumps({"K": "h2", "V": 1}) + "\n"), user, "INSERT (/inserts-stream)")
    assert sources(server) == before and persistent_queries(server) == queries
    with as_user(server, "ana") as c:  # no row went in: the table still counts 2 + 2
        counts = pull(c, f"SELECT K, N FROM {data['table']};")
        assert sorted(row[1] for row in counts.json()[1:]) == [2, 2], counts.text


def test_a_developer_changes_the_catalog_but_not_connectors_or_the_cluster(server: ServerProcess,
                                                                          data: dict[str, str]) -> None:
    mine, typed = uniq("DEVS"), uniq("DEVT")
    with as_user(server, "dev") as c:
        ok(ksql(c, f"create stream {mine} (a int) with (kafka_topic='{mine.lower()}', partitions=1, "
                   f"value_format='json'); insert into {mine} (a) values (1); CREATE TYPE {typed} AS STRUCT<X INT>;"))
        ok(ksql(c, f"ALTER STREAM {mine} ADD COLUMN B INT; DROP TYPE {typed};"))
        [created] = ok(ksql(c, f"CREATE STREAM {mine}_COPY AS SELECT * FROM {mine};"))
        query_id = created["commandStatus"]["queryId"]
        ok(ksql(c, f"PAUSE {query_id}; RESUME {query_id};"))
        ok(ksql(c, f"TERMINATE {query_id}; DROP STREAM {mine}_COPY DELETE TOPIC;"))
        # connectors are the admin's: a request holding one is refused whole, its DDL included
        late = uniq("LATE")
        forbidden(ksql(c, f"CREATE STREAM {late} (A INT) WITH (KAFKA_TOPIC='{late}', PARTITIONS=1, "
                          f"VALUE_FORMAT='JSON');\nDROP CONNECTOR IF EXISTS nothing;"), "dev", "DROP CONNECTOR")
        forbidden(ksql(c, f"CREATE SOURCE CONNECTOR {uniq('C')} WITH ('connector.class'='x');"), "dev",
                  "CREATE SOURCE CONNECTOR")
        forbidden(c.post("/ksql/terminate", json={"deleteTopicList": [".*"]}), "dev", "TERMINATE CLUSTER")
        ok(ksql(c, f"DROP STREAM {mine} DELETE TOPIC;"))
    assert late not in sources(server) and data["stream"] in sources(server)  # the cluster is intact
    with as_user(server, "dev", http1=False, http2=True) as h2:
        resp = h2.post("/inserts-stream", content=json.dumps({"target": data["stream"]}) + "\n")
        assert resp.status_code == 200, resp.text


def test_the_admin_manages_connectors(server: ServerProcess) -> None:
    with as_user(server, "ana") as c:
        [dropped] = ok(ksql(c, "DROP CONNECTOR IF EXISTS none_such;"))
        assert dropped["@type"] in ("currentStatus", "warning_entity", "drop_connector"), dropped


def test_wrong_or_missing_credentials_are_401(server: ServerProcess) -> None:
    assert httpx.get(server.url + "/info", auth=("rita", "ana-pw")).status_code == 401
    assert httpx.post(server.url + "/ksql", json={"ksql": "SHOW STREAMS;"}, auth=("ghost", "x")).status_code == 401


# --- limits --------------------------------------------------------------------------------------------


class OpenPush:
    """A push query held open on its own connection: the header read, rows left unread."""

    def __init__(self, server: ServerProcess, user: str, statement: str) -> None:
        self.client = as_user(server, user)
        self.cm = self.client.stream("POST", "/query-stream", json={"sql": statement},
                                     headers={"Accept": "application/vnd.ksqlapi.delimited.v1"})
        self.response = self.cm.__enter__()
        # kept: a line iterator that is dropped closes the response, and the server sees the client leave
        self.status = self.response.status_code
        self.lines = self.response.iter_lines()
        self.first = next(self.lines) if self.status == 200 else self.response.read().decode()

    @property
    def query_id(self) -> str:
        return str(json.loads(self.first)["queryId"])

    def close(self) -> None:
        self.cm.__exit__(None, None, None)
        self.client.close()


def test_push_queries_past_the_limit_are_refused_and_a_closed_one_frees_a_slot(server: ServerProcess,
                                                                              data: dict[str, str]) -> None:
    """The same statement from several clients shares one Spark query (server/sharing.py), yet
    each client's subscription counts as a push query, as ksqlDB counts them."""
    statement = f"SELECT * FROM {data['stream']} EMIT CHANGES;"
    opened = [OpenPush(server, user, statement) for user in ("rita", "nora")]
    try:
        assert [o.status for o in opened] == [200, 200], [o.first for o in opened]
        assert push_gauge(server) == PUSH_LIMIT
        third = OpenPush(server, "ana", statement)  # the admin too: the limit is the server's
        third.close()
        assert third.status == 400, third.first
        body = json.loads(third.first)
        assert body["error_code"] == 40001 and body["statementText"] == statement.strip()
        assert body["message"] == ("Not executing statement(s) as it would cause the number of active, push queries "
                                   "to exceed the configured limit. Terminate existing PUSH queries, or increase the "
                                   "'ksql.max.push.queries' setting via the 'ksql-server.properties' file. Current "
                                   "push query count: 2. Configured limit: 2.")
        with as_user(server, "rita") as c:  # pull queries and PRINT are not push queries
            assert pull(c, f"SELECT * FROM {data['table']};").status_code == 200
        with as_user(server, "nora") as c:  # another reader may not close rita's query
            forbidden(c.post("/close-query", json={"queryId": opened[0].query_id}), "nora", "another user's query")
        with as_user(server, "dev") as c:
            forbidden(c.post("/close-query", json={"queryId": opened[0].query_id}), "dev", "another user's query")
        with as_user(server, "rita") as c:
            c.post("/close-query", json={"queryId": opened[0].query_id}).raise_for_status()
        deadline = time.monotonic() + 30
        while True:  # the slot is free once the closed query's response has ended
            again = OpenPush(server, "dev", statement)
            if again.status == 200 or time.monotonic() > deadline:
                break
            again.close()
            time.sleep(0.5)
        opened.append(again)
        assert again.status == 200, again.first
    finally:
        for o in opened:
            o.close()
    wait_for_push_queries(server, 0)


def push_gauge(server: ServerProcess) -> float:
    with as_user(server, "rita") as c:
        m = re.search(r"^streamsql_server_push_queries (\S+)$", c.get("/metrics").text, re.MULTILINE)
    assert m, "no streamsql_server_push_queries in /metrics"
    return float(m.group(1))


def wait_for_push_queries(server: ServerProcess, wanted: int) -> None:
    deadline = time.monotonic() + 30
    while push_gauge(server) != wanted:
        assert time.monotonic() < deadline, f"push queries never went to {wanted}"
        time.sleep(0.3)


def test_a_client_that_leaves_frees_its_push_slot(server: ServerProcess, data: dict[str, str]) -> None:
    wait_for_push_queries(server, 0)
    held = [OpenPush(server, "rita", f"SELECT * FROM {data['stream']} EMIT CHANGES;") for _ in range(PUSH_LIMIT)]
    assert [h.status for h in held] == [200] * PUSH_LIMIT
    assert push_gauge(server) == PUSH_LIMIT
    for h in held:
        h.close()  # the connection goes: no /close-query
    wait_for_push_queries(server, 0)


def test_pull_queries_past_the_rate_are_429(server: ServerProcess, data: dict[str, str]) -> None:
    statuses: list[int] = []
    bodies: list[dict[str, Any]] = []

    def one() -> None:
        with as_user(server, "rita") as c:
            resp = c.post("/query-stream", json={"sql": f"SELECT * FROM {data['table']};"})
            statuses.append(resp.status_code)
            if resp.status_code == 429:
                bodies.append(resp.json())

    threads = [threading.Thread(target=one) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses.count(200) >= 1 and statuses.count(429) >= 12 - 8, statuses  # 4/s, a second's burst
    assert set(statuses) <= {200, 429}
    assert bodies[0] == {"@type": "generic_error", "error_code": 42900,
                         "message": "Host is at rate limit for pull queries. Currently set to 4.0 qps."}


def test_persistent_queries_past_the_limit_are_refused_before_anything_runs(server: ServerProcess,
                                                                            data: dict[str, str]) -> None:
    running = persistent_queries(server)
    assert len(running) == 1  # the data fixture's table
    with as_user(server, "dev") as c:
        first = uniq("P1")
        [created] = ok(ksql(c, f"CREATE STREAM {first} AS SELECT * FROM {data['stream']};"))
        extra, second = uniq("PX"), uniq("P2")
        text = (f"CREATE STREAM {extra} (A INT) WITH (KAFKA_TOPIC='{extra}', PARTITIONS=1, VALUE_FORMAT='JSON');\n"
                f"CREATE STREAM {second} AS SELECT * FROM {data['stream']};")
        refused = ksql(c, text)
        assert refused.status_code == 400, refused.text
        body = refused.json()
        assert body["error_code"] == 40001 and body["statementText"] == text
        assert body["message"] == ("Not executing statement(s) as it would cause the number of active, persistent "
                                   "queries to exceed the configured limit. Use the TERMINATE command to terminate "
                                   "existing queries, or increase the 'ksql.query.persistent.active.limit' setting "
                                   "via the 'ksql-server.properties' file. Current persistent query count: 2. "
                                   "Configured limit: 2.")
        assert extra not in sources(server)  # the request's first statement did not run either
        # terminating one in the same request makes room
        query_id = created["commandStatus"]["queryId"]
        ok(ksql(c, f"TERMINATE {query_id};\nCREATE STREAM {second} AS SELECT * FROM {data['stream']};"))
        assert len(persistent_queries(server)) == 2
        ok(ksql(c, "".join(f"TERMINATE {q};" for q in persistent_queries(server) if q not in running)))
        ok(ksql(c, f"DROP STREAM {first} DELETE TOPIC; DROP STREAM {second} DELETE TOPIC;"))


# --- /metrics --------------------------------------------------------------------------------------------


def test_metrics_count_from_the_servers_start(server: ServerProcess, data: dict[str, str]) -> None:
    """The fixture's unauthorized requests and the table's first rows came before any scrape."""
    with as_user(server, "rita") as c:
        deadline = time.monotonic() + 120
        while True:
            text = c.get("/metrics").text
            m = re.search(r'^streamsql_server_requests_total\{endpoint="/info",status="401"\} (\S+)$', text,
                          re.MULTILINE)
            assert m and float(m.group(1)) >= EARLY_UNAUTHORIZED, text[-3000:]
            rows = [float(v) for v in re.findall(r'^streamsql_query_input_rows_total\{query="[^"]*'
                                                 + data["table"] + r'[^"]*"\} (\S+)$', text, re.MULTILINE)]
            if rows and rows[0] >= 4:
                break
            assert time.monotonic() < deadline, f"the table's 4 input rows were never counted:\n{text[-3000:]}"
            time.sleep(1)


# --- the shell ------------------------------------------------------------------------------------------


def shell(server: ServerProcess, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))  # this checkout's shell
    return subprocess.run([sys.executable, "-m", "streamsql", "shell", server.url, *args], input=stdin,
                          capture_output=True, text=True, timeout=180, env=env)


def test_the_shell_logs_in_with_u_and_p(server: ServerProcess, data: dict[str, str]) -> None:
    done = shell(server, "-u", "rita", "-p", USERS["rita"], "-e", "SHOW STREAMS;")
    assert done.returncode == 0 and data["stream"] in done.stdout, done.stdout + done.stderr
    refused = shell(server, "-u", "rita", "-p", USERS["rita"], "-e", f"DROP STREAM {data['stream']};")
    assert refused.returncode == 1
    assert "user 'rita' has role 'reader', which may not run DROP STREAM" in refused.stdout, refused.stdout
    wrong = shell(server, "--user", "rita", "--password", "nope", "-e", "SHOW STREAMS;")
    assert wrong.returncode != 0 and "Unauthorized" in wrong.stdout + wrong.stderr
    nobody = shell(server, "-e", "SHOW STREAMS;")
    assert nobody.returncode != 0 and "Unauthorized" in nobody.stdout + nobody.stderr


def test_the_shell_asks_for_the_password_and_hides_secrets(server: ServerProcess, data: dict[str, str],
                                                           tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # the history file goes to ~/.streamsql_history
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # this checkout's shell
    sh = PtyShell(["shell", "-u", "dev", server.url], tmp_path)
    try:
        sh.expect(r"Enter password for dev: ")
        sh.line(USERS["dev"])
        sh.expect(r"Connected to server")
        sh.expect(r"streamsql>")
        sh.line("SET 'sasl.password'='hunter2';")
        sh.expect(r"Successfully changed local property 'sasl.password' to '\[hidden\]'")
        sh.line("SET 'ksql.schema.registry.basic.auth.user.info'='u:tiger';")
        sh.expect(r"'ksql.schema.registry.basic.auth.user.info' to '\[hidden\]'")
        sh.line("history")
        sh.expect(r"SET 'sasl.password'='\[hidden\]';")
        sh.line("SHOW PROPERTIES;")
        # the server refuses credentials as a client's properties (its own are the operator's),
        # naming the settings, never their values
        sh.expect(r"prohibited by the KSQL server.*'sasl.password' is server configuration", timeout=120)
        sh.line("UNSET 'sasl.password';")
        sh.expect(r"streamsql>")
        sh.line("UNSET 'ksql.schema.registry.basic.auth.user.info';")
        sh.expect(r"streamsql>")
        sh.line(f"DROP CONNECTOR IF EXISTS {uniq('C')};")
        sh.expect(r"user 'dev' has role 'developer', which may not run DROP CONNECTOR")
        sh.line("exit")
        assert sh.wait() == 0
    finally:
        sh.kill()
    shown = sh.screen
    for typed in ("SET 'sasl.password'='hunter2';", "SET 'ksql.schema.registry.basic.auth.user.info'='u:tiger';"):
        shown = shown.replace(typed, "")  # what the user typed is on their terminal, as in any shell
    assert "hunter2" not in shown and "tiger" not in shown, shown
    history = (tmp_path / ".streamsql_history").read_text()
    assert "hunter2" not in history and "tiger" not in history and "[hidden]" in history, history
