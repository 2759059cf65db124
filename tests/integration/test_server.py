"""The REST server over real HTTP: one real ``streamsql server`` process (auth on) shared by the
module, on the session's real broker; the crash test starts a server of its own, SIGKILLs it
mid-stream and restarts it on the same data directory with TLS and without auth.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from streamsql.conformance.server_process import ServerProcess
from streamsql.runtime.results import RowStream
from tests.support.proxies import self_signed

pytestmark = pytest.mark.integration

USER, PASSWORD = "fred", "letmein"


@pytest.fixture(scope="module")
def server(bootstrap: str, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("server")
    users = root / "users.properties"
    users.write_text(f"# basic auth users\n{USER}: {PASSWORD},admin\n")
    proc = ServerProcess(bootstrap, root / "data", ["--auth-file", str(users), "--max-request-bytes", "65536",
                                                     "--command-timeout-ms", "500"],
                         service_id=f"srv{uuid.uuid4().hex[:8]}_")
    proc.start(auth=(USER, PASSWORD))
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def client(server: ServerProcess):  # type: ignore[no-untyped-def]
    with httpx.Client(base_url=server.url, auth=(USER, PASSWORD), timeout=600) as c:
        yield c


def uniq(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}".upper()


def ksql(client: httpx.Client, text: str, **extra: Any) -> httpx.Response:
    return client.post("/ksql", json={"ksql": text, **extra},
                       headers={"Accept": "application/vnd.ksql.v1+json", "Content-Type": "application/vnd.ksql.v1+json"})


def ok(resp: httpx.Response) -> Any:
    assert resp.status_code == 200, resp.text
    return resp.json()


def query(client: httpx.Client, text: str, **props: str) -> list[dict[str, Any]]:
    resp = client.post("/query", json={"ksql": text, "streamsProperties": props})
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("application/vnd.ksql.v1+json")
    return json.loads(resp.text)


def make_stream(client: httpx.Client, rows: int = 3) -> str:
    name = uniq("s")
    body = ok(ksql(client, f"CREATE STREAM {name} (ID VARCHAR KEY, V INT) WITH (KAFKA_TOPIC='{name.lower()}', "
                           f"VALUE_FORMAT='JSON', PARTITIONS=1);"))
    assert body[0]["@type"] == "currentStatus"
    if rows:
        inserts = " ".join(f"INSERT INTO {name} (ID, V) VALUES ('k{i}', {i});" for i in range(rows))
        assert ok(ksql(client, inserts)) == []  # INSERT VALUES answers with no entity, as in ksqlDB
    return name


def test_info_healthcheck_and_small_endpoints(client: httpx.Client, server: ServerProcess) -> None:
    info = ok(client.get("/info"))["KsqlServerInfo"]
    assert info["serverStatus"] == "RUNNING" and info["ksqlServiceId"] == server.service_id
    assert info["kafkaClusterId"]
    health = ok(client.get("/healthcheck"))
    assert health["isHealthy"] is True and health["details"]["kafka"]["isHealthy"] is True
    assert ok(client.get("/chc/live")) == {}
    assert client.get("/", follow_redirects=False).status_code == 307
    meta = ok(client.get("/v1/metadata"))
    assert meta["clusterId"]["scope"]["clusters"]["ksql-cluster"] == server.service_id
    assert ok(client.get("/is_valid_property/auto.offset.reset")) is True
    bad = client.get("/is_valid_property/ksql.service.id")
    assert bad.status_code == 400 and bad.json()["error_code"] == 40000


def test_the_server_listens_on_this_machine_only_by_default(server: ServerProcess) -> None:
    """No --host: a laptop tool without authentication by default does not serve the network
    (ksqlDB binds every interface; issue #18)."""
    import psutil

    assert server.proc is not None
    # the server's own process holds the listener (hypercorn runs in it); its children (Spark's
    # JVM, Python workers) come and go and listen on ports of their own
    listening = {c.laddr.ip for c in psutil.Process(server.proc.pid).net_connections("inet")
                 if c.status == psutil.CONN_LISTEN and c.laddr.port == server.port}
    assert listening == {"127.0.0.1"}
    assert f"listening on http://127.0.0.1:{server.port} " in server.log_path.read_text()


def test_a_connection_the_client_closed_is_closed_by_the_server(server: ServerProcess) -> None:
    """Every closed client connection used to stay open on the server's side (CLOSE-WAIT) until
    the hour-long keep-alive timer fired: hypercorn does not act on the client's FIN between
    requests. A server answering 1,000 requests a minute then held thousands of sockets, and
    once its descriptors passed 1,024 py4j's callback server (select()) failed and no push query
    delivered a row (the abuse drill, docs/reliability.md)."""
    import psutil

    assert server.proc is not None
    process = psutil.Process(server.proc.pid)

    def lingering() -> int:
        return sum(1 for c in process.net_connections("inet")
                   if c.laddr.port == server.port and c.status == psutil.CONN_CLOSE_WAIT)

    before = lingering()
    for _ in range(30):
        with httpx.Client(base_url=server.url, auth=(USER, PASSWORD), timeout=30) as c:
            assert c.get("/info").status_code == 200
    deadline = time.monotonic() + 10
    while lingering() > before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert lingering() <= before


def test_ksql_entities_status_and_sequence_numbers(client: httpx.Client) -> None:
    name = uniq("src")
    sink = uniq("sink")
    created = ok(ksql(client, f"CREATE STREAM {name} (ID VARCHAR KEY, V INT) WITH (KAFKA_TOPIC='{name.lower()}', "
                              f"VALUE_FORMAT='JSON', PARTITIONS=2); SHOW STREAMS; SET 'auto.offset.reset'='earliest';"
                              f"CREATE STREAM {sink} AS SELECT ID, V * 2 AS V2 FROM {name};"))
    assert [e["@type"] for e in created] == ["currentStatus", "streams", "currentStatus"]  # SET: no entity
    status = created[0]
    assert status["commandId"] == f"stream/`{name}`/create"
    assert status["commandStatus"]["status"] == "SUCCESS" and status["commandStatus"]["message"] == "Stream created"
    assert status["statementText"].startswith("CREATE STREAM") and status["warnings"] == []
    assert {"type": "STREAM", "name": name, "topic": name.lower(), "keyFormat": "KAFKA", "valueFormat": "JSON",
            "isWindowed": False} in created[1]["streams"]
    csas = created[2]
    query_id = csas["commandStatus"]["queryId"]
    assert query_id.startswith(f"CSAS_{sink}_") and csas["commandSequenceNumber"] > status["commandSequenceNumber"]

    # commandSequenceNumber: a done command is waited for instantly, a future one times out with 50301
    seq = csas["commandSequenceNumber"]
    assert ok(ksql(client, "SHOW QUERIES;", commandSequenceNumber=seq))[0]["@type"] == "queries"
    late = ksql(client, "SHOW QUERIES;", commandSequenceNumber=seq + 1000)
    assert late.status_code == 503 and late.json()["error_code"] == 50301

    listing = ok(ksql(client, f"SHOW QUERIES; DESCRIBE {sink}; DESCRIBE {name} EXTENDED; SHOW TOPICS; "
                              f"SHOW PROPERTIES; SHOW FUNCTIONS; SHOW TABLES; EXPLAIN {query_id};"))
    types = [e["@type"] for e in listing]
    assert types == ["queries", "sourceDescription", "sourceDescription", "kafka_topics", "properties",
                     "function_names", "tables", "queryDescription"]
    running = next(q for q in listing[0]["queries"] if q["id"] == query_id)
    assert running["sinks"] == [sink] and running["queryType"] == "PERSISTENT" and running["state"] == "RUNNING"
    # SHOW QUERIES EXTENDED: ksqlDB's query_descriptions, one QueryDescription per query
    described = ok(ksql(client, "SHOW QUERIES EXTENDED;"))[0]
    assert described["@type"] == "query_descriptions" and "queries" not in described
    mine = next(q for q in described["queryDescriptions"] if q["id"] == query_id)
    assert mine["sinks"] == [sink] and mine["sources"] == [name] and mine["queryType"] == "PERSISTENT"
    assert mine["state"] == "RUNNING" and mine["statementText"].startswith(f"CREATE STREAM {sink} AS SELECT")
    assert [f["name"] for f in mine["fields"]] == ["ID", "V2"] and mine["fields"][0]["type"] == "KEY"
    assert {"windowType", "topology", "executionPlan", "overriddenProperties", "ksqlHostQueryStatus",
            "queryErrors", "tasksMetadata"} <= set(mine)
    desc = listing[1]["sourceDescription"]
    assert desc["name"] == sink and desc["type"] == "STREAM" and desc["writeQueries"][0]["id"] == query_id
    assert desc["fields"] == [{"name": "ID", "schema": {"type": "STRING", "fields": None, "memberSchema": None},
                               "type": "KEY"},
                              {"name": "V2", "schema": {"type": "INTEGER", "fields": None, "memberSchema": None}}]
    extended = listing[2]["sourceDescription"]
    assert extended["extended"] is True and extended["partitions"] == 2 and extended["fields"][0]["name"] == "ROWTIME"
    assert {"name": name.lower(), "replicaInfo": [1, 1]} in listing[3]["topics"]
    assert any(p["name"] == "auto.offset.reset" for p in listing[4]["properties"])
    assert any(f["name"] == "UCASE" for f in listing[5]["functions"])

    # per-request streamsProperties show up as overrides, and do not leak into later requests
    props = ok(ksql(client, "SHOW PROPERTIES;", streamsProperties={"ksql.streams.auto.offset.reset": "earliest"}))[0]
    assert "auto.offset.reset" in props["overwrittenProperties"]
    assert ok(ksql(client, "SHOW PROPERTIES;"))[0]["overwrittenProperties"] == []

    statuses = ok(client.get("/status"))["commandStatuses"]
    assert statuses[f"stream/`{sink}`/create"] == "SUCCESS"
    one = ok(client.get(f"/status/stream/{sink}/create"))
    assert one["status"] == "SUCCESS" and one["queryId"] == query_id
    assert client.get("/status/stream/NOPE/create").status_code == 404

    dropped = ok(ksql(client, f"DROP STREAM {sink};"))[0]
    assert dropped["commandId"] == f"stream/`{sink}`/drop" and dropped["commandSequenceNumber"] > seq


def test_errors_use_the_envelope(client: httpx.Client) -> None:
    name = make_stream(client, rows=0)
    bad_json = client.post("/ksql", content=b"{not json", headers={"Content-Type": "application/json"})
    assert bad_json.status_code == 400
    assert bad_json.json()["@type"] == "generic_error" and bad_json.json()["error_code"] == 40000

    unknown = ksql(client, "FROBNICATE ALL THE THINGS;")
    body = unknown.json()
    assert unknown.status_code == 400 and body["@type"] == "statement_error" and body["error_code"] == 40001
    assert "line 1:" in body["message"] and body["statementText"] and body["entities"] == []

    # a later statement fails: the earlier statements' entities come back with the error
    partial = ksql(client, f"SHOW STREAMS; SELECT * FROM {name} EMIT CHANGES;")
    assert partial.status_code == 400 and partial.json()["error_code"] == 40002
    failing = ksql(client, f"SHOW STREAMS; DESCRIBE NO_SUCH_{name};")
    body = failing.json()
    assert failing.status_code == 400 and body["error_code"] == 40001
    assert body["statementText"] == f"DESCRIBE NO_SUCH_{name};" and body["entities"][0]["@type"] == "streams"
    assert "Traceback" not in failing.text

    prohibited = ksql(client, "SHOW STREAMS;", streamsProperties={"ksql.service.id": "other"})
    assert prohibited.status_code == 400 and prohibited.json()["error_code"] == 40000

    too_big = ksql(client, "SHOW STREAMS; -- " + "x" * 70000)
    assert too_big.status_code == 413 and too_big.json()["error_code"] == 41300

    assert client.get("/no/such/path").json()["error_code"] == 40400
    wrong_method = client.get("/ksql")
    assert wrong_method.status_code == 405 and wrong_method.json()["@type"] == "generic_error"

    bad_query = client.post("/query", json={"ksql": "SELECT * FROM NOPE_NOT_THERE EMIT CHANGES;"})
    assert bad_query.status_code == 400 and bad_query.json()["error_code"] == 40001
    close_unknown = client.post("/close-query", json={"queryId": "no-such-query"})
    assert close_unknown.status_code == 400 and close_unknown.json()["message"] == "No query with id no-such-query"


def test_query_endpoint_push_and_pull(client: httpx.Client) -> None:
    name = make_stream(client, rows=3)
    push = query(client, f"SELECT ID, V FROM {name} EMIT CHANGES LIMIT 2;", **{"auto.offset.reset": "earliest"})
    assert push[0]["header"]["schema"] == "`ID` STRING, `V` INTEGER" and push[0]["header"]["queryId"]
    assert [e["row"]["columns"] for e in push[1:3]] == [["k0", 0], ["k1", 1]]
    assert push[3] == {"finalMessage": "Limit Reached"} and len(push) == 4

    pull = query(client, f"SELECT * FROM {name} WHERE V > 0;")
    # a pull query over a stream marks no KEY columns (ksqlDB's pull-queries-with-headers RQTT)
    assert pull[0]["header"]["schema"] == "`ID` STRING, `V` INTEGER"
    assert sorted(e["row"]["columns"][1] for e in pull[1:-1]) == [1, 2]
    assert pull[-1] == {"finalMessage": "Query Completed"}


def _pull_until(client: httpx.Client, sql: str, want: Any, timeout_s: float = 120) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    while True:
        resp = client.post("/query", json={"ksql": sql})
        answer = json.loads(resp.text) if resp.status_code == 200 else None
        if answer is not None and want(answer) or time.monotonic() > deadline:
            assert answer is not None and want(answer), resp.text
            return answer
        time.sleep(0.2)


def test_a_pull_query_sees_each_acknowledged_write_and_a_re_created_table_at_once(client: httpx.Client) -> None:
    """A pull query asks Kafka for its table's changelog end only when the server counted a
    write since the last time it asked (``TableStore.catch_up``): a row whose INSERT was
    acknowledged is in the very next pull query's answer, every time; a DROP is seen by the
    next one, and the same text over a table created again under the name answers from the
    new table (its plan, WHERE analysis and Arrow programs are made again)."""
    src, table = make_stream(client, rows=1), uniq("t")
    ok(ksql(client, f"CREATE TABLE {table} AS SELECT ID, COUNT(*) AS N FROM {src} GROUP BY ID;",
            streamsProperties={"auto.offset.reset": "earliest"}))
    pull = f"SELECT * FROM {table} WHERE ID = 'k0';"
    _pull_until(client, pull, lambda a: [e["row"]["columns"] for e in a[1:]] == [["k0", 1]])
    for n in range(100, 108):
        query(client, pull)  # a pull just before: the store was caught up a moment ago
        ok(ksql(client, f"INSERT INTO {table} (ID, N) VALUES ('k0', {n});"))  # the table's own topic
        answer = query(client, pull)
        assert [e["row"]["columns"] for e in answer[1:]] == [["k0", n]], answer

    ok(ksql(client, f"DROP TABLE {table} DELETE TOPIC;"))
    gone = client.post("/query", json={"ksql": pull})
    assert gone.status_code == 400 and table in gone.text, gone.text
    ok(ksql(client, f"CREATE TABLE {table} AS SELECT ID, SUM(V) AS TOTAL, COUNT(*) AS C FROM {src} GROUP BY ID;",
            streamsProperties={"auto.offset.reset": "earliest"}))
    again = _pull_until(client, pull, lambda a: len(a) == 2)
    assert again[0]["header"]["schema"] == "`ID` STRING KEY, `TOTAL` INTEGER, `C` BIGINT"
    assert again[1]["row"]["columns"] == ["k0", 0, 1]


def test_topology_of_the_running_pipeline(client: httpx.Client) -> None:
    """GET /topology: what runs, with each query's steps, as JSON, Mermaid or DOT; one query alone."""
    name = make_stream(client, rows=2)
    doubled = uniq("doubled")
    created = ok(ksql(client, f"CREATE STREAM {doubled} AS SELECT ID, V * 2 AS V2 FROM {name};",
                      streamsProperties={"auto.offset.reset": "earliest"}))
    query_id = created[0]["commandStatus"]["queryId"]
    graph = ok(client.get("/topology"))
    nodes = {n["id"]: n for n in graph["nodes"]}
    assert nodes[f"source:{name}"]["kind"] == "stream" and nodes[f"query:{query_id}"]["detail"].startswith("CREATE")
    steps = [n["label"].split(" ")[0] for n in graph["nodes"] if n["query"] == query_id]
    assert steps == ["Scan", "Select", "Kafka"]
    assert {"source": f"source:{name}", "target": f"query:{query_id}:0"} in [
        {k: e[k] for k in ("source", "target")} for e in graph["edges"]]
    mermaid = client.get("/topology", params={"format": "mermaid", "query": query_id.lower()})
    assert mermaid.status_code == 200 and mermaid.headers["content-type"].startswith("text/plain")
    assert mermaid.text.startswith("flowchart LR") and name in mermaid.text and doubled in mermaid.text
    other = make_stream(client, rows=0)  # not read by the query: not in its picture
    assert other not in client.get("/topology", params={"format": "text", "query": query_id}).text
    dot = client.get("/topology", params={"format": "dot"})
    assert dot.headers["content-type"].startswith("text/vnd.graphviz") and f'"cluster_{query_id}"' in dot.text
    bad = client.get("/topology", params={"format": "svgz"})
    assert bad.status_code == 400 and "Unknown topology format 'svgz'" in bad.json()["message"]
    unknown = client.get("/topology", params={"query": "NOPE_1"})
    assert unknown.status_code == 400 and "Query with id:NOPE_1 does not exist" in unknown.json()["message"]


def _series(text: str, name: str, query: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + "{") and f'query="{query}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return None


def test_prometheus_metrics_count_a_known_input(client: httpx.Client) -> None:
    """GET /metrics after 4 records through a query: its input rows, batches, lag 0, up."""
    name = make_stream(client, rows=4)
    copy = uniq("copy")
    created = ok(ksql(client, f"CREATE STREAM {copy} AS SELECT ID, V FROM {name};",
                      streamsProperties={"auto.offset.reset": "earliest"}))
    query_id = created[0]["commandStatus"]["queryId"]
    deadline = time.monotonic() + 120
    text = ""
    while time.monotonic() < deadline:
        resp = client.get("/metrics")
        assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/plain")
        text = resp.text
        if _series(text, "streamsql_query_input_rows_total", query_id) == 4:
            break
        time.sleep(1)
    assert _series(text, "streamsql_query_input_rows_total", query_id) == 4, text
    assert _series(text, "streamsql_query_up", query_id) == 1
    assert (_series(text, "streamsql_query_batches_total", query_id) or 0) >= 1
    lags = [line for line in text.splitlines() if line.startswith("streamsql_query_consumer_lag{")
            and f'query="{query_id}"' in line]
    assert lags and all(line.endswith(" 0.0") for line in lags), lags
    assert "# TYPE streamsql_processing_log_records_total counter" in text


def test_connector_statements_answer_with_ksqldbs_entities(client: httpx.Client) -> None:
    from osmem_server import OsmemServer

    es = "io.confluent.connect.elasticsearch.ElasticsearchSinkConnector"
    stream = make_stream(client, rows=2)
    name = uniq("sink")
    search = OsmemServer.start()
    try:
        [created] = ok(ksql(client, f"CREATE SINK CONNECTOR {name} WITH ('connector.class'='{es}', "
                                    f"'connection.url'='{search.url}', 'topics'='{stream.lower()}', "
                                    f"'key.ignore'='false');"))
        assert created["@type"] == "connector_info"
        assert created["info"]["name"] == name and created["info"]["type"] == "sink"
        assert created["info"]["config"]["connector.class"] == es and created["info"]["config"]["name"] == name
        [listed] = ok(ksql(client, "SHOW CONNECTORS;"))
        assert listed["@type"] == "connector_list"
        mine = [c for c in listed["connectors"] if c["name"] == name]
        assert mine == [{"name": name, "type": "sink", "className": es, "state": "RUNNING (1/1 tasks RUNNING)"}]
        [described] = ok(ksql(client, f"DESCRIBE CONNECTOR {name};"))
        assert described["@type"] == "connector_description"
        assert described["connectorClass"] == es and described["topics"] == [stream.lower()]
        assert described["sources"] == []
        status = described["status"]
        assert status["name"] == name and status["type"] == "sink" and status["connector"]["state"] == "RUNNING"
        assert [t["id"] for t in status["tasks"]] == [0] and "worker_id" in status["connector"]
        deadline = time.monotonic() + 120
        docs: dict[str, Any] = {}
        while time.monotonic() < deadline and len(docs) < 2:
            with httpx.Client(base_url=search.url, timeout=60) as c:  # a loaded machine answers slowly
                c.post(f"/{stream.lower()}/_refresh")
                found = c.post(f"/{stream.lower()}/_search", json={"size": 10})
                hits = found.json()["hits"]["hits"] if found.status_code == 200 else []
                docs = {h["_id"]: h["_source"] for h in hits}
            time.sleep(0.5)
        assert docs == {"k0": {"V": 0}, "k1": {"V": 1}}
        [dropped] = ok(ksql(client, f"DROP CONNECTOR {name};"))
        assert dropped == {"@type": "drop_connector", "statementText": f"DROP CONNECTOR {name};",
                           "connectorName": name, "warnings": []}
        bad = ksql(client, f"CREATE SINK CONNECTOR {name} WITH ('connector.class'='com.example.Nope', "
                           f"'topics'='{stream.lower()}');")
        assert bad.status_code == 400
        assert "com.example.Nope" in bad.json()["message"]
    finally:
        search.close()


def _read_lines(resp: httpx.Response) -> list[str]:
    return [line for line in resp.text.split("\n") if line]


def test_query_stream_over_http2_cleartext(server: ServerProcess) -> None:
    with httpx.Client(base_url=server.url, auth=(USER, PASSWORD), http1=False, http2=True, timeout=600) as h2:
        name = make_stream(h2, rows=3)
        resp = h2.post("/query-stream", json={"sql": f"SELECT * FROM {name} EMIT CHANGES LIMIT 3;",
                                              "properties": {"auto.offset.reset": "earliest"}})
        assert resp.http_version == "HTTP/2" and resp.status_code == 200, resp.text
        assert resp.headers["content-type"] == "application/vnd.ksqlapi.delimited.v1"
        lines = _read_lines(resp)
        meta = json.loads(lines[0])
        assert meta["columnNames"] == ["ID", "V"] and meta["columnTypes"] == ["STRING", "INTEGER"]
        assert meta["queryId"].startswith("transient_")
        assert [json.loads(line) for line in lines[1:]] == [["k0", 0], ["k1", 1], ["k2", 2]]

        as_json = h2.post("/query-stream", json={"sql": f"SELECT V FROM {name} WHERE V = 2;"},
                          headers={"Accept": "application/json"})
        assert as_json.headers["content-type"] == "application/json"
        body = as_json.json()
        assert body[0]["columnNames"] == ["V"] and body[1:] == [[2]]

        # a push query without LIMIT runs until /close-query ends it
        first_line: dict[str, Any] = {}
        got_line = threading.Event()
        rows: list[list[Any]] = []

        def consume() -> None:
            with h2.stream("POST", "/query-stream", json={"sql": f"SELECT V FROM {name} EMIT CHANGES;",
                                                          "properties": {"auto.offset.reset": "earliest"}}) as r:
                for line in r.iter_lines():
                    if not line:
                        continue
                    if not first_line:
                        first_line.update(json.loads(line))
                        got_line.set()
                    else:
                        rows.append(json.loads(line))

        reader = threading.Thread(target=consume)
        reader.start()
        assert got_line.wait(120)
        deadline = time.monotonic() + 120
        while len(rows) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        closed = h2.post("/close-query", json={"queryId": first_line["queryId"]})
        assert closed.status_code == 200
        reader.join(60)
        assert not reader.is_alive() and sorted(r[0] for r in rows) == [0, 1, 2]



def test_identical_push_queries_share_one_spark_query(server: ServerProcess) -> None:
    """Two clients, the same stateless push query from the latest offset: one source query
    (their query ids are its id plus a subscriber number), each client its own LIMIT."""
    with httpx.Client(base_url=server.url, auth=(USER, PASSWORD), timeout=600) as client:
        name = make_stream(client, rows=0)
        heads: list[dict[str, Any]] = []
        rows: dict[int, list[Any]] = {0: [], 1: []}
        ready = threading.Barrier(3)

        def consume(i: int, limit: int) -> None:
            body = {"sql": f"SELECT V FROM {name} EMIT CHANGES LIMIT {limit};"}
            with client.stream("POST", "/query-stream", json=body) as r:
                lines = r.iter_lines()
                heads.append(json.loads(next(line for line in lines if line)))
                ready.wait(120)
                rows[i] += [json.loads(line) for line in lines if line]

        readers = [threading.Thread(target=consume, args=(0, 2)), threading.Thread(target=consume, args=(1, 3))]
        for reader in readers:
            reader.start()
            time.sleep(1.0)  # the second subscribes to the first one's running query
        ready.wait(120)
        time.sleep(3)  # both subscribed; the source reads from the latest offset
        assert ok(ksql(client, " ".join(f"INSERT INTO {name} (ID, V) VALUES ('k{i}', {i});" for i in range(3)))) == []
        for reader in readers:
            reader.join(120)
        assert rows == {0: [[0], [1]], 1: [[0], [1], [2]]}
        ids = sorted(h["queryId"] for h in heads)
        assert ids[0] != ids[1] and ids[0].rsplit("_", 1)[0] == ids[1].rsplit("_", 1)[0]

def test_show_queries_lists_running_push_queries_and_terminate_ends_one(server: ServerProcess) -> None:
    """ksqlDB lists a running push query (type PUSH, no sink) beside the persistent ones, and
    TERMINATE <its id> ends it: its client sees the end of the rows; a finished one is unlisted."""
    with httpx.Client(base_url=server.url, auth=(USER, PASSWORD), timeout=600) as client:
        name = make_stream(client, rows=1)
        head: dict[str, Any] = {}
        got_head, ended = threading.Event(), threading.Event()
        # a shared (latest, stateless) push query and one of its own (earliest: not shared)
        for sql, props in ((f"SELECT V FROM {name} EMIT CHANGES;", {}),
                           (f"SELECT V FROM {name} WHERE V >= 0 EMIT CHANGES;", {"auto.offset.reset": "earliest"})):
            head.clear()
            got_head.clear()
            ended.clear()
            body = {"sql": sql, "properties": props}
            reader = threading.Thread(target=lambda b=body: _consume_body(client, b, head, got_head, ended),
                                      daemon=True)
            reader.start()
            assert got_head.wait(120)
            query_id = head["queryId"]
            listed = ok(ksql(client, "SHOW QUERIES;"))[0]["queries"]
            push = [q for q in listed if q["id"] == query_id]
            assert push and push[0]["queryType"] == "PUSH" and push[0]["sinks"] == [], listed
            assert push[0]["queryString"].rstrip(";") == sql.rstrip(";") and push[0]["state"] == "RUNNING"
            terminated = ok(ksql(client, f"TERMINATE {query_id};"))
            assert terminated[0]["commandStatus"]["message"] == "Query terminated."
            assert ended.wait(60), "TERMINATE did not end the push query's rows"
            reader.join(60)
            deadline = time.monotonic() + 30
            while any(q["id"] == query_id for q in ok(ksql(client, "SHOW QUERIES;"))[0]["queries"]):
                assert time.monotonic() < deadline, "an ended push query is still listed"
                time.sleep(0.2)
        unknown = ksql(client, "TERMINATE transient_NO_SUCH_1;")
        assert unknown.status_code == 400 and "Unknown queryId" in unknown.text


def _consume_body(client: httpx.Client, body: dict[str, Any], head: dict[str, Any], got_head: threading.Event,
                  ended: threading.Event) -> None:
    with client.stream("POST", "/query-stream", json=body) as r:
        for line in r.iter_lines():
            if line and not head:
                head.update(json.loads(line))
                got_head.set()
    ended.set()


def test_a_refused_http2_request_leaves_its_connection_usable(server: ServerProcess) -> None:
    """A 401 to a chunked HTTP/2 /inserts-stream was answered while its body was still coming:
    the server dropped the whole connection, so the client's next request on it failed (found
    by the REST fuzzer). The refused body is read first now."""
    with httpx.Client(base_url=server.url, http1=False, http2=True, timeout=30) as h2:
        for _ in range(3):
            refused = h2.post("/inserts-stream", content=iter([b"[null]"]))
            assert refused.status_code == 401, refused.text
            assert h2.get("/healthcheck").status_code == 200  # the same connection answers


def test_inserts_stream(server: ServerProcess) -> None:
    with httpx.Client(base_url=server.url, auth=(USER, PASSWORD), http1=False, http2=True, timeout=600) as h2:
        name = make_stream(h2, rows=0)
        body = "\n".join([json.dumps({"target": name.lower()}), json.dumps({"id": "a", "v": 1}),
                          json.dumps({"ID": "b", "V": 2, "ROWTIME": 1000}), ""])
        resp = h2.post("/inserts-stream", content=body.encode())
        assert resp.status_code == 200 and resp.http_version == "HTTP/2"
        assert [json.loads(x) for x in _read_lines(resp)] == [{"status": "ok", "seq": 0}, {"status": "ok", "seq": 1}]

        bad = "\n".join([json.dumps({"target": name}), json.dumps({"ID": "c", "V": "not a number"}),
                         json.dumps({"ID": "d", "V": 4})])
        acks = [json.loads(x) for x in _read_lines(h2.post("/inserts-stream", content=bad.encode()))]
        assert acks[0]["status"] == "error" and acks[0]["seq"] == 0 and acks[0]["error_code"] == 40000
        assert "V" in acks[0]["message"] and len(acks) == 1  # the response ends at the first bad row

        unknown = h2.post("/inserts-stream", content=json.dumps({"target": "NO_SUCH_STREAM"}).encode())
        assert unknown.status_code == 400 and unknown.json()["error_code"] == 40000

        pull = h2.post("/query", json={"ksql": f"SELECT ID, V, ROWTIME FROM {name};"})
        rows = [e["row"]["columns"] for e in json.loads(pull.text) if "row" in e]
        assert sorted(rows)[0][:2] == ["a", 1] and sorted(rows)[1] == ["b", 2, 1000] and len(rows) == 2

    with httpx.Client(base_url=server.url, auth=(USER, PASSWORD), timeout=600) as h1:
        http1 = h1.post("/inserts-stream", content=json.dumps({"target": name}).encode())
        assert http1.status_code == 400 and http1.json()["error_code"] == 40004


def test_basic_auth(server: ServerProcess) -> None:
    anonymous = httpx.post(server.url + "/ksql", json={"ksql": "SHOW STREAMS;"})
    assert anonymous.status_code == 401 and anonymous.json() == {"@type": "generic_error", "error_code": 40100,
                                                                 "message": "Unauthorized"}
    assert anonymous.headers["www-authenticate"].startswith("Basic")
    wrong = httpx.get(server.url + "/info", auth=(USER, "nope"))
    assert wrong.status_code == 401
    garbage = httpx.get(server.url + "/info", headers={"Authorization": "Basic " + base64.b64encode(b"x").decode()})
    assert garbage.status_code == 401
    assert httpx.get(server.url + "/healthcheck").status_code == 200  # health probes need no credentials
    assert httpx.get(server.url + "/info", auth=(USER, PASSWORD)).status_code == 200


@pytest.fixture
def own_server(bootstrap: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    """A server of one test's own, for a test that kills it (the module's server serves the rest,
    in whatever order they run)."""
    users = tmp_path / "users.properties"
    users.write_text(f"{USER}: {PASSWORD},admin\n")
    proc = ServerProcess(bootstrap, tmp_path / "data", ["--auth-file", str(users)],
                         service_id=f"own{uuid.uuid4().hex[:8]}_")
    proc.start(auth=(USER, PASSWORD))
    try:
        yield proc
    finally:
        proc.stop()


def test_fuzzed_statements_get_an_error_envelope_never_a_stack_trace(own_server: ServerProcess) -> None:
    """The statement fuzzer of tests/unit/sql/test_statement_fuzz.py over HTTP, on a server of its own
    (a fuzzed statement that parses may run, TERMINATE ALL included): every answer is 200 or a
    4xx with ksqlDB's error envelope, and no message carries a Python traceback."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from tests.unit.sql.test_statement_fuzz import PREFIXES, STATEMENTS

    answers: list[int] = []
    with httpx.Client(base_url=own_server.url, auth=(USER, PASSWORD), timeout=120) as c:
        @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        @given(PREFIXES, STATEMENTS, st.sampled_from(["/ksql", "/query"]))
        def check(prefix: str, tail: str, endpoint: str) -> None:
            resp = c.post(endpoint, json={"ksql": prefix + tail, "streamsProperties": {}})
            answers.append(resp.status_code)
            assert resp.status_code == 200 or 400 <= resp.status_code < 500, (resp.status_code, resp.text[:500])
            assert "Traceback" not in resp.text and 'File "' not in resp.text, resp.text[:2000]
            if resp.status_code != 200:
                body = resp.json()
                assert body["@type"] in ("statement_error", "generic_error") and body["message"].strip(), body

        check()
        assert c.get("/info").status_code == 200  # still serving
    assert len(answers) == 150 and 400 in answers


def test_restart_after_sigkill_keeps_catalog_queries_and_data(own_server: ServerProcess, bootstrap: str) -> None:
    """Kills its own server mid-stream, restarted on the same data dir and command topic with
    TLS and without auth; everything comes back and no record is lost."""
    from streamsql.kafka.admin import KafkaAdmin

    server = own_server
    client = httpx.Client(base_url=server.url, auth=(USER, PASSWORD), timeout=600)

    src, evens, counts = uniq("orders"), uniq("evens"), uniq("counts")
    topic = src.lower()
    ok(ksql(client, f"CREATE STREAM {src} (ID VARCHAR KEY, CUST VARCHAR, AMOUNT INT) WITH (KAFKA_TOPIC='{topic}', "
                    f"VALUE_FORMAT='JSON', PARTITIONS=2);"))
    props = {"auto.offset.reset": "earliest"}
    ok(ksql(client, f"CREATE STREAM {evens} AS SELECT ID, CUST, AMOUNT FROM {src} WHERE AMOUNT % 2 = 0;",
            streamsProperties=props))
    ok(ksql(client, f"CREATE TABLE {counts} AS SELECT CUST, COUNT(*) AS N, SUM(AMOUNT) AS TOTAL FROM {src} "
                    f"GROUP BY CUST;", streamsProperties=props))
    admin = KafkaAdmin(bootstrap)
    expected_evens: set[str] = set()
    totals: dict[str, list[int]] = {}

    def produce(start: int, n: int) -> None:
        for i in range(start, start + n):
            cust = f"c{i % 5}"
            admin.produce(topic, f"o{i}".encode(), json.dumps({"CUST": cust, "AMOUNT": i}).encode(), flush=False)
            if i % 2 == 0:
                expected_evens.add(f"o{i}")
            totals.setdefault(cust, [0, 0])
            totals[cust][0] += 1
            totals[cust][1] += i
        admin.flush()

    produce(0, 300)
    time.sleep(2)  # the queries are mid-way through the data when the server dies
    produce(300, 200)
    server.kill()
    produce(500, 100)  # written while no server runs

    cert, key = self_signed(server.data_dir.parent)
    restarted = ServerProcess(bootstrap, server.data_dir, ["--tls-cert", str(cert), "--tls-key", str(key)],
                              service_id=server.service_id, scheme="https")
    restarted.start()
    try:
        with httpx.Client(base_url=restarted.url, verify=False, timeout=600) as anon:  # auth off now, TLS on
            listing = ok(ksql(anon, "SHOW STREAMS; SHOW TABLES; SHOW QUERIES;"))
            assert {src, evens} <= {s["name"] for s in listing[0]["streams"]}
            assert counts in {t["name"] for t in listing[1]["tables"]}
            assert {evens, counts} <= {q["sinks"][0] for q in listing[2]["queries"]}  # (a failed one is retried)
            produce(600, 50)  # and the restored queries keep processing new data

            deadline = time.monotonic() + 240
            while True:
                got = {rec.key.decode() for rec in admin.read_all(evens)}
                table = query(anon, f"SELECT * FROM {counts};")
                state = {row["row"]["columns"][0]: row["row"]["columns"][1:] for row in table[1:]}
                if (got >= expected_evens and state == totals) or time.monotonic() > deadline:
                    break
                time.sleep(2)
            assert got == expected_evens, f"missing {sorted(expected_evens - got)[:10]}"
            assert state == totals  # exact: restored from the checkpoint, not double counted

            terminated = ok(anon.post("/ksql/terminate", json={"deleteTopicList": [evens]}))
            assert terminated[0]["commandStatus"]["status"] == "SUCCESS"
            after = ok(ksql(anon, "SHOW STREAMS; SHOW QUERIES;"))
            assert after[0]["streams"] == [] and after[1]["queries"] == []
            assert evens not in admin.topics() and topic in admin.topics()
    finally:
        restarted.stop()
        admin.close()
        client.close()


def test_assert_statements_answer_with_ksqldbs_entities_and_417(client: httpx.Client) -> None:
    topic = uniq("assert_me")
    resp = ksql(client, f"ASSERT TOPIC '{topic}' TIMEOUT 100 MILLISECONDS;")
    assert resp.status_code == 417, resp.text
    assert resp.json() == {"@type": "generic_error", "error_code": 41700, "message": f"Topic {topic} does not exist"}
    [entity] = ok(ksql(client, f"ASSERT NOT EXISTS TOPIC '{topic}';"))
    assert entity == {"@type": "assert_topic", "statementText": f"ASSERT NOT EXISTS TOPIC '{topic}';",
                      "topicName": topic, "exists": False, "warnings": []}



def test_a_waiting_statement_does_not_hold_up_other_clients(server: ServerProcess) -> None:
    """One client's ASSERT TOPIC waits 6 s for a topic that never comes; meanwhile other clients'
    SHOW STREAMS and DESCRIBE answer at once (the engine serializes only catalog changes)."""
    name = None
    with httpx.Client(base_url=server.url, auth=(USER, PASSWORD), timeout=600) as other:
        name = make_stream(other, rows=0)
    finished: dict[str, float] = {}

    def waiting() -> None:
        with httpx.Client(base_url=server.url, auth=(USER, PASSWORD), timeout=600) as c:
            resp = ksql(c, f"ASSERT TOPIC never_{uuid.uuid4().hex[:8]} TIMEOUT 6 SECONDS;")
            assert resp.status_code == 417, resp.text
        finished["assert"] = time.monotonic()

    thread = threading.Thread(target=waiting)
    thread.start()
    time.sleep(1.0)  # the ASSERT is in progress
    with httpx.Client(base_url=server.url, auth=(USER, PASSWORD), timeout=600) as c:
        shown = ok(ksql(c, "SHOW STREAMS;"))
        described = ok(ksql(c, f"DESCRIBE {name};"))
        finished["reads"] = time.monotonic()
    thread.join(60)
    assert finished["reads"] < finished["assert"], "the reads waited for the other client's ASSERT"
    assert name in [s["name"] for s in shown[0]["streams"]]
    assert described[0]["sourceDescription"]["name"] == name


@pytest.mark.parametrize("deep", [
    "SELECT * FROM S WHERE " + "(" * 40 + "V > 0" + ")" * 40 + ";",
    "SELECT * FROM S WHERE " + "NOT " * 300 + "V > 0;",
    "SELECT " + "ABS(" * 60 + "V" + ")" * 60 + " FROM S;",
])
def test_statements_nested_past_the_limit_answer_a_statement_error(client: httpx.Client, deep: str) -> None:
    """Nesting past the parser's limit is the client's error, named (it was a RecursionError:
    500), and the server answers the next request as before."""
    for endpoint, body in (("/ksql", {"ksql": deep}), ("/query", {"ksql": deep})):
        resp = client.post(endpoint, json=body)
        assert resp.status_code == 400, resp.text
        assert "nesting is too deep" in resp.json()["message"] and "32" in resp.json()["message"]
    assert ok(ksql(client, "SHOW STREAMS;"))[0]["@type"] == "streams"


def test_closing_a_push_query_stream_raises_nothing_in_its_reader_thread(server: ServerProcess) -> None:
    """The shell's Ctrl-C closes a push query's stream while its reader thread waits on the
    response. Closing the connection under that thread made http.client raise in it
    (``'NoneType' object has no attribute 'close'``), a traceback on the user's terminal."""
    from streamsql.client import KsqlClient

    with httpx.Client(base_url=server.url, auth=(USER, PASSWORD), timeout=600) as c:
        name = make_stream(c, rows=1)
    kc = KsqlClient(server.url, user=USER, password=PASSWORD)
    raised: list[BaseException | None] = []
    previous = threading.excepthook
    threading.excepthook = lambda args: raised.append(args.exc_value)
    try:
        for _ in range(15):
            stream = kc.query_stream(f"SELECT * FROM {name} EMIT CHANGES;", {"auto.offset.reset": "earliest"})
            assert stream.poll(60) == ["k0", 0]
            assert stream.poll(0.05) is RowStream.TIMEOUT  # the reader now waits on the response
            stream.close()
            for thread in threading.enumerate():
                if thread.name.startswith("query-stream-"):
                    thread.join(30)
    finally:
        threading.excepthook = previous
    assert raised == []
