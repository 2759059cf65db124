"""A real Chromium driven by Selenium, for the web console's tests and its screenshots command.

Debian's ``chromium`` and ``chromium-driver`` packages (``scripts/setup.sh`` installs them): no
browser is downloaded at test time, and a missing one fails loudly, never skips.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


@contextmanager
def chromium(width: int = 1400, height: int = 900) -> Iterator[object]:
    """A headless Chromium with a fresh profile, quit and its profile removed on exit."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    for path in (CHROMIUM, CHROMEDRIVER):
        if not Path(path).exists():
            raise RuntimeError(f"{path} is missing: run scripts/setup.sh (it installs Debian's chromium and "
                               f"chromium-driver)")
    profile = tempfile.mkdtemp(prefix="streamsql-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
