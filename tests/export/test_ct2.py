"""The CTranslate2 export is the same model: log-probabilities and greedy output; int8 scores."""

import pytest
import torch
from sacrebleu.metrics import BLEU

from checkpoint_files import SENTENCES
from transformer_nmt import Translator
from transformer_nmt.cli.export import main as export_main
from transformer_nmt.data.framing import (
    TARGET_FRAME,
    cut_at_eos,
    decoder_input,
    decoder_target,
    pad_batch,
    source_batch,
)
from transformer_nmt.data.tokenizer import PAD_ID, BPETokenizer
from transformer_nmt.export import ExportError
from transformer_nmt.model import Transformer, greedy_search

ctranslate2 = pytest.importorskip("ctranslate2")
from transformer_nmt.export.ct2 import export_ct2, vocabulary  # noqa: E402

TEXTS = ["one two three", "fünf sechs sieben vier zwei", "zwei"]
NEVER = [["<pad>"], ["<s>"]]  # as our search: PAD and BOS are never picked


@pytest.fixture(scope="module")
def tokenizer() -> BPETokenizer:
    return BPETokenizer.train(SENTENCES, vocab_size=280, min_frequency=1)


def tiny(tokenizer: BPETokenizer, **settings) -> Transformer:
    torch.manual_seed(0)
    sizes = dict(N=2, d_model=16, d_ff=32, h=2, max_positions=32)
    return Transformer(tokenizer.vocab_size, PAD_ID, **(sizes | settings)).eval()


def as_tokens(tokenizer: BPETokenizer, texts: list[str]) -> list[list[str]]:
    vocab = vocabulary(tokenizer)
    return [[vocab[i] for i in row] for row in tokenizer.encode_batch(texts)]


VARIANTS = {
    "paper": {},
    "pre-norm-learned-untied": {
        "norm_first": True,
        "positions": "learned",
        "tie_embeddings": "none",
    },
    "decoder-tied-gelu-heads": {
        "tie_embeddings": "decoder",
        "activation": "gelu",
        "d_k": 4,
        "d_v": 4,
    },
}


@pytest.mark.parametrize("settings", VARIANTS.values(), ids=VARIANTS.keys())
def test_log_probs_and_greedy_output_agree(tokenizer, settings, tmp_path):
    model = tiny(tokenizer, **settings)
    export_ct2(model, tokenizer, tmp_path)
    translator = ctranslate2.Translator(str(tmp_path), device="cpu", intra_threads=1)
    vocab = vocabulary(tokenizer)
    sources, targets = as_tokens(tokenizer, TEXTS), as_tokens(tokenizer, ["vier", "drei eins", ""])
    src = source_batch(tokenizer.encode_batch(TEXTS), model.config.max_positions)
    target_ids = [[vocab.index(t) for t in row] for row in targets]
    with torch.no_grad():
        log_probs = model(src, pad_batch([decoder_input(t) for t in target_ids])).log_softmax(-1)
    for i, scored in enumerate(translator.score_batch(sources, targets)):
        ours = [log_probs[i, j, y].item() for j, y in enumerate(decoder_target(target_ids[i]))]
        assert scored.log_probs == pytest.approx(ours, abs=1e-4)
    # A random model never ends: each row runs to its own limit, given to CTranslate2 as its own.
    greedy = greedy_search(model, src, **TARGET_FRAME, max_len_b=4)
    for row, source in zip(greedy.tolist(), sources, strict=True):
        tokens = cut_at_eos([t for t in row if t != PAD_ID])
        (result,) = translator.translate_batch(
            [source], beam_size=1, max_decoding_length=len(tokens), suppress_sequences=NEVER
        )
        assert [vocab.index(t) for t in result.hypotheses[0]] == tokens


def test_different_query_and_value_sizes_are_refused(tokenizer, tmp_path):
    with pytest.raises(ExportError, match="model.d_k=4 differs from model.d_v=8"):
        export_ct2(tiny(tokenizer, d_k=4, d_v=8), tokenizer, tmp_path)


def test_quantizing_leaves_the_model_untouched(tokenizer, tmp_path):
    model = tiny(tokenizer)
    before = {key: t.clone() for key, t in model.state_dict().items()}
    export_ct2(model, tokenizer, tmp_path, quantization="int8")
    for key, t in model.state_dict().items():
        assert torch.equal(t, before[key]), key


@pytest.mark.slow
def test_trained_model_greedy_equals_ours_and_int8_scores_within_tolerance(toy, tmp_path):
    model, tokenizer, test, checkpoint = toy
    sources, references = [src for src, _ in test], [[tgt for _, tgt in test]]
    ours = Translator(model, tokenizer, device="cpu").translate(sources, beam_size=1)
    bleu = {}
    for quantization in ("float32", "int8"):
        out = tmp_path / quantization
        export_main(["ct2", str(checkpoint), str(out), "--quantization", quantization])
        translator = ctranslate2.Translator(str(out), device="cpu", intra_threads=1)
        results = translator.translate_batch(
            as_tokens(tokenizer, sources), beam_size=1, suppress_sequences=NEVER
        )
        vocab = vocabulary(tokenizer)
        ids = [[vocab.index(t) for t in r.hypotheses[0]] for r in results]
        hypotheses = tokenizer.decode_batch(ids)
        bleu[quantization] = BLEU().corpus_score(hypotheses, references).score
        if quantization == "float32":
            assert hypotheses == ours
        assert "CTranslate2" in (out / "README.md").read_text()
    assert bleu["float32"] > 40  # the toy model translates, so the comparison means something
    # Measured here (AVX2): 52.4 against 53.9 on these 40 sentences, where one sentence is worth
    # about 2.5 BLEU. int8 kernels differ by CPU instruction set, hence the margin.
    assert bleu["int8"] >= bleu["float32"] - 3.0
