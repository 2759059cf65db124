"""Screenshots of the web console for docs/console.md and the README: the editor with a push
query's rows, and the pipeline view with live rates.

    .venv/bin/python scripts/console_screenshots.py [--out docs/images]

Starts an embedded broker and a ``streamsql server`` (with a users file), makes a small pipeline
(page views, a filtered stream and a count per page), feeds it records, and drives Debian's
Chromium (as the console's tests do, tests/support/browser.py) to
``console-editor.png`` and ``console-pipeline.png``. Everything it starts is stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

EDITOR_SQL = """-- statements run with Ctrl-Enter; Ctrl-Space completes
SET 'auto.offset.reset' = 'earliest';
SELECT PAGE, USER_ID, DURATION_MS
  FROM PAGEVIEWS
  WHERE DURATION_MS > 100
  EMIT CHANGES;"""
SETUP_SQL = """CREATE STREAM PAGEVIEWS (USER_ID VARCHAR KEY, PAGE VARCHAR, DURATION_MS INT)
  WITH (KAFKA_TOPIC='pageviews', PARTITIONS=1, VALUE_FORMAT='JSON');
CREATE STREAM SLOW_VIEWS AS SELECT * FROM PAGEVIEWS WHERE DURATION_MS > 800;
CREATE TABLE VIEWS_PER_PAGE AS SELECT PAGE, COUNT(*) AS VIEWS FROM PAGEVIEWS GROUP BY PAGE;"""
PAGES = ["/home", "/search", "/cart", "/checkout", "/help"]


def wait_for(what: str, check, timeout_s: float = 120):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.3)
    raise RuntimeError(f"timed out waiting for {what}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(REPO / "docs" / "images"), help="directory for the PNG files")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    import httpx
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    from streamsql.conformance.server_process import ServerProcess
    from streamsql.kafka.admin import KafkaAdmin
    from streamsql.kafka.broker import EmbeddedBroker
    from tests.support.browser import chromium

    work = Path(tempfile.mkdtemp(prefix="streamsql-screenshots-"))
    broker = EmbeddedBroker().start()
    users = work / "users.properties"
    users.write_text("ana: ana-pw,admin\n")
    server = ServerProcess(broker.bootstrap_servers, work / "data", ["--auth-file", str(users)],
                           service_id="screenshots_")
    stop = threading.Event()
    try:
        server.start(auth=("ana", "ana-pw"))
        resp = httpx.post(server.url + "/ksql", json={"ksql": SETUP_SQL, "streamsProperties": {
            "auto.offset.reset": "earliest"}}, auth=("ana", "ana-pw"), timeout=300)
        resp.raise_for_status()

        def feed() -> None:
            admin = KafkaAdmin(broker.bootstrap_servers)
            i = 0
            try:
                while not stop.is_set():
                    for _ in range(40):
                        value = {"PAGE": PAGES[i % len(PAGES)], "DURATION_MS": (i * 37) % 1500}
                        admin.produce("pageviews", f"user-{i % 23}".encode(), json.dumps(value).encode(), flush=False)
                        i += 1
                    admin.flush()
                    stop.wait(0.25)
            finally:
                admin.close()

        threading.Thread(target=feed, daemon=True).start()
        with chromium(1400, 820) as driver:
            driver.get(server.url + "/console")
            wait_for("the login form", lambda: driver.find_element(By.ID, "login").is_displayed())
            driver.find_element(By.ID, "login-user").send_keys("ana")
            driver.find_element(By.ID, "login-password").send_keys("ana-pw")
            driver.find_element(By.ID, "login-submit").click()
            wait_for("the console", lambda: driver.find_element(By.ID, "whoami").text == "ana (admin)")
            editor = driver.find_element(By.ID, "editor")
            driver.execute_script("arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('input'))",
                                  editor, EDITOR_SQL)
            editor.send_keys(Keys.CONTROL, Keys.ENTER)
            rows = "#results table.push-rows tbody tr"
            wait_for("rows", lambda: len(driver.find_elements(By.CSS_SELECTOR, rows)) > 40)
            driver.find_element(By.CSS_SELECTOR, "button.cat[data-pane=queries]").click()
            time.sleep(2)
            driver.save_screenshot(str(out / "console-editor.png"))
            driver.find_element(By.ID, "stop").click()
            driver.find_element(By.ID, "nav-pipeline").click()

            def rates() -> bool:
                return bool(driver.execute_script(
                    "return [...document.querySelectorAll('svg text.stats')].filter(s => Number(s.dataset.rate) > 0)"
                    ".length >= 2"))

            wait_for("live rates", rates)
            time.sleep(1)
            driver.save_screenshot(str(out / "console-pipeline.png"))
        print(f"wrote {out / 'console-editor.png'} and {out / 'console-pipeline.png'}")
        return 0
    finally:
        stop.set()
        server.stop()
        broker.stop()


if __name__ == "__main__":
    sys.exit(main())
