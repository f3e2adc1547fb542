"""The explorer page in a real headless Chromium: what a person sees and does, and its data."""

import contextlib
import io

import matplotlib.image
import numpy as np
import pytest
import torch
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

from helpers.browser import chromium, load, screenshot
from helpers.checkpoint_files import SENTENCES, write_checkpoint
from helpers.picture import large_cells, legend_band, pixel, shot
from transformer_nmt.checkpoint import load_checkpoint
from transformer_nmt.cli import plot_attention, translate
from transformer_nmt.data.framing import TARGET_FRAME, cut_at_eos, decoder_input, source_ids
from transformer_nmt.data.tokenizer import BPETokenizer
from transformer_nmt.decoding import beam_search
from transformer_nmt.explorer import explore_sentence, write_page
from transformer_nmt.explorer.plots import attention_weights

SOURCES = ["one two three", "four five six"]
REFERENCE = "zwei drei vier"
# Short outputs keep the untrained model's translations, and the page, small.
BEAM = dict(beam_size=3, alpha=0.6, penalty="gnmt", max_len_b=6)
BEAM_ARGS = ["--beam-size", "3", "--alpha", "0.6", "--max-len-b", "6"]


def run(main, *args: str) -> list[str]:
    """A command's output lines, run in this process."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(list(args))
    return out.getvalue().splitlines()


@pytest.fixture(scope="module")
def tokenizer() -> BPETokenizer:
    return BPETokenizer.train(SENTENCES, vocab_size=300, min_frequency=1)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, tokenizer):
    # Two layers of two heads: the grid has a layer and a head to choose.
    path = tmp_path_factory.mktemp("ckpt") / "toy.ckpt"
    return write_checkpoint(path, tokenizer, N=2)


@pytest.fixture(scope="module")
def cli(checkpoint, tmp_path_factory):
    """The page `nmt-plot-attention --html` writes, and what it printed."""
    html = tmp_path_factory.mktemp("page") / "explorer.html"
    printed = run(
        plot_attention.main, str(checkpoint), *SOURCES, "--html", str(html), *BEAM_ARGS,
        "--reference", REFERENCE, "vier fünf sechs",
    )  # fmt: skip
    return html, printed


@pytest.fixture(scope="module")
def browser():
    with chromium() as driver:
        yield driver


@pytest.fixture(scope="module")
def page(browser, cli):
    """The CLI's page, loaded once: each test sets the controls it reads."""
    return load(browser, cli[0])


def test_the_page_loads_offline_without_a_console_message(page, cli):
    assert page.console == []
    assert page.requests == []
    assert cli[0].stat().st_size < 200_000  # data, script and style inline: a toy page is small


def large_map(browser) -> list[float]:
    """The large map's weights as its colours say, read on the legend's scale, row-major."""
    picture = shot(browser)
    rows, cols = large_cells(browser)
    y, left, right, _ = legend_band(browser, picture)
    scale = picture[int(round(y)), left:right]  # (W, 3): colour of x / (W - 1)
    values = np.linspace(0, 1, len(scale))
    return [
        float(values[np.abs(scale - pixel(picture, c.cx, r.cy)).sum(axis=-1).argmin()])
        for r in rows
        for c in cols
    ]


def test_choosing_another_head_redraws_the_large_map(browser, page):
    Select(browser.find_element(By.ID, "kind")).select_by_value("encoder_self")
    Select(browser.find_element(By.ID, "layer")).select_by_value("1")
    shown = {}
    for head in ("0", "1", "-1"):  # -1: the heads' mean
        Select(browser.find_element(By.ID, "head")).select_by_value(head)
        shown[head] = large_map(browser)
        expected = browser.execute_script(
            "const x = window.explorer, s = x.state;"
            "return x.matrix(s.v, s.s, s.r, 'encoder_self', 1, Number(arguments[0])).flat()",
            head,
        )
        # Read back through the colour scale: within a step of the legend's 240 colours.
        assert shown[head] == pytest.approx(expected, abs=0.02)
    assert shown["0"] != shown["1"]


def test_the_beam_view_shows_the_chosen_translation_with_the_score_the_cli_prints(
    browser, page, cli, checkpoint, tmp_path
):
    *printed, path = cli[1]
    assert path == str(cli[0])
    # The same lines as nmt-translate's best of each sentence: `line<TAB>score<TAB>text`.
    (tmp_path / "sources.txt").write_text("\n".join(SOURCES) + "\n")
    options = ["--n-best", "2", *BEAM_ARGS]
    translated = run(translate.main, str(checkpoint), str(tmp_path / "sources.txt"), *options)
    assert printed == translated[::2]
    for s, line in enumerate(printed):
        _, score, text = line.split("\t")
        Select(browser.find_element(By.ID, "sentence")).select_by_value(str(s))
        assert browser.find_element(By.ID, "chosen-score").text == score
        assert browser.find_element(By.ID, "chosen-text").text == text.strip()
        chosen = browser.find_elements(By.CSS_SELECTOR, "#beam-tree .finished.chosen text")
        normalized = float(browser.find_element(By.ID, "chosen-normalized").text)
        assert len(chosen) == 1 and chosen[0].text.endswith(f"→ {normalized:.2f}")


def page_matrices(browser, v: int, s: int, r: int, kind: str, layers: int, heads: int):
    """(layers, heads, T_q, T_k) weights as the page reads them."""
    script = (
        "const [v, s, r, kind, L, H] = arguments, x = window.explorer;"
        "const range = (n) => [...Array(n).keys()];"
        "return range(L).map((l) => range(H).map((h) => x.matrix(v, s, r, kind, l, h)))"
    )
    return np.array(browser.execute_script(script, v, s, r, kind, layers, heads))


def test_the_pages_weights_are_the_models_attention(browser, page, checkpoint, tokenizer):
    model, _ = load_checkpoint(checkpoint)
    model.eval()
    for s, (source, reference) in enumerate(
        zip(SOURCES, [REFERENCE, "vier fünf sechs"], strict=True)
    ):
        src = torch.tensor(source_ids(tokenizer.encode_batch([source])[0]))
        ((best,),) = beam_search(model, src[None], **TARGET_FRAME, **BEAM)
        targets = [cut_at_eos(best.tokens), tokenizer.encode_batch([reference])[0]]
        for r, target in enumerate(targets):
            expected = attention_weights(model, src, torch.tensor(decoder_input(target)))
            for kind, per_layer in expected.items():
                w = torch.stack(per_layer).numpy()  # (L, h, T_q, T_k)
                shown = page_matrices(browser, 0, s, r, kind, *w.shape[:2])
                assert shown.shape == w.shape, (s, r, kind)
                assert np.abs(shown - w).max() <= 1 / 255, (s, r, kind)  # the page's coding


def test_the_beam_view_holds_beam_searchs_hypotheses_and_scores(
    browser, page, checkpoint, tokenizer
):
    model, _ = load_checkpoint(checkpoint)
    model.eval()
    for s, source in enumerate(SOURCES):
        src = torch.tensor(source_ids(tokenizer.encode_batch([source])[0]))
        (hypotheses,) = beam_search(model, src[None], **TARGET_FRAME, **BEAM, n_best=3)
        shown = browser.execute_script("return window.explorer.finished(0, arguments[0])", s)
        shown = sorted(shown, key=lambda h: -h["normalized"])
        assert [(h["ids"], h["score"], h["normalized"]) for h in shown] == [
            tuple(h) for h in hypotheses
        ]
        Select(browser.find_element(By.ID, "sentence")).select_by_value(str(s))
        chips = browser.execute_script(
            "const chips = document.querySelectorAll('#beam-tree .node.finished');"
            "return [...chips].map((c) => c.dataset.ids)"
        )
        assert sorted(chips) == sorted(str(h.tokens).replace(" ", "") for h in hypotheses)


def test_the_slider_shows_another_validations_weights(browser, tokenizer, tmp_path):
    src = source_ids(tokenizer.encode_batch([SOURCES[0]])[0])
    validations = []
    for step, seed in ((100, 0), (200, 1)):  # two states of "training": different weights
        model, _ = load_checkpoint(
            write_checkpoint(tmp_path / f"{step}.ckpt", tokenizer, seed, N=2)
        )
        validations.append(
            {"step": step, "sentences": [explore_sentence(model, tokenizer, src, **BEAM)]}
        )
    path = write_page(tmp_path / "slider.html", validations, "a run")
    assert load(browser, path).console == []
    Select(browser.find_element(By.ID, "kind")).select_by_value("encoder_self")
    assert browser.find_element(By.ID, "step").text == "step 200"  # the last validation first
    last = large_map(browser)
    browser.find_element(By.ID, "validation").send_keys(Keys.ARROW_LEFT)
    assert browser.find_element(By.ID, "step").text == "step 100"
    first = large_map(browser)
    script = "return window.explorer.matrix(arguments[0], 0, 0, 'encoder_self', 0, 0).flat()"
    assert first == pytest.approx(browser.execute_script(script, 0), abs=0.02)
    assert last == pytest.approx(browser.execute_script(script, 1), abs=0.02)
    assert first != last


def test_every_view_draws_something(browser, page, cli, tmp_path):
    load(browser, cli[0])
    for view in ("attention-view", "alignment-view", "beam-view"):
        png = screenshot(browser, browser.find_element(By.ID, view))
        (tmp_path / f"{view}.png").write_bytes(png)  # to look at
        pixels = matplotlib.image.imread(io.BytesIO(png))[..., :3].reshape(-1, 3)
        colours = np.unique((pixels * 255).round().astype(int), axis=0)
        assert len(colours) > 20, view  # more than a blank box and its text


def test_an_rnn_has_its_alignment_alone(browser, tokenizer, tmp_path):
    rnn = write_checkpoint(tmp_path / "rnn.ckpt", tokenizer, family="rnn_attention")
    html = tmp_path / "rnn.html"
    run(plot_attention.main, str(rnn), SOURCES[0], "--html", str(html))
    assert load(browser, html).console == []
    kinds = Select(browser.find_element(By.ID, "kind")).options
    assert [k.get_attribute("value") for k in kinds] == ["decoder_src"]
    assert len(browser.find_elements(By.CSS_SELECTOR, "#grid figure")) == 1  # one "head"
