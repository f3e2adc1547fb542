"""experiments/attention_explorer/scale.py: a page's size, opening and every control's answer,
measured in a real headless Chromium (how fast is the record's business, not this test's)."""

import pytest

from experiments.attention_explorer import scale
from helpers.checkpoint_files import SENTENCES, write_checkpoint
from transformer_nmt.cli import plot_attention
from transformer_nmt.data.tokenizer import BPETokenizer


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """Two sentences from a two-layer model, each with a reference."""
    folder = tmp_path_factory.mktemp("page")
    tokenizer = BPETokenizer.train(SENTENCES, vocab_size=300, min_frequency=1)
    checkpoint = write_checkpoint(folder / "toy.ckpt", tokenizer, N=2)
    html = folder / "explorer.html"
    plot_attention.main(
        [str(checkpoint), "one two three", "four five six", "--html", str(html),
         "--beam-size", "2", "--max-len-b", "3", "--reference", "zwei drei", "vier fünf"]
    )  # fmt: skip
    return html


def test_every_control_the_page_offers_is_timed(page):
    driver = scale.browser()
    try:
        result = scale.measure(driver, page, loads=2, repeats=1)
    finally:
        driver.quit()
    assert result["bytes"] == page.stat().st_size
    assert len(result["opening"]) == 2 and all(t > 0 for t in result["opening"])
    # One validation: no slider to time; a page of one layer would have no layer to time.
    assert set(result["answers"]) == set(scale.CONTROLS) - {"validation"}
    for control, times in result["answers"].items():
        assert len(times) >= 2 and all(t > 0 for t in times), control
    lines = scale.report("toy", result)
    assert lines[0].startswith("toy: ") and len(lines) == 1 + len(result["answers"])
