"""experiments/attention_explorer/screenshots.py: every view captured whole in a real headless
Chromium, however far below the window it lies, and a capture that shows nothing refused."""

import io

import numpy as np
import pytest
from PIL import Image, ImageDraw
from selenium.webdriver.common.by import By

from experiments.attention_explorer import screenshots
from helpers.browser import chromium, load
from helpers.checkpoint_files import SENTENCES, write_checkpoint
from transformer_nmt.cli import plot_attention
from transformer_nmt.data.tokenizer import BPETokenizer


def png(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def drawn(height: int, drawn_to: int) -> Image.Image:
    """A white 400 x height image with grey bars (maps, links, rows) down to row drawn_to."""
    image = Image.new("RGB", (400, height), "white")
    draw = ImageDraw.Draw(image)
    for top in range(0, drawn_to - 10, 20):
        draw.rectangle((10, top, 390, top + 10), fill=(90, 110, 150))
    return image


def test_a_drawn_view_passes():
    screenshots.check_drawn(png(drawn(300, 300)), "view")


def test_a_blank_capture_is_refused():
    with pytest.raises(screenshots.BlankCapture, match="view: 0.0% of its pixels"):
        screenshots.check_drawn(png(Image.new("RGB", (400, 300), "white")), "view")


def test_a_capture_with_a_little_text_only_is_refused():
    image = Image.new("RGB", (400, 300), "white")
    ImageDraw.Draw(image).text((5, 290), "Beam search", fill="black")
    with pytest.raises(screenshots.BlankCapture, match="differ from the background"):
        screenshots.check_drawn(png(image), "view")


def test_a_capture_cut_at_the_window_is_refused():
    with pytest.raises(screenshots.BlankCapture, match="nothing drawn below row"):
        screenshots.check_drawn(png(drawn(300, 180)), "view")


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """A page of two sentences from a two-layer model, as `nmt-plot-attention --html` writes it."""
    folder = tmp_path_factory.mktemp("page")
    tokenizer = BPETokenizer.train(SENTENCES, vocab_size=300, min_frequency=1)
    checkpoint = write_checkpoint(folder / "toy.ckpt", tokenizer, N=2)
    html = folder / "explorer.html"
    plot_attention.main(
        [str(checkpoint), "one two three", "four five six", "--html", str(html),
         "--beam-size", "3", "--max-len-b", "6", "--reference", "zwei drei vier", "vier fünf"]
    )  # fmt: skip
    return html


def test_views_below_a_small_window_are_captured_whole(page):
    with chromium(width=700, height=300) as driver:
        load(driver, page)
        beam = driver.find_element(By.ID, "beam-view")
        assert beam.location["y"] > 300  # wholly below the window
        screenshots.lay_out_whole(driver)
        for view in screenshots.VIEWS:
            shot = Image.open(io.BytesIO(screenshots.capture(driver, view)))
            height = driver.execute_script(
                "return document.getElementById(arguments[0]).getBoundingClientRect().height",
                view,
            )
            assert shot.height == pytest.approx(height, abs=1), view


def test_a_capture_past_an_unpainted_window_is_refused(page):
    """Without laying the page out whole, Chromium leaves what lies below the window unpainted:
    the beam view comes back blank, and the check says so."""
    with chromium(width=700, height=300) as driver:
        load(driver, page)
        rect = driver.execute_script(
            "const r = document.getElementById('beam-view').getBoundingClientRect();"
            "return {x: r.x, y: r.y + scrollY, width: r.width, height: r.height, scale: 1}"
        )
        shot = driver.execute_cdp_cmd("Page.captureScreenshot", {"clip": rect})
        with pytest.raises(screenshots.BlankCapture):
            screenshots.check_drawn(screenshots.base64.b64decode(shot["data"]), "beam-view")


def test_the_script_writes_every_view_checked(page, tmp_path):
    screenshots.main([str(page), "--out", str(tmp_path)])
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        "alignment-view.png", "attention-view.png", "beam-view.png", "controls.png", "page.png"
    ]  # fmt: skip
    for name in names:
        pixels = np.asarray(Image.open(tmp_path / name).convert("RGB"))
        assert (pixels != 255).any(axis=-1).mean() > screenshots.MIN_DRAWN, name
