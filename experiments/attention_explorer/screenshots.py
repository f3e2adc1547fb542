"""Screenshots of each view of an explorer page, for the record: PNGs in --out.

    python -m experiments.attention_explorer.screenshots <run dir>/attention/explorer.html \
        --out experiments/attention_explorer
"""

import argparse
import base64
import shutil
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

VIEWS = ("attention-view", "alignment-view", "beam-view")


def shoot(driver: webdriver.Chrome, element_id: str, path: Path) -> None:
    """The whole element, also what lies beyond the window."""
    rect = driver.execute_script(
        "const r = document.getElementById(arguments[0]).getBoundingClientRect();"
        "return {x: r.x + scrollX, y: r.y + scrollY, width: r.width, height: r.height, scale: 1}",
        element_id,
    )
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {"clip": rect})
    path.write_bytes(base64.b64decode(shot["data"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("page", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--head", default="-1", help="the head shown large (-1: the mean)")
    args = parser.parse_args()
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1100,900"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    try:
        driver.get(args.page.resolve().as_uri())
        WebDriverWait(driver, 60).until(lambda d: d.execute_script("return window.explorer"))
        Select(driver.find_element(By.ID, "head")).select_by_value(args.head)
        args.out.mkdir(parents=True, exist_ok=True)
        shoot(driver, "controls", args.out / "controls.png")
        # Hovering a source token: its column of the large map lights up.
        ActionChains(driver).move_to_element(
            driver.find_elements(By.CSS_SELECTOR, "#large .col-label")[1]
        ).perform()
        for view in VIEWS:
            shoot(driver, view, args.out / f"{view}.png")
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
