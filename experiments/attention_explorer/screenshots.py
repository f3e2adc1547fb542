"""Screenshots of each view of an explorer page, for the record: PNGs in --out.

    python -m experiments.attention_explorer.screenshots <run dir>/attention/explorer.html \
        --out experiments/attention_explorer

Each view, and the whole page, is captured whole, however far below the window it lies: the
page is laid out at its full scroll size first, so nothing is cut at the window or left unpainted
beyond it. A capture that is mostly background (a view that did not draw) is refused, and the
earlier PNGs kept.
"""

import argparse
import base64
import io
import shutil
from pathlib import Path

import numpy as np
from PIL import Image
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

VIEWS = ("attention-view", "alignment-view", "beam-view")
# Text alone covers a few percent of a view; every view's maps, links or rows cover more.
MIN_DRAWN = 0.03
# A capture cut short, or unpainted past the window, ends in a band of background.
MAX_BLANK_BOTTOM = 0.1


class BlankCapture(ValueError):
    """A screenshot that shows no view: mostly background, or background from some row down."""


def check_drawn(png: bytes, what: str) -> None:
    """Refuse a capture whose pixels are mostly the background colour (its most common one), or
    whose lower MAX_BLANK_BOTTOM is background alone."""
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)  # (H, W, 3)
    colours, counts = np.unique(pixels.reshape(-1, 3), axis=0, return_counts=True)
    background = colours[counts.argmax()]
    ink = np.abs(pixels - background).sum(axis=-1) > 24  # (H, W): not the background
    if ink.mean() < MIN_DRAWN:
        raise BlankCapture(f"{what}: {ink.mean():.1%} of its pixels differ from the background")
    rows = len(ink)
    last = np.flatnonzero(ink.any(axis=1))[-1] + 1
    if last < (1 - MAX_BLANK_BOTTOM) * rows:
        raise BlankCapture(f"{what}: nothing drawn below row {last} of {rows}: cut at the window?")


def lay_out_whole(driver: webdriver.Chrome) -> None:
    """Make the viewport as large as the document, so that every view is laid out and painted."""
    width, height = driver.execute_script(
        "const e = document.documentElement; return [e.scrollWidth, e.scrollHeight]"
    )
    metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)


def capture(driver: webdriver.Chrome, element_id: str | None) -> bytes:
    """A PNG of the whole element (None: the whole page), checked to show something."""
    rect = driver.execute_script(
        "const e = arguments[0] ? document.getElementById(arguments[0]) : document.body;"
        "const r = e.getBoundingClientRect();"
        "return {x: r.x + scrollX, y: r.y + scrollY, width: r.width, height: r.height, scale: 1}",
        element_id,
    )
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot", {"clip": rect, "captureBeyondViewport": True}
    )
    png = base64.b64decode(shot["data"])
    check_drawn(png, element_id or "page")
    return png


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("page", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--head", default="-1", help="the head shown large (-1: the mean)")
    args = parser.parse_args(argv)
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1100,900"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    try:
        driver.get(args.page.resolve().as_uri())
        WebDriverWait(driver, 60).until(lambda d: d.execute_script("return window.explorer"))
        Select(driver.find_element(By.ID, "head")).select_by_value(args.head)
        lay_out_whole(driver)
        # Hovering a source token: its column of the large map lights up.
        ActionChains(driver).move_to_element(
            driver.find_elements(By.CSS_SELECTOR, "#large .col-label")[1]
        ).perform()
        shots = {name: capture(driver, name) for name in ("controls", *VIEWS)}
        shots["page"] = capture(driver, None)
        args.out.mkdir(parents=True, exist_ok=True)
        for name, png in shots.items():  # written once every view is checked
            (args.out / f"{name}.png").write_bytes(png)
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
