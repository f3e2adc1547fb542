"""Every model family and switch against every export format: what a format can hold it holds
exactly, what it cannot is refused before anything is written, and docs/export.md's table says
so."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from helpers.checkpoint_files import SENTENCES, write_checkpoint
from helpers.hydra_compose import ROOT
from transformer_nmt.checkpoint import load_checkpoint
from transformer_nmt.cli.evaluate import main as evaluate_main
from transformer_nmt.cli.export import main as export_main
from transformer_nmt.cli.translate import main as translate_main
from transformer_nmt.data.framing import decoder_input, decoder_target, pad_batch, source_batch
from transformer_nmt.data.tokenizer import BPETokenizer
from transformer_nmt.export.formats import PROBLEMS
from transformer_nmt.export.native import load_safetensors
from transformer_nmt.model import FAMILIES

TEXTS = ["one two three", "fünf sechs sieben vier zwei", "zwei"]
TARGETS = ["vier", "drei eins", "sechs"]
FORMATS = ("hf", "ct2", "safetensors")
ALL = set(FORMATS)
# docs/export.md's row -> (family, settings beside the tiny sizes, the formats that hold it).
TABLE = {
    "Transformer, the paper's: post-norm, sinusoidal positions, all embeddings tied": (
        "transformer", {}, ALL
    ),
    "untied embeddings or decoder-only tying, GELU (`model.tie_embeddings`, "
    "`model.activation`)": (
        "transformer", {"tie_embeddings": "none", "activation": "gelu"}, ALL
    ),
    "swish, an output bias (`model.activation=swish`, `model.output_bias=true`)": (
        "transformer", {"activation": "swish", "output_bias": True}, ALL
    ),
    "pre-norm (`model.norm_first=true`)": (
        "transformer", {"norm_first": True}, {"ct2", "safetensors"}
    ),
    "learned positions (`model.positions=learned`)": (
        "transformer", {"positions": "learned"}, {"ct2", "safetensors"}
    ),
    "heads of another size, `model.d_k` = `model.d_v` ≠ d_model / h": (
        "transformer", {"d_k": 4, "d_v": 4}, {"ct2", "safetensors"}
    ),
    "`model.d_k` ≠ `model.d_v`": ("transformer", {"d_k": 4, "d_v": 12}, {"safetensors"}),
    "ReZero (`model.rezero=true`)": ("transformer", {"rezero": True}, {"safetensors"}),
    "RNN encoder-decoder with attention (`model=rnn_attention`)": (
        "rnn_attention", {}, {"safetensors"}
    ),
}  # fmt: skip
CELLS = [(row, f) for row in TABLE for f in FORMATS]


@pytest.fixture(scope="module")
def tokenizer() -> BPETokenizer:
    return BPETokenizer.train(SENTENCES, vocab_size=280, min_frequency=1)


@pytest.fixture(scope="module")
def checkpoints(tokenizer, tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("checkpoints")
    return {
        row: write_checkpoint(folder / f"{i}.ckpt", tokenizer, family=family, **settings)
        for i, (row, (family, settings, _)) in enumerate(TABLE.items())
    }


def log_probs(model, tokenizer) -> torch.Tensor:
    """Our model's log-probabilities of TARGETS given TEXTS: (B, T, V)."""
    src = source_batch(tokenizer.encode_batch(TEXTS), model.config.max_positions)
    tgt_in = pad_batch([decoder_input(t) for t in tokenizer.encode_batch(TARGETS)])
    with torch.no_grad():
        return model.eval()(src, tgt_in).log_softmax(-1)


def hf_log_probs(folder: Path, tokenizer) -> torch.Tensor:
    transformers = pytest.importorskip("transformers")
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    batch = hf_tokenizer(TEXTS, return_tensors="pt", padding=True)
    tgt_in = pad_batch([decoder_input(t) for t in tokenizer.encode_batch(TARGETS)])
    with torch.no_grad():
        return model(**batch, decoder_input_ids=tgt_in).logits.log_softmax(-1)


def assert_same_model(export_format: str, folder: Path, checkpoint: Path) -> None:
    """The folder's model gives the checkpoint's log-probabilities (within fp32 rounding)."""
    model, tokenizer = load_checkpoint(checkpoint)
    ours = log_probs(model, tokenizer)
    targets = [decoder_target(t) for t in tokenizer.encode_batch(TARGETS)]  # what is predicted
    if export_format == "safetensors":
        loaded, _ = load_safetensors(folder)
        assert type(loaded) is type(model) and loaded.config == model.config
        torch.testing.assert_close(log_probs(loaded, tokenizer), ours, atol=0, rtol=0)
    elif export_format == "hf":
        theirs = hf_log_probs(folder, tokenizer)
        for i, target in enumerate(targets):  # a padded position predicts nothing used
            real = slice(0, len(target))
            torch.testing.assert_close(theirs[i, real], ours[i, real], atol=1e-4, rtol=0)
    else:
        ctranslate2 = pytest.importorskip("ctranslate2")
        from transformer_nmt.export.ct2 import vocabulary

        vocab = vocabulary(tokenizer)
        tokens = [[vocab[i] for i in row] for row in tokenizer.encode_batch(TEXTS)]
        wanted = [[vocab[i] for i in row] for row in tokenizer.encode_batch(TARGETS)]
        translator = ctranslate2.Translator(str(folder), device="cpu", intra_threads=1)
        for i, scored in enumerate(translator.score_batch(tokens, wanted)):
            expected = [ours[i, j, y].item() for j, y in enumerate(targets[i])]  # tokens, EOS
            assert scored.log_probs == pytest.approx(expected, abs=1e-4)


def test_the_table_is_what_the_formats_check():
    for row, (family, settings, holders) in TABLE.items():
        config = FAMILIES[family].config(vocab_size=280, pad_id=0, **settings)
        verdicts = {f for f, problems in PROBLEMS.items() if not problems(config)}
        assert verdicts == holders, row


def test_the_docs_state_the_table():
    page = (ROOT / "docs" / "export.md").read_text(encoding="utf-8")
    for row, (_, _, holders) in TABLE.items():
        cells = " | ".join("yes" if f in holders else "no" for f in FORMATS)
        assert f"| {row} | {cells} |" in page, row


@pytest.mark.parametrize(("row", "export_format"), CELLS)
def test_each_format_holds_exactly_what_it_can_and_refuses_the_rest(
    row, export_format, checkpoints, tmp_path
):
    out = tmp_path / "out"
    _, settings, holders = TABLE[row]
    if export_format in holders:
        export_main([export_format, str(checkpoints[row]), str(out)])
        assert (out / "README.md").is_file()
        assert_same_model(export_format, out, checkpoints[row])
        return
    with pytest.raises(SystemExit) as refused:
        export_main([export_format, str(checkpoints[row]), str(out)])
    message = str(refused.value.code)
    assert message.startswith("error: ") and "cannot hold this model exactly" in message
    takers = sorted(holders)
    assert re.search(rf"\(exported by: [a-z0-9, ]*{takers[-1]}\)", message), message
    assert "safetensors)" in message  # safetensors takes every family
    switch = "model=rnn_attention" if "rnn" in row else f"model.{next(iter(settings), '')}"
    assert switch in message
    assert not out.exists()  # refused before anything is written


@pytest.mark.slow
def test_nmt_export_prints_a_refusal_without_a_traceback(checkpoints, tmp_path):
    rezero = checkpoints["ReZero (`model.rezero=true`)"]
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "transformer_nmt.cli.export",
            "ct2",
            str(rezero),
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr.strip() == (
        "error: CTranslate2 cannot hold this model exactly: model.rezero=true (ReZero): "
        "CTranslate2's layers each have a LayerNorm (exported by: safetensors)"
    )


@pytest.mark.parametrize("main", [translate_main, evaluate_main])
def test_the_ct2_engine_refuses_what_ct2_cannot_hold_naming_it(main, checkpoints, tmp_path):
    pytest.importorskip("ctranslate2")
    rezero = checkpoints["ReZero (`model.rezero=true`)"]
    (tmp_path / "src.txt").write_text("one two\n")
    test_set = ["--src", str(tmp_path / "src.txt"), "--ref", str(tmp_path / "src.txt")]
    files = [str(tmp_path / "src.txt")] if main is translate_main else test_set
    with pytest.raises(
        SystemExit, match="error: CTranslate2 cannot hold this model exactly: model.rez"
    ):
        main([str(rezero), *files, "--engine", "ct2"])
