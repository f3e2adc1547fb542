"""`nmt-plot-attention` as a user runs it, on a toy checkpoint."""

import json
import logging
import os
import subprocess
import sys

import matplotlib.image
import numpy as np
import pytest
import torch

from helpers.checkpoint_files import write_checkpoint
from helpers.hydra_compose import ROOT
from transformer_nmt.checkpoint import load_checkpoint
from transformer_nmt.cli.plot_attention import main, plot_attention
from transformer_nmt.data.tokenizer import EOS_ID, PAD_ID, BPETokenizer
from transformer_nmt.data.toy import ToyCorpus
from transformer_nmt.explorer import explore_sentence
from transformer_nmt.explorer.plots import figure_pixels
from transformer_nmt.explorer.sentence import decode_weights
from transformer_nmt.model import Transformer


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """What training saves, untrained: weights under `model.`, model config and tokenizer."""
    pairs = ToyCorpus(num_train=200).read("train", "en", "de")
    tokenizer = BPETokenizer.train([s for p in pairs for s in p], vocab_size=300, min_frequency=1)
    torch.manual_seed(0)
    model = Transformer(tokenizer.vocab_size, PAD_ID, N=2, d_model=16, d_ff=32, h=2)
    path = tmp_path_factory.mktemp("ckpt") / "toy.ckpt"
    state = {f"model.{k}": v for k, v in model.state_dict().items()}
    torch.save(
        {
            "state_dict": state,
            "model_config": model.config.to_dict(),
            "tokenizer": tokenizer.to_str(),
        },
        path,
    )
    return path


def run(*args: str) -> list[str]:
    # This checkout's sources, whichever copy of the package happens to be installed.
    path = os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    out = subprocess.run(
        [sys.executable, "-m", "transformer_nmt.cli.plot_attention", *args],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    return out.split()


@pytest.mark.slow
def test_forced_reference_draws_every_kind_and_layer(checkpoint, tmp_path):
    paths = run(
        str(checkpoint),
        "three one four",
        "--reference",
        "drei eins vier",
        "--out",
        str(tmp_path),
        "--device",
        "cpu",
        "--dtype",
        "bfloat16",
    )
    names = sorted(os.path.basename(p) for p in paths)
    assert names == sorted(
        f"{kind}_layer{layer}.png"
        for kind in ("encoder_self", "decoder_self", "decoder_src")
        for layer in (1, 2)
    )
    for path in paths:
        height, width, _ = matplotlib.image.imread(path).shape
        assert (width, height) == figure_pixels(2)  # two heads: a 1 x 2 grid


def test_greedy_translation_and_chosen_layers(checkpoint, tmp_path):
    paths = plot_attention(checkpoint, "three one four", tmp_path, layers=[2]).values()
    assert sorted(p.name for p in paths) == [
        "decoder_self_layer2.png",
        "decoder_src_layer2.png",
        "encoder_self_layer2.png",
    ]


def test_half_precision_weights_draw_the_same_pictures_as_float32(checkpoint, tmp_path):
    args = ("three one four", tmp_path / "f32", "drei eins vier", [1])
    f32 = plot_attention(checkpoint, *args)
    bf16 = plot_attention(
        checkpoint, "three one four", tmp_path / "bf16", "drei eins vier", [1], dtype=torch.bfloat16
    )
    assert list(bf16) == list(f32)
    for kind, path in f32.items():
        # bfloat16 weights differ from float32 by ~1%: two colour steps at most.
        diff = abs(matplotlib.image.imread(bf16[kind]) - matplotlib.image.imread(path))
        assert diff.max() < 3 / 255, kind


def test_an_rnn_draws_its_alignment_alone_as_one_head(checkpoint, tmp_path):
    tokenizer = BPETokenizer.from_str(torch.load(checkpoint, weights_only=True)["tokenizer"])
    rnn = write_checkpoint(tmp_path / "rnn.ckpt", tokenizer, family="rnn_attention")
    paths = plot_attention(rnn, "three one four", tmp_path / "png", reference="drei eins vier")
    # No self-attention to draw: only alpha_ij, one "layer" with one "head".
    assert list(paths) == ["decoder_src/layer1"]
    height, width, _ = matplotlib.image.imread(paths["decoder_src/layer1"]).shape
    assert (width, height) == figure_pixels(1)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["one", "two", "--reference", "eins", "--html", "x.html"], "2 sources but 1 --reference"),
        (["one", "two"], "give one source, or --html without --out"),
    ],
)
def test_sentences_and_references_that_do_not_fit_are_refused_naming_the_option(
    checkpoint, tmp_path, capsys, args, message
):
    args = [str(tmp_path / a) if a == "x.html" else a for a in args]
    with pytest.raises(SystemExit):
        main([str(checkpoint), *args])
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x.html").exists()


def page_data(html) -> dict:
    """The explorer data a page holds, read back from its inline JSON."""
    text = html.read_text(encoding="utf-8")
    start = text.index('id="data">') + len('id="data">')
    return json.loads(text[start : text.index("</script>", start)].replace("<\\/", "</"))


def test_html_shows_the_chosen_layers_only(checkpoint, tmp_path):
    html = tmp_path / "page.html"
    main([str(checkpoint), "three one four", "--html", str(html), "--layers", "2", "--max-len-b=3"])
    ((sentence,),) = [v["sentences"] for v in page_data(html)["validations"]]
    assert sentence["layers"] == [2]
    shapes = [sentence["encoder_self"]["shape"]] + [
        r[kind]["shape"] for r in sentence["readings"] for kind in ("decoder_self", "decoder_src")
    ]
    assert [s[0] for s in shapes] == [1, 1, 1]  # one layer of each kind
    model, tokenizer = load_checkpoint(checkpoint)
    full = explore_sentence(model, tokenizer, [4, 5, 6, EOS_ID], max_len_b=3)
    layer2 = decode_weights(full["encoder_self"])[1:]
    mine = explore_sentence(model, tokenizer, [4, 5, 6, EOS_ID], max_len_b=3, layers=[2])
    assert np.array_equal(decode_weights(mine["encoder_self"]), layer2)  # layer 2's, not layer 1's


@pytest.fixture(scope="module")
def short_positions(checkpoint, tmp_path_factory):
    """The toy checkpoint's tokenizer on a model of 24 positions."""
    tokenizer = BPETokenizer.from_str(torch.load(checkpoint, weights_only=True)["tokenizer"])
    path = tmp_path_factory.mktemp("short") / "short.ckpt"
    return write_checkpoint(path, tokenizer, N=1, max_positions=24)


def test_a_sentence_longer_than_the_positions_is_cut_with_a_warning(
    short_positions, tmp_path, caplog
):
    long = " ".join(["three one four"] * 10)  # 30 words, more than 24 positions
    html = tmp_path / "page.html"
    with caplog.at_level(logging.WARNING):
        main([str(short_positions), long, "--html", str(html), "--beam-size", "1",
              "--reference", long])  # fmt: skip
        paths = plot_attention(short_positions, long, tmp_path / "png")
    warnings = [r.getMessage() for r in caplog.records]
    assert any(w.startswith("sentence 1: ") and "reading the first 23" in w for w in warnings)
    assert any(w.startswith("the reference: ") and "reading the first 23" in w for w in warnings)
    ((sentence,),) = [v["sentences"] for v in page_data(html)["validations"]]
    assert len(sentence["src"]) == 24  # 23 tokens and EOS
    for reading in sentence["readings"]:
        assert reading["decoder_src"]["shape"][2] <= 24 and len(reading["out"]) <= 24
    assert len(paths) == 3
