"""The web console in a real browser (Debian's Chromium, driven by Selenium) against a real
``streamsql server`` process: one server and one browser for the module (docs/console.md).

What a person does: log in and out, run statements, read a pull query's table, watch a push
query's rows (10,000 of them leave the page bounded and responsive) and stop it (the server's
query ends), see a syntax error marked where it is, watch the pipeline's rates; what a person
must not be able to do: TERMINATE as a reader, run script from topic data, names or errors, or
have another origin's page use their login.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from streamsql.conformance.server_process import ServerProcess
from streamsql.kafka.admin import KafkaAdmin
from tests.support.browser import chromium

pytestmark = pytest.mark.integration

USERS = {"ana": ("ana-pw", "admin"), "dev": ("dev-pw", "developer"), "rita": ("rita-pw", "reader")}
XSS = "<img src=x onerror=window.pwned=1>"


def uniq(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}".upper()


@pytest.fixture(scope="module")
def server(bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("console")
    users = root / "users.properties"
    users.write_text("".join(f"{user}: {password},{role}\n" for user, (password, role) in USERS.items()))
    proc = ServerProcess(bootstrap, root / "data", ["--auth-file", str(users)],
                         service_id=f"console{uuid.uuid4().hex[:8]}_")
    proc.start(auth=("ana", "ana-pw"))
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as driver:
        yield driver


def rest(server: ServerProcess, statement: str, **extra: Any) -> Any:
    resp = httpx.post(server.url + "/ksql", json={"ksql": statement, **extra}, auth=("ana", "ana-pw"), timeout=120)
    assert resp.status_code == 200, resp.text
    return resp.json()


def wait_for(what: str, check: Callable[[], Any], timeout_s: float = 60) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def by_id(driver: Any, element_id: str) -> Any:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.ID, element_id)


def log_in(driver: Any, server: ServerProcess, user: str) -> None:
    """The console, logged in as ``user`` (logging out whoever was)."""
    password, role = USERS[user]
    if not driver.current_url.startswith(server.url + "/console"):
        driver.get(server.url + "/console")
    shown = wait_for("the page", lambda: by_id(driver, "whoami").text or by_id(driver, "login").is_displayed()
                     and "login")
    if shown == f"{user} ({role})":
        return
    if shown != "login":
        by_id(driver, "logout").click()
        wait_for("the login form", lambda: by_id(driver, "login").is_displayed())
    by_id(driver, "login-user").clear()
    by_id(driver, "login-user").send_keys(user)
    by_id(driver, "login-password").clear()
    by_id(driver, "login-password").send_keys(password)
    by_id(driver, "login-submit").click()
    wait_for(f"{user} logged in", lambda: by_id(driver, "whoami").text == f"{user} ({role})")


def run(driver: Any, sql: str, timeout_s: float = 60, done: str = "done") -> str:
    """Type ``sql`` into the editor, press Ctrl-Enter, and wait until the run ends; its status."""
    from selenium.webdriver.common.keys import Keys

    if not by_id(driver, "editor").is_displayed():
        by_id(driver, "nav-editor").click()
    driver.execute_script("const e = document.getElementById('editor'); e.value = arguments[0];"
                          "e.dispatchEvent(new Event('input')); document.getElementById('status').textContent = '';",
                          sql)
    by_id(driver, "editor").send_keys(Keys.CONTROL, Keys.ENTER)
    return wait_for(f"{sql!r} to run", lambda: _finished(by_id(driver, "status").text, done), timeout_s)


def _finished(status: str, done: str) -> str:
    return status if status == done or status.startswith("error") or status.startswith(done) else ""


def result_rows(driver: Any, css: str = "#results table tbody tr") -> list[list[str]]:
    return driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map(r => [...r.cells].map(c => c.textContent));", css)


def test_log_in_and_out(server: ServerProcess, browser: Any) -> None:
    browser.get(server.url + "/console")
    browser.delete_all_cookies()  # a new visitor
    browser.get(server.url + "/")  # a browser opening the server's address gets the console
    wait_for("the login form", lambda: by_id(browser, "login").is_displayed())
    assert browser.current_url == server.url + "/console"
    # clients keep ksqlDB's redirect
    assert httpx.get(server.url + "/", auth=("ana", "ana-pw"), timeout=10).headers["location"] == "/info"
    by_id(browser, "login-user").send_keys("ana")
    by_id(browser, "login-password").send_keys("wrong")
    by_id(browser, "login-submit").click()
    wait_for("the refusal", lambda: "wrong user or password" in by_id(browser, "login-error").text)
    assert not by_id(browser, "app").is_displayed()
    log_in(browser, server, "ana")
    [cookie] = [c for c in browser.get_cookies() if c["name"] == "streamsql_console"]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert "streamsql_console" not in browser.execute_script("return document.cookie")  # no script reads it
    headers = {"Cookie": f"streamsql_console={cookie['value']}"}
    assert httpx.get(server.url + "/console/session", headers=headers, timeout=10).json()["user"] == "ana"
    by_id(browser, "logout").click()
    wait_for("the login form", lambda: by_id(browser, "login").is_displayed())
    assert not by_id(browser, "app").is_displayed()
    # the session ended on the server, not only in the browser
    assert httpx.get(server.url + "/console/session", headers=headers, timeout=10).status_code == 401


@pytest.fixture(scope="module")
def orders(server: ServerProcess, browser: Any) -> dict[str, str]:
    """A stream, rows and a table counting them, made in the console by a developer: the module's
    one persistent query (its pull, pipeline, role and processing log tests share it)."""
    log_in(browser, server, "dev")
    stream, table = uniq("ORDERS"), uniq("TOTALS")
    status = run(browser, f"CREATE STREAM {stream} (ID VARCHAR KEY, AMOUNT INT) WITH (KAFKA_TOPIC='{stream.lower()}', "
                          f"PARTITIONS=1, VALUE_FORMAT='JSON');\n"
                          f"INSERT INTO {stream} (ID, AMOUNT) VALUES ('a', 5);\n"
                          f"INSERT INTO {stream} (ID, AMOUNT) VALUES ('b', 7);\n"
                          f"INSERT INTO {stream} (ID, AMOUNT) VALUES ('a', 1);\n"
                          f"SET 'auto.offset.reset' = 'earliest';\n"
                          f"CREATE TABLE {table} AS SELECT ID, SUM(AMOUNT) AS TOTAL FROM {stream} GROUP BY ID;")
    results = by_id(browser, "results").text
    assert status == "done", results
    assert "Stream created" in results and "Created query with ID" in results
    assert "auto.offset.reset=earliest" in by_id(browser, "session-props").text  # the tab's session
    query_id = re.search(r"Created query with ID (\w+)", results)
    assert query_id is not None
    return {"stream": stream, "table": table, "topic": stream.lower(), "query": query_id.group(1)}


def test_statements_run_and_a_pull_query_shows_its_table(server: ServerProcess, browser: Any,
                                                         orders: dict[str, str]) -> None:
    log_in(browser, server, "dev")

    def totals() -> list[list[str]]:
        # by key: other tests add keys of their own
        run(browser, f"SELECT ID, TOTAL FROM {orders['table']} WHERE ID = 'a';\n"
                     f"SELECT ID, TOTAL FROM {orders['table']} WHERE ID = 'b';")
        rows = result_rows(browser, "#results table.pull-rows tbody tr")
        return sorted(rows) if sorted(rows) == [["a", "6"], ["b", "7"]] else []

    assert wait_for("the table's rows", totals, 90) == [["a", "6"], ["b", "7"]]
    headers = result_rows(browser, "#results table.pull-rows thead tr")
    assert headers == [["ID", "TOTAL"]] * 2


def test_push_rows_arrive_stay_bounded_and_stop_ends_the_servers_query(server: ServerProcess, browser: Any) -> None:
    log_in(browser, server, "dev")
    stream = uniq("CLICKS")
    topic = stream.lower()
    rest(server, f"CREATE STREAM {stream} (ID VARCHAR KEY, N INT) WITH (KAFKA_TOPIC='{topic}', PARTITIONS=1, "
                 "VALUE_FORMAT='JSON');")
    run(browser, f"SELECT ID, N FROM {stream} EMIT CHANGES;", done="streaming")
    wait_for("the push query's header", lambda: result_rows(browser, "#results table.push-rows thead tr"))
    assert push_queries(server) == 1
    rest(server, "".join(f"INSERT INTO {stream} (ID, N) VALUES ('k{i}', {i});" for i in range(3)))
    wait_for("the inserted rows", lambda: len(result_rows(browser, "#results table.push-rows tbody tr")) == 3)
    assert result_rows(browser, "#results table.push-rows tbody tr") == [["k0", "0"], ["k1", "1"], ["k2", "2"]]

    admin = KafkaAdmin(server.bootstrap)
    try:
        for i in range(10_000):
            admin.produce(topic, f"m{i}".encode(), json.dumps({"N": 1000 + i}).encode(), flush=False)
        admin.flush()
    finally:
        admin.close()
    received = lambda: int(browser.execute_script(  # noqa: E731
        "const i = document.querySelector('#results .push-info'); return i ? i.dataset.received || 0 : 0"))
    wait_for("10,003 rows", lambda: received() >= 10_003, 120)
    rows = result_rows(browser, "#results table.push-rows tbody tr")
    assert len(rows) == 1000 and rows[-1] == ["m9999", "10999"]  # the latest thousand, in order
    # still responsive: a script answers at once and the editor takes keys
    started = time.monotonic()
    browser.execute_script("return 1")
    by_id(browser, "pause").click()
    assert by_id(browser, "pause").text == "Resume" and time.monotonic() - started < 3
    by_id(browser, "pause").click()

    by_id(browser, "stop").click()
    wait_for("the run to end", lambda: by_id(browser, "status").text == "stopped")
    wait_for("the server's push query to end", lambda: push_queries(server) == 0, 30)
    assert "stopped" in by_id(browser, "results").text


def push_queries(server: ServerProcess) -> float:
    text = httpx.get(server.url + "/metrics", auth=("ana", "ana-pw"), timeout=30).text
    match = re.search(r"^streamsql_server_push_queries (\S+)$", text, re.M)
    assert match is not None, text[:2000]
    return float(match.group(1))


def test_a_syntax_error_is_marked_at_its_line_and_column(server: ServerProcess, browser: Any) -> None:
    log_in(browser, server, "rita")
    status = run(browser, "SHOW STREAMS;\n\nSELECT *\n  FORM nothing;")
    assert status == "error at line 4, column 3"
    mark = browser.execute_script("const m = document.getElementById('error-mark');"
                                  "return [m.dataset.line, m.dataset.column, m.textContent]")
    assert mark == ["4", "3", "FORM"]
    assert "line 2:3" in by_id(browser, "error-message").text  # the server's position, in the statement


def test_the_pipeline_view_shows_the_query_and_its_rate(server: ServerProcess, browser: Any,
                                                         orders: dict[str, str]) -> None:
    log_in(browser, server, "dev")
    by_id(browser, "nav-pipeline").click()
    node = f'svg g.node[data-id="query:{orders["query"]}"]'
    wait_for("the query's node", lambda: browser.execute_script("return !!document.querySelector(arguments[0])", node))
    labels = browser.execute_script("return [...document.querySelectorAll('svg g.node text.label')]"
                                    ".map(t => t.textContent)")
    assert orders["stream"] in labels and orders["table"] in labels and orders["query"] in labels

    def rate() -> float:
        value = browser.execute_script(f"const s = document.querySelector('{node} text.stats');"
                                       "return s ? Number(s.dataset.rate) : 0")
        return float(value or 0)

    stop = threading.Event()

    def insert() -> None:  # records arriving all along, as in a live pipeline
        admin = KafkaAdmin(server.bootstrap)
        try:
            i = 0
            while not stop.is_set():
                for _ in range(50):
                    admin.produce(orders["topic"], f"r{i % 10}".encode(), json.dumps({"AMOUNT": i}).encode(),
                                  flush=False)
                    i += 1
                admin.flush()
                stop.wait(0.2)
        finally:
            admin.close()

    inserts = threading.Thread(target=insert, daemon=True)
    inserts.start()
    try:
        assert wait_for("a non-zero rate", rate, 90) > 0
    finally:
        stop.set()
        inserts.join(30)
    by_id(browser, "nav-editor").click()


def test_a_reader_cannot_terminate(server: ServerProcess, browser: Any, orders: dict[str, str]) -> None:
    query_id = orders["query"]
    log_in(browser, server, "rita")
    browser.execute_script("document.querySelector('button.cat[data-pane=queries]').click()")
    button = f'#catalog-list .item[data-name="{query_id}"] button[data-action=TERMINATE]'
    wait_for("the query in the list", lambda: browser.execute_script("return !!document.querySelector(arguments[0])",
                                                                     button))
    assert browser.execute_script("return document.querySelector(arguments[0]).disabled", button)
    status = run(browser, f"TERMINATE {query_id};")
    assert status == "error"
    message = by_id(browser, "error-message").text
    assert "Forbidden: user 'rita' has role 'reader'" in message and "TERMINATE" in message
    [queries] = rest(server, "SHOW QUERIES;")
    assert any(q["id"] == query_id and q["state"] == "RUNNING" for q in queries["queries"])


def test_html_in_records_names_and_errors_is_text_in_every_view(server: ServerProcess, browser: Any,
                                                                orders: dict[str, str]) -> None:
    log_in(browser, server, "ana")
    topic = uniq("xss").lower()
    name = f"`{XSS}`"
    status = run(browser, f"CREATE STREAM {name} (K VARCHAR KEY, V VARCHAR) WITH (KAFKA_TOPIC='{topic}', "
                          f"PARTITIONS=1, VALUE_FORMAT='JSON');\n"
                          f"INSERT INTO {name} (K, V) VALUES ('{XSS}', '{XSS}');\n"
                          f"SET 'auto.offset.reset' = 'earliest';\n"
                          f"SELECT * FROM {name} EMIT CHANGES LIMIT 1;")
    assert status == "done", by_id(browser, "results").text
    assert result_rows(browser, "#results table.push-rows tbody tr") == [[XSS, XSS]]
    run(browser, f"DESCRIBE `{XSS}2`;")  # an error naming it
    assert XSS in by_id(browser, "error-message").text
    # a record the orders' query cannot decode: an entry of the processing log
    admin = KafkaAdmin(server.bootstrap)
    try:
        admin.produce(orders["topic"], XSS.encode(), XSS.encode())
        admin.flush()
    finally:
        admin.close()
    browser.execute_script("document.querySelector('button.cat[data-pane=streams]').click()")
    item = f'#catalog-list .item[data-name="{XSS}"] .name'
    wait_for("the stream in the list", lambda: browser.execute_script("return !!document.querySelector(arguments[0])",
                                                                      item))
    browser.execute_script("document.querySelector(arguments[0]).click()", item)
    wait_for("its description", lambda: XSS in by_id(browser, "catalog-detail").text)
    browser.execute_script("document.querySelector('button.cat[data-pane=topics]').click()")
    topic_item = f'#catalog-list .item[data-name="{topic}"] .name'
    wait_for("the topic", lambda: browser.execute_script("return !!document.querySelector(arguments[0])", topic_item))
    browser.execute_script("document.querySelector(arguments[0]).click()", topic_item)
    wait_for("the topic's records", lambda: XSS in by_id(browser, "catalog-detail").text, 20)
    by_id(browser, "nav-pipeline").click()
    wait_for("the pipeline", lambda: browser.execute_script(
        "return [...document.querySelectorAll('svg g.node text.label')].some(t => t.textContent.startsWith('<img'))"))
    wait_for("the processing log's entry", lambda: browser.execute_script(
        "return document.querySelectorAll('#processing-log-entries li').length"), 60)
    by_id(browser, "nav-editor").click()
    assert browser.execute_script("return window.pwned") is None
    assert browser.execute_script("return document.querySelectorAll('img').length") == 0


class _OtherOrigin(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        body = b"<!DOCTYPE html><title>another site</title>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_cross_origin_post_with_the_browsers_credentials_is_refused(server: ServerProcess, browser: Any) -> None:
    log_in(browser, server, "ana")
    other = ThreadingHTTPServer(("127.0.0.1", 0), _OtherOrigin)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    stream = uniq("FORGED")
    statement = (f"CREATE STREAM {stream} (V INT) WITH (KAFKA_TOPIC='{stream.lower()}', PARTITIONS=1, "
                 "VALUE_FORMAT='JSON');")
    try:
        # another port of the same host: the same site, so SameSite=Strict still sends the cookie
        browser.get(f"http://127.0.0.1:{other.server_address[1]}/")
        outcome = browser.execute_async_script("""
            const done = arguments[arguments.length - 1];
            fetch(arguments[0] + '/ksql', {method: 'POST', mode: 'no-cors', credentials: 'include',
                  headers: {'Content-Type': 'text/plain'}, body: JSON.stringify({ksql: arguments[1]})})
              .then(r => done('sent ' + r.type), e => done('failed ' + e));""", server.url, statement)
        assert outcome == "sent opaque"
    finally:
        other.shutdown()
        other.server_close()
    [streams] = rest(server, "SHOW STREAMS;")
    assert stream not in {s["name"] for s in streams["streams"]}
    # what the server answered that request, repeated with the browser's cookie
    browser.get(server.url + "/console")
    [cookie] = [c for c in browser.get_cookies() if c["name"] == "streamsql_console"]
    forged = httpx.post(server.url + "/ksql", content=json.dumps({"ksql": statement}),
                        headers={"Cookie": f"streamsql_console={cookie['value']}", "Content-Type": "text/plain",
                                 "Origin": f"http://127.0.0.1:{other.server_address[1]}",
                                 "Sec-Fetch-Site": "same-site"}, timeout=30)
    assert forged.status_code == 403 and "another origin" in forged.json()["message"]
    own = httpx.post(server.url + "/ksql", content=json.dumps({"ksql": "SHOW STREAMS;"}),
                     headers={"Cookie": f"streamsql_console={cookie['value']}", "Origin": server.url,
                              "Sec-Fetch-Site": "same-origin"}, timeout=30)
    assert own.status_code == 200  # the same cookie from the console's own page is accepted


def test_completion_offers_the_servers_names_as_the_remote_shell_gets_them(server: ServerProcess, browser: Any,
                                                                         orders: dict[str, str]) -> None:
    from selenium.webdriver.common.keys import Keys

    from streamsql.surfaces.backends import RemoteBackend

    log_in(browser, server, "rita")
    browser.execute_script("document.querySelector('#nav-editor').click()")
    browser.execute_script("const e = document.getElementById('editor'); e.value = arguments[0];"
                           "e.dispatchEvent(new Event('input')); e.focus();"
                           "e.setSelectionRange(e.value.length, e.value.length);", "SELECT * FROM ORDERS_")
    # the names the page knows are fetched at login and after each run: run nothing to refresh them
    by_id(browser, "editor").send_keys(Keys.CONTROL, " ")
    offered = wait_for("the completion list", lambda: browser.execute_script(
        "const l = document.getElementById('completions');"
        "return l.hidden ? null : [...l.children].map(li => li.textContent)"))
    assert orders["stream"] in offered
    by_id(browser, "editor").send_keys(Keys.ENTER)
    assert by_id(browser, "editor").get_attribute("value").endswith(orders["stream"])
    # the shell connected to this server completes from the same GET /vocabulary
    shell = RemoteBackend(server.url, "rita", "rita-pw")
    assert shell._server_vocabulary() is not None  # not its fallback over SHOW/DESCRIBE (for ksqlDB's servers)
    vocab = shell.vocabulary()
    assert vocab.sources[orders["stream"]] == "STREAM" and vocab.columns[orders["stream"]] == ["ID", "AMOUNT"]
    assert orders["query"] in vocab.queries and "SUBSTRING" in vocab.functions


def test_the_consoles_endpoints_over_plain_http(server: ServerProcess) -> None:
    page = httpx.get(server.url + "/console", timeout=30)
    assert page.status_code == 200 and "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-content-type-options"] == "nosniff"
    assert httpx.get(server.url + "/console/..%2Fapp.py", timeout=30).status_code == 404
    assert httpx.get(server.url + "/console/web_console.py", timeout=30).status_code == 404
    assert httpx.get(server.url + "/vocabulary", timeout=30).status_code == 401  # the data is behind the login
    ana = ("ana", "ana-pw")
    refused = httpx.get(server.url + "/processing-log?limit=500", auth=ana, timeout=30)
    assert refused.status_code == 400 and "from 1 to 100" in refused.json()["message"]
    log = httpx.get(server.url + "/processing-log?limit=5", auth=ana, timeout=30).json()
    assert log["topic"].endswith("processing_log") and len(log["entries"]) <= 5
    bad = httpx.post(server.url + "/console/login", json={"user": "ana"}, timeout=30)
    assert bad.status_code == 400
