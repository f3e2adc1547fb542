"""What a page draws, read back from a real browser: pixels of the whole page and where text is.

The page is laid out at its full scroll size and captured whole, so that a pixel's coordinates
are the page's CSS pixels (device scale 1) and `Box`es index it directly. Nothing here asks the
page how it drew: maps, links and trees are read from pixels, whether SVG, DOM cells or canvas.
"""

import base64
import io
from typing import NamedTuple

import numpy as np
from PIL import Image
from selenium import webdriver

BACKGROUND = np.array([255, 255, 255])


class Box(NamedTuple):
    text: str
    x: float
    y: float
    w: float
    h: float

    @property
    def cx(self) -> float:
        return self.x + self.w / 2

    @property
    def cy(self) -> float:
        return self.y + self.h / 2


def shot(driver: webdriver.Chrome) -> np.ndarray:
    """(H, W, 3) int pixels of the whole page, laid out at its full size."""
    width, height = driver.execute_script(
        "const e = document.documentElement; return [e.scrollWidth, e.scrollHeight]"
    )
    metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    png = driver.execute_cdp_cmd("Page.captureScreenshot", {"captureBeyondViewport": True})
    image = Image.open(io.BytesIO(base64.b64decode(png["data"]))).convert("RGB")
    return np.asarray(image).astype(int)


def boxes(driver: webdriver.Chrome, css: str) -> list[Box]:
    """The visible elements matching `css`, in page coordinates, with their text."""
    found = driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map((e) => {"
        "  const r = e.getBoundingClientRect();"
        "  return [e.textContent.trim(), r.x + scrollX, r.y + scrollY, r.width, r.height]"
        "}).filter((b) => b[3] > 0 && b[4] > 0)",
        css,
    )
    return [Box(*b) for b in found]


def pixel(picture: np.ndarray, x: float, y: float) -> np.ndarray:
    return picture[int(round(y)), int(round(x))]


def near(a: np.ndarray, b: np.ndarray, tolerance: int = 24) -> bool:
    """Two colours alike: every channel within `tolerance`."""
    return bool(np.abs(np.asarray(a) - np.asarray(b)).max() <= tolerance)


def ink_runs(
    picture: np.ndarray, y: float, x0: float, x1: float, background=BACKGROUND
) -> list[float]:
    """Centres of the runs of non-background pixels along row y between x0 and x1."""
    row = picture[int(round(y)), int(x0) : int(x1)]
    ink = np.abs(row - background).max(axis=-1) > 40
    centres, start = [], None
    for x, on in enumerate([*ink, False]):
        if on and start is None:
            start = x
        elif not on and start is not None:
            centres.append(x0 + (start + x - 1) / 2)
            start = None
    return centres


def ink_box(
    picture: np.ndarray, x0: float, y0: float, x1: float, y1: float, background=BACKGROUND
) -> tuple[int, int, int, int] | None:
    """(left, top, right, bottom), exclusive, of the non-background pixels inside a region."""
    region = picture[int(y0) : int(y1), int(x0) : int(x1)]
    ys, xs = np.nonzero(np.abs(region - background).max(axis=-1) > 40)
    if len(xs) == 0:
        return None
    return int(x0) + xs.min(), int(y0) + ys.min(), int(x0) + xs.max() + 1, int(y0) + ys.max() + 1


# ---- the explorer page's parts, found by their labels ----
def legend_band(driver, picture: np.ndarray) -> tuple[float, int, int, list[Box]]:
    """The legend's colour band: its row y, its left and right (exclusive) ink, and its labels."""
    ticks = sorted(boxes(driver, "#legend-ticks *"), key=lambda b: b.x)
    y = ticks[0].y - 8  # the band just above its labels
    found = ink_box(picture, ticks[0].cx - 8, y, ticks[-1].cx + 8, y + 1)
    assert found is not None, "no legend"
    return y, found[0], found[2], ticks


def legend(driver, picture: np.ndarray) -> dict[float, np.ndarray]:
    """The legend's colour at each of its labelled values, read just above the label."""
    y, left, right, ticks = legend_band(driver, picture)
    return {float(t.text): pixel(picture, min(max(t.cx, left + 1), right - 2), y) for t in ticks}


def large_cells(driver) -> tuple[list[Box], list[Box]]:
    """The large map's row labels top to bottom and column labels left to right."""
    rows = sorted(boxes(driver, "#large .row-label"), key=lambda b: b.y)
    cols = sorted(boxes(driver, "#large .col-label"), key=lambda b: b.x)
    return rows, cols
