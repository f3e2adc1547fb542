import matplotlib.image
import pytest
import torch
from matplotlib.image import AxesImage

from transformer_nmt.data.tokenizer import BOS_ID, EOS_ID, BPETokenizer
from transformer_nmt.explorer.plots import (
    attention_grid,
    attention_weights,
    draw_attention,
    figure_pixels,
    grid_shape,
    token_labels,
)
from transformer_nmt.model import Transformer


@pytest.fixture(scope="module")
def tokenizer() -> BPETokenizer:
    return BPETokenizer.train(
        ["a dog runs", "ein Hund rennt"] * 20, vocab_size=300, min_frequency=1
    )


@pytest.mark.parametrize(("h", "shape"), [(1, (1, 1)), (4, (1, 4)), (6, (2, 4)), (8, (2, 4))])
def test_grid_shape(h, shape):
    assert grid_shape(h) == shape


def test_one_panel_per_head_on_a_shared_scale_titled_by_layer_head_and_step():
    weights = torch.softmax(torch.randn(6, 3, 5), dim=-1)
    fig = attention_grid(
        weights, list("abc"), list("vwxyz"), "encoder self-attention, layer 2, step 7"
    )
    panels = [ax for ax in fig.axes if ax.images and ax.get_title()]
    assert [ax.get_title() for ax in panels] == [f"head {i}" for i in range(1, 7)]
    assert fig._suptitle.get_text() == "encoder self-attention, layer 2, step 7"
    images: list[AxesImage] = [ax.images[0] for ax in panels]
    assert {im.get_clim() for im in images} == {(0.0, 1.0)}  # comparable across heads and steps
    # 2 x 4 panels, the last two cells empty: rows labelled on the left column, columns on the
    # panels with nothing below them (heads 3 to 6), no ticks elsewhere.
    y_labelled = [[t.get_text() for t in ax.get_yticklabels()] == list("abc") for ax in panels]
    x_labelled = [[t.get_text() for t in ax.get_xticklabels()] == list("vwxyz") for ax in panels]
    assert y_labelled == [True, False, False, False, True, False]
    assert x_labelled == [False, False, True, True, True, True]
    ticks = [(len(ax.get_xticks()), len(ax.get_yticks())) for ax in panels]
    assert ticks == [(0, 3), (0, 0), (5, 0), (5, 0), (5, 3), (5, 0)]
    assert len(fig.axes) == 6 + 1  # the panels and one colour bar; empty grid cells removed


def test_token_labels_show_subwords_specials_and_word_starts(tokenizer):
    ids = tokenizer.encode_batch(["a dog"])[0]
    labels = token_labels(tokenizer, [BOS_ID, *ids, EOS_ID])
    assert labels[0] == "<s>" and labels[-1] == "</s>"
    assert "".join(labels[1:-1]).replace("▁", " ") == "a dog"
    assert labels[-2].startswith("▁")


def test_draw_attention_writes_each_kind_and_layer(tmp_path, tokenizer):
    torch.manual_seed(0)
    model = Transformer(tokenizer.vocab_size, 0, N=3, d_model=16, d_ff=32, h=2).eval()
    src = torch.tensor([*tokenizer.encode_batch(["a dog runs"])[0], EOS_ID])
    tgt_in = torch.tensor([BOS_ID, *tokenizer.encode_batch(["ein Hund"])[0]])
    weights = attention_weights(model, src, tgt_in)
    assert [w.shape for w in weights["decoder_src"]] == [(2, len(tgt_in), len(src))] * 3

    paths = draw_attention(weights, ["s"] * len(src), ["t"] * len(tgt_in), tmp_path, layers=[1, 3])
    assert sorted(paths) == [
        f"{kind}/layer{layer}"
        for kind in ("decoder_self", "decoder_src", "encoder_self")
        for layer in (1, 3)
    ]
    height, width, _ = matplotlib.image.imread(paths["decoder_src/layer3"]).shape
    assert (width, height) == figure_pixels(2)
