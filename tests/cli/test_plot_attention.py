"""`nmt-plot-attention` as a user runs it, on a toy checkpoint."""

import os
import subprocess
import sys

import matplotlib.image
import pytest
import torch

from helpers.checkpoint_files import write_checkpoint
from helpers.hydra_compose import ROOT
from transformer_nmt.cli.plot_attention import main, plot_attention
from transformer_nmt.data.tokenizer import PAD_ID, BPETokenizer
from transformer_nmt.data.toy import ToyCorpus
from transformer_nmt.explorer.plots import figure_pixels
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
