"""The CTranslate2 export is the same model: log-probabilities and greedy output; int8 scores."""

import pytest
import torch
from sacrebleu.metrics import BLEU, CHRF

from helpers.checkpoint_files import SENTENCES
from transformer_nmt import Translator
from transformer_nmt.cli.export import main as export_main
from transformer_nmt.cli.translate import main as translate_main
from transformer_nmt.data.framing import (
    TARGET_FRAME,
    cut_at_eos,
    decoder_input,
    decoder_target,
    pad_batch,
    source_batch,
)
from transformer_nmt.data.tokenizer import PAD_ID, BPETokenizer
from transformer_nmt.decoding import greedy_search
from transformer_nmt.export import ExportError
from transformer_nmt.model import Transformer

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
    "swish-output-bias": {"activation": "swish", "output_bias": True},
    "3-1": {"N_enc": 3, "N_dec": 1, "d_ff_dec": 8},  # a student: its decoder shallower, narrower
}


@pytest.mark.parametrize("settings", VARIANTS.values(), ids=VARIANTS.keys())
def test_log_probs_and_greedy_output_agree(tokenizer, settings, tmp_path):
    model = tiny(tokenizer, **settings)
    if model.generator.bias is not None:  # zeros when built: make it count
        torch.nn.init.normal_(model.generator.bias)
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
        else:
            closeness = CHRF().corpus_score(hypotheses, [ours]).score
        assert "CTranslate2" in (out / "README.md").read_text()
    assert bleu["float32"] > 40 and bleu["int8"] > 40  # the toy model translates
    # int8 kernels differ by CPU instruction set: how many of the 40 translations change varies
    # from 1 to 15 (experiments/export/README.md), while BLEU moves by about one changed
    # sentence's worth and the changes stay small edits of ours.
    assert bleu["int8"] > bleu["float32"] - 5
    assert closeness > 80


def test_the_ct2_engine_translates_as_ours(tokenizer):
    """Sentence by sentence, so that each has its own length limit (a random model reaches it)."""
    model = tiny(tokenizer)
    options = dict(beam_size=1, max_len_b=4, batch_size=1, n_best=1)
    texts = [*TEXTS, ""]
    ours = Translator(model, tokenizer, device="cpu").translate(texts, **options)
    fast = Translator(model, tokenizer, device="cpu", engine="ct2").translate(texts, **options)
    # CTranslate2's log-probability leaves PAD and BOS out of its softmax, ours counts them:
    # never lower than ours, as far above as the mass random weights give them.
    for [(ours_text, ours_score)], [(text, score)] in zip(ours, fast, strict=True):
        assert text == ours_text and score >= ours_score - 1e-4


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (dict(quantization="int8_float32"), "engine 'torch' quantizes to 'int8' only"),
        (dict(quantization="int8", dtype=torch.bfloat16), "int8 quantization runs on the CPU"),
        (dict(engine="onnx"), "engine must be 'torch' or 'ct2', got 'onnx'"),
    ],
)
def test_engine_options_out_of_place_are_refused(tokenizer, options, message):
    with pytest.raises(ValueError, match=message):
        Translator(tiny(tokenizer), tokenizer, device="cpu", **options)


@pytest.mark.slow
@pytest.mark.parametrize(("penalty", "alpha"), [("gnmt", 0.6), ("fairseq", 1.0)])
def test_the_ct2_engine_beam_search_equals_ours_on_a_trained_model(toy, penalty, alpha):
    model, tokenizer, test, _ = toy
    sources = [src for src, _ in test]
    # Batches of 8: five in one chunk, decoded side by side and put back in input order.
    options = dict(beam_size=4, penalty=penalty, alpha=alpha, n_best=4, batch_size=8)
    ours = Translator(model, tokenizer, device="cpu").translate(sources, **options)
    fast = Translator(model, tokenizer, device="cpu", engine="ct2").translate(sources, **options)
    assert [n[0][0] for n in fast] == [n[0][0] for n in ours]
    # Within the mass a trained model leaves on PAD and BOS, which CTranslate2's softmax leaves out.
    assert [n[0][1] for n in fast] == pytest.approx([n[0][1] for n in ours], abs=3e-3)
    # The runners-up may differ: CTranslate2 keeps other finished hypotheses than our fairseq-style
    # bookkeeping (1 sentence in 40 here, with either form). They come ranked all the same, by
    # their normalized scores.
    search = Translator(model, tokenizer, device="cpu", engine="ct2").search
    (found,) = search([tokenizer.encode_batch(sources)], 4, alpha, penalty, 50, 4)
    for n_best in found:
        normalized = [h.normalized for h in n_best]
        assert len(normalized) == 4 and normalized == sorted(normalized, reverse=True)


@pytest.mark.slow
def test_nmt_translate_engine_ct2_is_one_flag(toy, tmp_path, capsys):
    _, _, test, checkpoint = toy
    (tmp_path / "src.en").write_text("".join(f"{src}\n" for src, _ in test[:8]))
    outputs = {}
    for engine in ("torch", "ct2"):
        translate_main([str(checkpoint), str(tmp_path / "src.en"), "--engine", engine])
        outputs[engine] = capsys.readouterr().out
    assert outputs["ct2"] == outputs["torch"] and len(outputs["ct2"].splitlines()) == 8
