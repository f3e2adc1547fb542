import random

import pytest
import sacrebleu
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from helpers.metric_ranks import scores_of_ranks
from transformer_nmt.training.step.bleu import SacreBLEU, SacreCHRF, SacreTER
from transformer_nmt.training.step.val_metrics import SCORES

REFS = [
    "A man in an orange hat starring at something.",
    "A Boston Terrier is running on lush green grass in front of a white fence.",
    "A girl in karate uniform breaking a stick with a front kick.",
    "Five people wearing winter jackets and helmets stand in the snow, with snowmobiles nearby.",
    "People are fixing the roof of a house.",
    "A man in light colored clothing photographs a group of men.",
]


def corrupt(sentence: str, rng: random.Random) -> str:
    words = sentence.split()
    return " ".join(w for w in words if rng.random() > 0.3) or words[0]


@pytest.mark.parametrize("batch_size", [1, 2, 4])
def test_batched_score_equals_sacrebleu_on_the_whole_corpus(batch_size, device):
    rng = random.Random(batch_size)
    refs = REFS * 5
    hyps = [corrupt(r, rng) for r in refs]
    metric = SacreBLEU().to(device)  # as Lightning moves it
    for i in range(0, len(refs), batch_size):
        metric.update(hyps[i : i + batch_size], refs[i : i + batch_size])
    expected = sacrebleu.corpus_bleu(hyps, [refs]).score
    score = metric.compute()
    assert score.device == metric.correct.device == device
    assert score.item() == pytest.approx(expected, abs=1e-9)
    assert 0 < expected < 100


def test_update_keeps_the_statistics_on_a_cuda_device():
    """CUDA without a GPU: fake tensors carry a device and refuse mixing as CUDA does, where a
    1-D CPU tensor added in place to a CUDA state fails every GPU run's first validation."""
    metric = SacreBLEU()
    with FakeTensorMode():
        for name in ("correct", "total", "lengths"):
            state = getattr(metric, name)
            setattr(metric, name, torch.zeros(state.shape, dtype=state.dtype, device="cuda"))
        metric.update(REFS[:2], REFS[:2])
        assert {metric.correct.device.type, metric.total.device.type} == {"cuda"}
        assert metric.lengths.device.type == "cuda"


def test_smoothing_is_sacrebleus_default():
    # No 4-gram matches: unsmoothed BLEU would be 0, sacreBLEU's exp smoothing is not.
    hyps, refs = ["a man in the red hat"], ["a man in a hat"]
    metric = SacreBLEU()
    metric.update(hyps, refs)
    assert metric.compute().item() == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score)
    assert metric.compute().item() > 0
    assert "tok:13a" in metric.signature() and "smooth:exp" in metric.signature()


def test_perfect_translation_scores_100():
    metric = SacreBLEU()
    metric.update(REFS, REFS)
    assert metric.compute().item() == pytest.approx(100.0)


@pytest.mark.parametrize("batch_size", [1, 4])
def test_batched_chrf_equals_sacrebleu_on_the_whole_corpus(batch_size, device):
    rng = random.Random(batch_size)
    refs = REFS * 3
    hyps = [corrupt(r, rng) for r in refs]
    metric = SacreCHRF().to(device)
    for i in range(0, len(refs), batch_size):
        metric.update(hyps[i : i + batch_size], refs[i : i + batch_size])
    expected = sacrebleu.corpus_chrf(hyps, [refs]).score
    score = metric.compute()
    assert score.device == device
    assert score.item() == pytest.approx(expected, abs=1e-9)
    assert 0 < expected < 100


CORPUS_SCORES = {
    "bleu": lambda hyps, refs: sacrebleu.corpus_bleu(hyps, [refs]).score,
    "chrf": lambda hyps, refs: sacrebleu.corpus_chrf(hyps, [refs]).score,
    "chrf++": lambda hyps, refs: sacrebleu.corpus_chrf(hyps, [refs], word_order=2).score,
    "ter": lambda hyps, refs: sacrebleu.corpus_ter(hyps, [refs]).score,
}


def corrupted_corpus(seed: int) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    refs = REFS * 3
    hyps = [corrupt(r, rng) for r in refs]
    hyps[1] = hyps[1].lower() + " , extra words here"  # TER counts case and insertions
    hyps[2] = " ".join(reversed(hyps[2].split()))  # and shifts
    return hyps, refs


@pytest.mark.parametrize("name", ["chrf++", "ter"])
@pytest.mark.parametrize("batch_size", [1, 4])
def test_batched_chrf_plus_plus_and_ter_equal_sacrebleu_on_the_whole_corpus(
    name, batch_size, device
):
    hyps, refs = corrupted_corpus(batch_size)
    metric = SCORES[name]().to(device)
    for i in range(0, len(refs), batch_size):
        metric.update(hyps[i : i + batch_size], refs[i : i + batch_size])
    expected = CORPUS_SCORES[name](hyps, refs)
    score = metric.compute()
    assert score.device == device
    assert score.item() == pytest.approx(expected, abs=1e-9)
    assert 0 < expected < 100
    # Not one sentence's score averaged: the corpus statistics are summed.
    means = sum(CORPUS_SCORES[name]([h], [r]) for h, r in zip(hyps, refs, strict=True)) / len(refs)
    assert means != pytest.approx(expected, abs=1e-3)


def test_chrf_plus_plus_adds_word_bigrams_to_chrf():
    metric = SacreCHRF(word_order=2)
    assert metric.stats.numel() == 3 * (6 + 2)
    metric.update(["a man in a hat"], ["a man in the red hat"])
    assert metric.compute().item() != pytest.approx(
        sacrebleu.corpus_chrf(["a man in a hat"], [["a man in the red hat"]]).score
    )


def test_ter_is_zero_for_a_perfect_translation_and_counts_edits_per_reference_word():
    metric = SacreTER()
    metric.update(REFS, REFS)
    assert metric.compute().item() == 0
    metric.update(["a b c"], ["a b c d"])  # one deletion over 4 more reference words
    words = sum(len(r.split()) for r in REFS) + 4
    assert metric.compute().item() == pytest.approx(100 / words)


def test_two_gloo_ranks_compute_every_score_as_one_process_on_all_sentences(tmp_path):
    hyps, refs = corrupted_corpus(7)
    ranks = scores_of_ranks(tmp_path, 2, hyps, refs)
    for name, corpus_score in CORPUS_SCORES.items():
        expected = corpus_score(hyps, refs)
        assert ranks[0][name] == ranks[1][name] == pytest.approx(expected, abs=1e-9), name
    # Each rank alone scores differently: the sync is what makes them equal.
    alone = CORPUS_SCORES["ter"](hyps[::2], refs[::2])
    assert alone != pytest.approx(ranks[0]["ter"], abs=1e-3)
