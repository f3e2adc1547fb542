"""A real headless Chromium, driven by Selenium, for the tests of HTML pages.

Debian's `chromium` and the `chromium-driver` of the same release (`.ci/run` installs them);
Selenium is told both paths, so it never looks for, or downloads, a browser of its own.
"""

import base64
import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
MISSING = "needs a headless Chromium: apt-get install chromium chromium-driver"


class PageLoad(NamedTuple):
    console: list[str]  # the console's warnings and errors, and failed loads
    requests: list[str]  # every URL requested but the page's own


@contextmanager
def chromium(width: int = 1400, height: int = 1000) -> Iterator[webdriver.Chrome]:
    """One browser, skipping the calling test where Chromium or its driver is missing."""
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip(MISSING)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.add_argument(f"--window-size={width},{height}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def load(driver: webdriver.Chrome, path: Path, ready: str = "window.explorer?.ready") -> PageLoad:
    """Open a file, wait until the script `ready` holds; what the page logged and fetched."""
    driver.get_log("browser"), driver.get_log("performance")  # forget earlier pages
    url = path.resolve().as_uri()
    driver.get(url)
    WebDriverWait(driver, 30).until(lambda d: d.execute_script(f"return Boolean({ready})"))
    console = [entry["message"] for entry in driver.get_log("browser")]
    events = [json.loads(entry["message"])["message"] for entry in driver.get_log("performance")]
    requests = [
        event["params"]["request"]["url"]
        for event in events
        if event["method"] == "Network.requestWillBeSent"
    ]
    return PageLoad(console, [r for r in requests if r != url])


def screenshot(driver: webdriver.Chrome, element: WebElement) -> bytes:
    """A PNG of the whole element, also of what lies beyond the window (which Selenium clips)."""
    rect = driver.execute_script(
        "const r = arguments[0].getBoundingClientRect();"
        "return {x: r.x + scrollX, y: r.y + scrollY, width: r.width, height: r.height, scale: 1}",
        element,
    )
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot", {"clip": rect, "captureBeyondViewport": True}
    )
    return base64.b64decode(shot["data"])
