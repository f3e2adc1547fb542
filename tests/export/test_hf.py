"""The Hugging Face export is the same model: logits, greedy output, tokenizer framing."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from helpers.checkpoint_files import SENTENCES
from transformer_nmt import Translator
from transformer_nmt.cli.export import main as export_main
from transformer_nmt.data.framing import (
    TARGET_FRAME,
    cut_at_eos,
    pad_batch,
    source_batch,
    source_ids,
)
from transformer_nmt.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, BPETokenizer
from transformer_nmt.decoding import greedy_search
from transformer_nmt.export import ExportError
from transformer_nmt.model import Transformer

transformers = pytest.importorskip("transformers")
from transformer_nmt.export.hf import export_hf, feature_order  # noqa: E402

TEXTS = ["one two three", "fünf sechs sieben vier </s> zwei", "zwei"]
# A student's shape: a deeper encoder than decoder, and a narrower decoder feed-forward.
STUDENT = {"N_enc": 3, "N_dec": 1, "d_ff_dec": 8}


@pytest.fixture(scope="module")
def tokenizer() -> BPETokenizer:
    return BPETokenizer.train(SENTENCES, vocab_size=280, min_frequency=1)


def tiny(tokenizer: BPETokenizer, **settings) -> Transformer:
    torch.manual_seed(0)
    sizes = dict(N=2, d_model=16, d_ff=32, h=2, max_positions=32)
    return Transformer(tokenizer.vocab_size, PAD_ID, **(sizes | settings)).eval()


def load(folder: Path):
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    return model, transformers.AutoTokenizer.from_pretrained(folder)


def test_marian_positions_are_ours_with_the_features_reordered():
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

    from transformer_nmt.model.transformer.positions import SinusoidalPositionalEncoding

    for d_model in (16, 6):
        marian = MarianSinusoidalPositionalEmbedding(50, d_model).create_weight()
        ours = SinusoidalPositionalEncoding(d_model, 50).pe
        torch.testing.assert_close(marian, ours[:, feature_order(d_model)])


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"tie_embeddings": "decoder", "activation": "gelu"},
        {"tie_embeddings": "none", "activation": "swish", "output_bias": True},
        STUDENT,
    ],
    ids=["paper", "decoder-tied-gelu", "untied-swish-bias", "3-1"],
)
def test_logits_agree_on_a_padded_batch(tokenizer, settings, tmp_path):
    model = tiny(tokenizer, **settings)
    if model.generator.bias is not None:  # zeros when built: make it count
        torch.nn.init.normal_(model.generator.bias)
    export_hf(model, tokenizer, tmp_path)
    exported, hf_tokenizer = load(tmp_path)
    batch = hf_tokenizer(TEXTS, return_tensors="pt", padding=True)
    src = source_batch(tokenizer.encode_batch(TEXTS), model.config.max_positions)
    assert torch.equal(batch.input_ids, src) and torch.equal(batch.attention_mask, src != PAD_ID)
    tgt_in = pad_batch([[BOS_ID, 50, 60, 70, EOS_ID], [BOS_ID, 80], [BOS_ID, 5, 6, 7, 8, 9]])
    with torch.no_grad():
        ours = model(src, tgt_in)
        theirs = exported(**batch, decoder_input_ids=tgt_in).logits
    real = tgt_in != PAD_ID  # what a padded decoder position predicts is never used
    torch.testing.assert_close(theirs[real], ours[real], atol=1e-4, rtol=0)


def test_tokenizer_frames_cuts_and_decodes_as_ours(tokenizer, tmp_path):
    model = tiny(tokenizer, max_positions=8)
    export_hf(model, tokenizer, tmp_path)
    _, hf_tokenizer = load(tmp_path)
    # Cut to the position table, EOS appended, "</s>" in the text kept as text.
    ids = tokenizer.encode_batch(TEXTS)
    assert max(map(len, ids)) > 8  # so that one is cut
    got = hf_tokenizer(TEXTS, truncation=True).input_ids
    assert got == [source_ids(row, max_positions=8) for row in ids]
    assert hf_tokenizer.batch_decode(ids, skip_special_tokens=True) == TEXTS
    assert (hf_tokenizer.pad_token_id, hf_tokenizer.eos_token_id) == (PAD_ID, EOS_ID)
    assert hf_tokenizer.bos_token_id == BOS_ID and hf_tokenizer.unk_token_id == 3


@pytest.mark.parametrize("settings", [{}, STUDENT], ids=["paper", "3-1"])
def test_greedy_generate_follows_ours_and_forces_eos_at_the_length_limit(
    tokenizer, settings, tmp_path
):
    """A random model never ends: each row runs to its limit, where generate forces EOS."""
    model = tiny(tokenizer, **settings)
    export_hf(model, tokenizer, tmp_path)
    exported, hf_tokenizer = load(tmp_path)
    src = source_batch(tokenizer.encode_batch(TEXTS), model.config.max_positions)
    ours = greedy_search(model, src, **TARGET_FRAME, max_len_b=4)  # (B, T)
    for row, sentence in zip(ours.tolist(), TEXTS, strict=True):
        tokens = cut_at_eos([t for t in row if t != PAD_ID])
        batch = hf_tokenizer([sentence], return_tensors="pt")
        out = exported.generate(**batch, num_beams=1, do_sample=False, max_new_tokens=len(tokens))
        assert out[0, 0] == BOS_ID  # the decoder starts at our BOS
        assert out[0, 1:-1].tolist() == tokens[:-1] and out[0, -1] == EOS_ID


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"norm_first": True}, "model.norm_first=true (pre-norm): MarianMT is post-norm only"),
        ({"positions": "learned"}, "model.positions=learned: MarianMT has sinusoidal"),
        ({"d_k": 4, "d_v": 4}, "model.d_k=4, model.d_v=4: MarianMT's heads are d_model / h = 8"),
    ],
    ids=["pre-norm", "learned-positions", "head-size"],
)
def test_what_marian_cannot_express_is_refused(tokenizer, settings, message, tmp_path):
    with pytest.raises(ExportError, match=message.replace("(", r"\(").replace(")", r"\)")):
        export_hf(tiny(tokenizer, **settings), tokenizer, tmp_path)
    assert not any(tmp_path.iterdir())


def export_toy(toy, folder: Path):
    """The trained toy model, its test sources, and its export loaded by transformers."""
    model, tokenizer, test, _ = toy
    export_hf(model, tokenizer, folder)
    return Translator(model, tokenizer, device="cpu"), [src for src, _ in test], *load(folder)


@pytest.mark.slow
def test_trained_model_generate_equals_ours_sentence_for_sentence(toy, tmp_path):
    model, tokenizer, _, _ = toy
    translator, sources, exported, hf_tokenizer = export_toy(toy, tmp_path)
    ours = translator.translate(sources, beam_size=1)
    batch = hf_tokenizer(sources, return_tensors="pt", padding=True)
    out = exported.generate(**batch, num_beams=1, do_sample=False)
    assert hf_tokenizer.batch_decode(out, skip_special_tokens=True) == ours
    src = source_batch(tokenizer.encode_batch(sources), model.config.max_positions)
    greedy = greedy_search(model, src, **TARGET_FRAME)
    assert (greedy == EOS_ID).any(dim=1).all()  # every sentence ended before the length limit
    width = greedy.size(1)
    assert torch.equal(out[:, 1 : 1 + width], greedy)


@pytest.mark.slow
def test_trained_model_beam_generate_equals_ours_with_the_exported_defaults(toy, tmp_path):
    """generation_config.json alone (beam 4, |Y|^1 penalty, early stop) gives our beam output."""
    translator, sources, exported, hf_tokenizer = export_toy(toy, tmp_path)
    ours = translator.translate(sources, beam_size=4, alpha=1.0, penalty="fairseq")
    assert ours != translator.translate(sources, beam_size=1)  # the beam matters here
    out = exported.generate(**hf_tokenizer(sources, return_tensors="pt", padding=True))
    assert hf_tokenizer.batch_decode(out, skip_special_tokens=True) == ours


@pytest.mark.slow
def test_nmt_export_hf_loads_offline_with_the_auto_classes(toy, tmp_path):
    model, tokenizer, test, checkpoint = toy
    out = tmp_path / "hf"
    export_main(["hf", str(checkpoint), str(out)])
    load_and_translate = (
        "import sys; from transformers import AutoModelForSeq2SeqLM, AutoTokenizer; "
        "t = AutoTokenizer.from_pretrained(sys.argv[1]); "
        "m = AutoModelForSeq2SeqLM.from_pretrained(sys.argv[1]); "
        "b = t([sys.argv[2]], return_tensors='pt'); "
        "print(t.batch_decode(m.generate(**b, num_beams=1), skip_special_tokens=True)[0])"
    )
    offline = os.environ | {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, "-c", load_and_translate, str(out), test[0][0]],
        env=offline,
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    expected = Translator(model, tokenizer, device="cpu").translate([test[0][0]], beam_size=1)
    assert result.stdout.strip() == expected[0]
    card = (out / "README.md").read_text()
    assert "# transformer-nmt en → de" in card and "AutoModelForSeq2SeqLM" in card
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in out.iterdir()}
