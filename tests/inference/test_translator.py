"""The Python API: `Translator` gives what the model and search give, in input order."""

import re
import threading
from pathlib import Path

import pytest
import torch

from helpers.checkpoint_files import SENTENCES, write_checkpoint
from transformer_nmt import Translator
from transformer_nmt.checkpoint import (
    CheckpointError,
    average_checkpoints,
    load_checkpoint,
    translator_from,
)
from transformer_nmt.data.framing import TARGET_FRAME, source_batch
from transformer_nmt.data.tokenizer import BPETokenizer
from transformer_nmt.decoding import beam_search
from transformer_nmt.decoding.ensemble import Ensemble
from transformer_nmt.decoding.mbr import MBR, select
from transformer_nmt.decoding.sampling import Sampling
from transformer_nmt.inference import translator as translator_module

INPUTS = ["one two three", "", "fünf sechs", "four five six seven", "zwei"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """Three tiny checkpoints of one 'run', at steps 1, 2 and 3."""
    tokenizer = BPETokenizer.train(SENTENCES, vocab_size=280, min_frequency=1)
    folder = tmp_path_factory.mktemp("checkpoints")
    for step in (1, 2, 3):
        write_checkpoint(folder / f"step{step}.ckpt", tokenizer, seed=step, step=step)
    return folder


def reference(model, tokenizer, sentences: list[str], **options) -> list[list[tuple[str, float]]]:
    """Beam search on each sentence alone, without the Translator."""
    out = []
    for sentence in sentences:
        src = source_batch(tokenizer.encode_batch([sentence]), model.config.max_positions)
        (hypotheses,) = beam_search(model, src, **TARGET_FRAME, **options)
        texts = tokenizer.decode_batch([h.tokens for h in hypotheses])
        out.append([(text, h.score) for text, h in zip(texts, hypotheses, strict=True)])
    return out


def test_translate_equals_beam_search_in_input_order(folder, device):
    translator = Translator.from_checkpoint(folder / "step1.ckpt", device=device)
    model, tokenizer = load_checkpoint(folder / "step1.ckpt")
    options = dict(beam_size=3, alpha=0.6, max_len_b=5)
    got = translator.translate(INPUTS, batch_size=2, **options)
    nonempty = [s for s in INPUTS if s]
    expected = iter(hyps[0][0] for hyps in reference(model, tokenizer, nonempty, **options))
    assert got == [next(expected) if s else "" for s in INPUTS]


def test_n_best_gives_scored_lists_best_first(folder):
    translator = Translator.from_checkpoint(folder / "step1.ckpt", device="cpu")
    options = dict(beam_size=3, penalty="fairseq", alpha=1.0, max_len_b=5)
    best = translator.translate(INPUTS, **options)
    scored = translator.translate(INPUTS, n_best=3, **options)
    model, tokenizer = load_checkpoint(folder / "step1.ckpt")
    (expected,) = reference(model, tokenizer, [INPUTS[0]], n_best=3, **options)
    assert [text for text, _ in scored[0]] == [text for text, _ in expected]
    assert [s for _, s in scored[0]] == pytest.approx([s for _, s in expected])
    assert scored[1] == [("", 0.0)] * 3  # the empty line
    for text, hypotheses in zip(best, scored, strict=True):
        assert len(hypotheses) == 3 and hypotheses[0][0] == text


def test_several_checkpoints_and_average_last_translate_with_the_average(folder):
    paths = [folder / "step2.ckpt", folder / "step3.ckpt"]
    averaged, _ = translator_from(average_checkpoints(paths))
    by_list = Translator.from_checkpoint(paths, device="cpu")
    by_folder = Translator.from_checkpoint(folder, device="cpu", average_last=2)
    for translator in (by_list, by_folder):
        for key, t in averaged.state_dict().items():
            assert torch.equal(translator.model.state_dict()[key], t), key


def test_device_and_dtype_are_applied(folder, device):
    path = folder / "step1.ckpt"
    translator = Translator.from_checkpoint(path, device=device, dtype=torch.float64)
    assert {p.dtype for p in translator.model.parameters()} == {torch.float64}
    assert {p.device.type for p in translator.model.parameters()} == {device.type}
    assert not translator.model.training
    float32 = Translator.from_checkpoint(path, device="cpu")
    assert translator.translate(INPUTS, max_len_b=5) == float32.translate(INPUTS, max_len_b=5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precisions_translate_every_line_in_order(folder, dtype):
    translator = Translator.from_checkpoint(folder / "step1.ckpt", device="cpu", dtype=dtype)
    assert {p.dtype for p in translator.model.parameters()} == {dtype}
    got = translator.translate(INPUTS, beam_size=2, max_len_b=5, batch_size=2)
    assert len(got) == len(INPUTS) and got[1] == ""
    assert all(isinstance(text, str) for text in got)


# Lengths 1..6 words in a shuffled order, a blank among them: batches of 2 mix them unless sorted.
MIXED = [
    "four five six seven one two",
    "zwei",
    "one two three",
    " ",
    "fünf sechs sieben vier drei",
    "one two",
    "drei vier fünf sechs",
]


def test_length_sorted_batches_give_each_sentences_own_translation_in_input_order(folder):
    translator = Translator.from_checkpoint(folder / "step1.ckpt", device="cpu")
    batches = spy_on_batches(translator)
    options = dict(beam_size=3, alpha=0.6, max_len_b=5)
    got = translator.translate(MIXED, batch_size=2, n_best=2, **options)
    model, tokenizer = load_checkpoint(folder / "step1.ckpt")
    nonempty = [s for s in MIXED if s.strip()]
    expected = iter(reference(model, tokenizer, nonempty, n_best=2, **options))
    for scored, sentence in zip(got, MIXED, strict=True):
        if not sentence.strip():
            assert scored == [("", 0.0)] * 2
            continue
        want = next(expected)
        assert [text for text, _ in scored] == [text for text, _ in want]
        assert [s for _, s in scored] == pytest.approx([s for _, s in want], abs=1e-5)
    lengths = [n for batch in batches for n in batch]
    assert lengths == sorted(lengths) and len(lengths) == len(nonempty)
    assert max(len(b) for b in batches) == 2


def test_stream_reads_one_chunk_before_its_first_output(folder, monkeypatch):
    monkeypatch.setattr(translator_module, "SORT_CHUNK", 2)
    translator = Translator.from_checkpoint(folder / "step1.ckpt", device="cpu")
    read = []

    def lines():
        for i in range(20):
            read.append(i)
            yield SENTENCES[i]

    outputs = translator.stream(lines(), beam_size=1, max_len_b=3, batch_size=3)
    next(outputs)
    assert len(read) == 2 * 3  # SORT_CHUNK batches of 3, not the whole input
    read.clear()
    mbr = MBR(Sampling(n=3, seed=1))  # three samples a sentence: a third of the sentences
    next(translator.stream(lines(), beam_size=1, max_len_b=3, batch_size=3, mbr=mbr))
    assert len(read) == 2
    rest = translator.stream(iter(SENTENCES[:3]), beam_size=1, max_len_b=3, batch_size=1)
    next(rest)  # batch_size 1 reads line by line, for interactive input
    assert len(list(rest)) == 2


def spy_on_batches(translator: Translator) -> list[list[int]]:
    """The token counts of each source the search is given, batch by batch, from now on."""
    batches: list[list[int]] = []
    search = translator.search

    class Spy:
        max_positions = search.max_positions

        def __call__(self, chunk, **options):
            batches.extend([len(t) for t in tokens] for tokens in chunk)
            return search(chunk, **options)

    translator.search = Spy()
    return batches


def test_token_batches_stay_within_max_tokens_and_keep_the_input_order(folder):
    translator = Translator.from_checkpoint(folder / "step1.ckpt", device="cpu")
    options = dict(beam_size=2, max_len_b=4, n_best=2)
    alone = translator.translate(MIXED, batch_size=1, **options)
    batches = spy_on_batches(translator)
    max_tokens = 34  # lengths 3, 4, 7, 12, 16, 16 plus EOS: batches of 3, 2 and 1
    got = translator.translate(MIXED, max_tokens=max_tokens, **options)
    assert [[t for t, _ in n] for n in got] == [[t for t, _ in n] for n in alone]
    lengths = [n for batch in batches for n in batch]
    assert lengths == sorted(lengths) and len(lengths) == len([s for s in MIXED if s.strip()])
    # Source tokens as the encoder reads them: each padded to the batch's longest, plus EOS.
    assert all(len(b) * (max(b) + 1) <= max_tokens for b in batches)
    assert len(batches) < len(lengths)  # short sentences shared a batch


def test_a_sentence_longer_than_max_tokens_is_decoded_alone_in_its_batch(folder):
    translator = Translator.from_checkpoint(folder / "step1.ckpt", device="cpu")
    batches = spy_on_batches(translator)
    got = translator.translate(MIXED, max_tokens=3, beam_size=1, max_len_b=3)
    assert len(got) == len(MIXED)
    assert all(len(b) == 1 for b in batches if max(b) + 1 > 3)
    assert any(max(b) + 1 > 3 for b in batches)  # the case was there


def test_a_max_tokens_below_one_is_an_error_not_an_empty_output(folder):
    translator = Translator.from_checkpoint(folder / "step1.ckpt", device="cpu")
    with pytest.raises(ValueError, match="max_tokens must be >= 1, got 0"):
        next(translator.stream(MIXED, max_tokens=0))


def test_autocast_keeps_float32_weights_and_runs_the_matmuls_in_bfloat16(folder):
    translator = Translator.from_checkpoint(
        folder / "step1.ckpt", device="cpu", autocast=torch.bfloat16
    )
    assert {p.dtype for p in translator.model.parameters()} == {torch.float32}
    seen = set()
    hook = translator.model.generator.register_forward_hook(lambda m, i, out: seen.add(out.dtype))
    got = translator.translate(INPUTS, beam_size=2, max_len_b=5)
    hook.remove()
    assert seen == {torch.bfloat16}
    assert len(got) == len(INPUTS) and got[1] == ""
    plain = Translator.from_checkpoint(folder / "step1.ckpt", device="cpu")
    seen.clear()
    plain.model.generator.register_forward_hook(lambda m, i, out: seen.add(out.dtype))
    plain.translate(INPUTS[:1], beam_size=1, max_len_b=2)
    assert seen == {torch.float32}  # the autocast did not leak out of its search


def test_an_ensemble_of_one_checkpoint_translates_as_that_checkpoint(folder):
    path = folder / "step1.ckpt"
    options = dict(beam_size=3, max_len_b=5, n_best=2, batch_size=2)
    single = Translator.from_checkpoint(path, device="cpu").translate(INPUTS, **options)
    assert Translator.from_ensemble([path], device="cpu").translate(INPUTS, **options) == single
    pair = Translator.from_ensemble([path, [folder / "step2.ckpt", folder / "step3.ckpt"]])
    assert len(pair.model.members) == 2  # the second member the average of two
    assert len(pair.translate(INPUTS, **options)) == len(INPUTS)


def test_an_ensemble_member_of_another_vocabulary_is_refused_naming_it(folder, tmp_path):
    other = BPETokenizer.train(["sieben acht neun"] * 5, vocab_size=270, min_frequency=1)
    stranger = write_checkpoint(tmp_path / "other.ckpt", other)
    with pytest.raises(CheckpointError, match=r"ensemble member 2 \(.*other.ckpt\) has another"):
        Translator.from_ensemble([folder / "step1.ckpt", stranger])
    with pytest.raises(ValueError, match="1 ensemble weights for 2 members"):
        Translator.from_ensemble([folder / "nothing.ckpt", stranger], weights=[1.0])
    model, tokenizer = load_checkpoint(folder / "step1.ckpt")
    with pytest.raises(ValueError, match="an ensemble decodes with engine='torch'"):
        Translator(Ensemble([model]), tokenizer, engine="ct2")


def texts(scored: list[tuple[str, float]]) -> list[str]:
    return [text for text, _ in scored]


def scores(scored: list[tuple[str, float]]) -> list[float]:
    return [score for _, score in scored]


def test_samples_are_the_same_in_any_batch_plan_and_differ_by_seed(folder):
    translator = Translator.from_checkpoint(folder / "step1.ckpt", device="cpu")
    sampling = Sampling(n=3, temperature=2.0, seed=5)
    options = dict(max_len_b=5, sampling=sampling)
    alone = translator.translate(MIXED, batch_size=1, **options)
    for plan in (dict(batch_size=3), dict(max_tokens=12)):
        got = translator.translate(MIXED, **plan, **options)
        assert [texts(samples) for samples in got] == [texts(samples) for samples in alone]
        assert [scores(s) for s in got] == [pytest.approx(scores(s), abs=1e-4) for s in alone]
    assert all(len(samples) == 3 for samples in alone)
    reseeded = dict(options, sampling=Sampling(n=3, temperature=2.0, seed=6))
    assert [texts(s) for s in translator.translate(MIXED, **reseeded)] != [texts(s) for s in alone]
    one = translator.translate(MIXED, max_len_b=5, sampling=Sampling(top_k=1))
    assert one == translator.translate(MIXED, beam_size=1, max_len_b=5)  # strings, greedy's


def test_line_breaks_and_tabs_the_model_samples_come_out_as_spaces(tmp_path):
    tokenizer = BPETokenizer.train(SENTENCES, vocab_size=280, min_frequency=1)
    path = write_checkpoint(tmp_path / "breaks.ckpt", tokenizer, output_bias=True)
    checkpoint = torch.load(path, weights_only=True)
    bias = checkpoint["state_dict"]["model.generator.bias"]
    breaking = [tokenizer.encode_batch([c])[0][0] for c in ("\n", "\t", "\r", "\v")]
    bias[breaking] = 50.0  # all but certain, in any order
    torch.save(checkpoint, path)
    translator = Translator.from_checkpoint(path, device="cpu")
    samples = translator.translate(["one two"], max_len_b=6, sampling=Sampling(n=4, seed=1))
    outputs = texts(samples[0])
    assert len(outputs) == 4 and all(text and set(text) == {" "} for text in outputs)


def test_each_translation_starts_with_its_prefix_verbatim(folder):
    translator = Translator.from_checkpoint(folder / "step1.ckpt", device="cpu")
    prefixes = ["fünf sechs", "", "one", "", "zwei drei", "four", "sechs"]
    for options in (dict(beam_size=3), dict(sampling=Sampling(n=2)), dict(beam_size=1)):
        got = translator.translate(MIXED, max_len_b=5, batch_size=2, prefixes=prefixes, **options)
        for sentence, prefix, out in zip(MIXED, prefixes, got, strict=True):
            texts = [out] if isinstance(out, str) else [text for text, _ in out]
            assert all(t.startswith(prefix) for t in texts) or not sentence.strip()


def test_a_prefix_longer_than_its_translation_may_be_or_missing_is_refused_naming_the_line(
    folder,
):
    translator = Translator.from_checkpoint(folder / "step1.ckpt", device="cpu")
    long = ["", "", "", "", "one two three four five six seven", "", ""]
    with pytest.raises(ValueError, match=r"line 5: its prefix has \d+ tokens, more than the"):
        translator.translate(MIXED, max_len_b=0, prefixes=long)
    with pytest.raises(ValueError, match="line 3: no prefix, the prefixes ended before"):
        translator.translate(MIXED, batch_size=1, prefixes=["a", "b"])
    with pytest.raises(ValueError, match="more prefixes than the 7 sentences"):
        translator.translate(MIXED, prefixes=[""] * 8)
    with pytest.raises(ValueError, match="n_best is beam search's"):
        translator.translate(MIXED, n_best=2, sampling=Sampling(n=2))


def test_a_constraint_is_met_as_a_whole_word_where_the_model_would_go_on_with_it(tmp_path):
    tokenizer = BPETokenizer.train(SENTENCES, vocab_size=280, min_frequency=1)
    path = write_checkpoint(tmp_path / "e.ckpt", tokenizer, output_bias=True)
    checkpoint = torch.load(path, weights_only=True)
    (e,) = tokenizer.encode_batch(["e"])[0]
    checkpoint["state_dict"]["model.generator.bias"][e] = 20.0  # "e" after anything
    torch.save(checkpoint, path)
    translator = Translator.from_checkpoint(path, device="cpu")
    options = dict(max_len_b=4, constraints=[["zwei"]])
    (got,) = translator.translate(["one two"], **options)
    assert re.search(r"(?<!\w)zwei(?!\w)", got)
    unruled = Translator.from_checkpoint(path, device="cpu")
    continuing = unruled.tokenizer.continues_word()
    unruled.tokenizer.continues_word = lambda: [False] * len(continuing)  # any id may follow
    assert "zweie" in unruled.translate(["one two"], **options)[0]


def test_a_constraint_met_as_the_first_word_is_written_as_the_tokenizer_writes_one(tmp_path):
    tokenizer = BPETokenizer.train(SENTENCES, vocab_size=280, min_frequency=1)
    path = write_checkpoint(tmp_path / "zwei.ckpt", tokenizer, output_bias=True)
    checkpoint = torch.load(path, weights_only=True)
    bias = checkpoint["state_dict"]["model.generator.bias"]
    for i in tokenizer.encode_batch(["zwei"], side="target")[0]:  # "zwei" as a first word
        bias[i] = 12.0
    bias[TARGET_FRAME["eos_id"]] = 11.0
    torch.save(checkpoint, path)
    translator = Translator.from_checkpoint(path, device="cpu")
    got = translator.translate(["one two", "drei"], max_len_b=4, constraints=[["zwei"]] * 2)
    assert got == ["zwei", "zwei"]  # not " zwei", nor "w zwei" around the inside form


def test_every_constraint_appears_and_an_unmeetable_one_is_reported_by_line(folder, caplog):
    translator = Translator.from_checkpoint(folder / "step1.ckpt", device="cpu")
    constraints = [["sechs sieben", "zwei"], [], ["four five six seven one two"], [], [], [], []]
    got = translator.translate(MIXED, max_len_b=6, batch_size=2, constraints=constraints)
    assert " sechs sieben" in got[0] and " zwei" in got[0]
    assert "line 3: constraint 1 not met within the length limit" in caplog.text
    assert "line 1:" not in caplog.text
    with pytest.raises(ValueError, match="constraints steer beam search"):
        translator.translate(MIXED, sampling=Sampling(), constraints=constraints)
    with pytest.raises(ValueError, match="line 4: no constraint list, the constraint lists ended"):
        translator.translate(MIXED, batch_size=1, constraints=constraints[:3])


def test_prefixes_and_constraints_of_empty_lines_are_warned_of_by_line(folder, caplog):
    translator = Translator.from_checkpoint(folder / "step1.ckpt", device="cpu")
    sentences = ["one two", "", " ", "zwei"]
    got = translator.translate(sentences, max_len_b=3, prefixes=["one", "drei", "", "vier"])
    assert got[1:3] == ["", ""]
    assert "line 2: empty, so its prefix is not used (an empty line translates" in caplog.text
    caplog.clear()
    constraints = [["two"], [], ["sechs", "sieben"], []]
    translator.translate(sentences, max_len_b=3, constraints=constraints, batch_size=1)
    assert "line 3: empty, so its constraints are not used" in caplog.text
    assert "line 2:" not in caplog.text


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("candidates", ["sample", "beam", "both"])
def test_mbr_picks_by_mean_utility_over_the_seeded_samples_in_any_batches(folder, candidates):
    translator = Translator.from_checkpoint(folder / "step1.ckpt", device="cpu")
    drawn = Sampling(n=4, seed=7, epsilon=0.01)
    mbr = MBR(drawn, candidates=candidates, utility="chrf++")
    options = dict(max_len_b=4, beam_size=3, prefixes=["one", "", "", "", "zwei"])
    got = translator.translate(INPUTS, n_best=2, batch_size=2, mbr=mbr, **options)
    samples = translator.translate(INPUTS, sampling=drawn, **options)
    beams = translator.translate(INPUTS, n_best=3, **options)
    for sentence, out, sampled, found in zip(INPUTS, got, samples, beams, strict=True):
        if not sentence:
            assert out == [("", 0.0)] * 2
            continue
        pool = mbr.pool(texts(sampled), texts(found))
        chosen = [text for text, _ in select(pool, texts(sampled), "chrf++", n_best=2)]
        assert texts(out) == chosen
        scores = dict(found) | dict(sampled)  # each text's log-probability where it was found
        expected = [scores[text] for text in chosen]  # decoded in other batches: float noise
        assert [score for _, score in out] == pytest.approx(expected, abs=1e-4)
        assert out[0][0].startswith("one") or sentence != "one two three"
    alone = translator.translate(INPUTS, n_best=2, batch_size=1, mbr=mbr, **options)
    # Reproducible: the seed and the line, not the batches, fix the samples (scores: float noise).
    assert [texts(a) for a in alone] == [texts(g) for g in got]
    for a, g in zip(alone, got, strict=True):
        assert [score for _, score in a] == pytest.approx([score for _, score in g], abs=1e-4)
    other = MBR(Sampling(n=4, seed=8, epsilon=0.01), candidates, "chrf++")
    assert translator.translate(INPUTS, n_best=2, mbr=other, **options) != got


@pytest.mark.usefixtures("one_thread")
def test_mbr_decodes_with_an_ensemble_and_refuses_what_it_cannot_do(folder):
    members = [folder / "step1.ckpt", folder / "step2.ckpt"]
    ensemble = Translator.from_ensemble(members, device="cpu")
    mbr = MBR(Sampling(n=3, seed=1), candidates="both")
    got = ensemble.translate(INPUTS, max_len_b=3, mbr=mbr)
    samples = ensemble.translate(INPUTS, max_len_b=3, sampling=mbr.sampling)
    assert len(got) == len(INPUTS) and got[1] == ""
    assert all(out in texts(s) or out for out, s in zip(got, samples, strict=True))
    with pytest.raises(ValueError, match="n_best 4 exceeds MBR's 3 samples"):
        ensemble.translate(INPUTS, n_best=4, mbr=mbr)
    with pytest.raises(ValueError, match="MBR samples as its `mbr.sampling` says"):
        ensemble.translate(INPUTS, sampling=Sampling(n=2), mbr=mbr)


def test_workers_decode_batches_side_by_side_on_one_thread_each_as_one_thread_would(
    folder, monkeypatch
):
    single = Translator.from_checkpoint(folder / "step1.ckpt", device="cpu")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        beam = single.translate(MIXED, batch_size=2, n_best=2, max_len_b=5)
        first_four = single.translate(MIXED[:4], batch_size=2, n_best=2, max_len_b=5)
        sampled = single.translate(MIXED, batch_size=2, max_len_b=5, sampling=Sampling(n=2))
    finally:
        torch.set_num_threads(threads)
    workers = Translator.from_checkpoint(folder / "step1.ckpt", device="cpu", workers=2)
    seen, meet = [], threading.Barrier(2, timeout=30)  # one batch alone in a worker would wait
    decode = translator_module.beam_search

    def side_by_side(*args, **kwargs):
        meet.wait()
        seen.append((threading.current_thread().name, torch.get_num_threads()))
        return decode(*args, **kwargs)

    monkeypatch.setattr(translator_module, "beam_search", side_by_side)
    assert workers.translate(MIXED[:4], batch_size=2, n_best=2, max_len_b=5) == first_four
    assert sorted(n for _, n in seen) == [1, 1] and all("nmt-search" in t for t, _ in seen)
    assert torch.get_num_threads() == threads  # given back
    monkeypatch.setattr(translator_module, "beam_search", decode)
    assert workers.translate(MIXED, batch_size=2, n_best=2, max_len_b=5) == beam
    got = workers.translate(MIXED, batch_size=2, max_len_b=5, sampling=Sampling(n=2))
    assert got == sampled


def test_workers_are_refused_where_they_cannot_run(folder):
    path = folder / "step1.ckpt"
    with pytest.raises(ValueError, match="workers must be >= 1"):
        Translator.from_checkpoint(path, device="cpu", workers=0)
    with pytest.raises(ValueError, match="one per thread already"):
        Translator.from_checkpoint(path, device="cpu", engine="ct2", workers=2)
    with pytest.raises(ValueError, match="a GPU one batch at a time"):
        Translator.from_checkpoint(path, device="cuda", workers=2)


def test_on_a_cpu_the_linear_weights_are_laid_out_transposed_and_translate_the_same(folder):
    path = folder / "step1.ckpt"
    translator = Translator.from_checkpoint(path, device="cpu")
    linears = [m for m in translator.model.modules() if isinstance(m, torch.nn.Linear)]
    assert linears and all(m.weight.t().is_contiguous() for m in linears)
    model, tokenizer = load_checkpoint(path)
    options = dict(beam_size=2, alpha=0.6, max_len_b=5)
    nonempty = [s for s in INPUTS if s]
    expected = [hyps[0][0] for hyps in reference(model, tokenizer, nonempty, **options)]
    assert translator.translate(nonempty, batch_size=2, **options) == expected
