import random

import pytest
import sacrebleu
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from transformer_nmt.training.step.bleu import SacreBLEU, SacreCHRF

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
