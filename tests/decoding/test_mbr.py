"""MBR keeps the candidate most like the samples, by each utility, as sacreBLEU scores it."""

import re

import pytest
import sacrebleu

from transformer_nmt.decoding.mbr import MBR, select
from transformer_nmt.decoding.sampling import Sampling

SAMPLES = ["a dog runs on the grass .", "a dog is running .", "the cat sleeps .", "a dog runs ."]


@pytest.mark.parametrize(
    ("utility", "score"),
    [
        ("chrf", lambda h, r: sacrebleu.sentence_chrf(h, [r]).score),
        ("chrf++", lambda h, r: sacrebleu.sentence_chrf(h, [r], word_order=2).score),
        ("bleu", lambda h, r: sacrebleu.sentence_bleu(h, [r]).score),
    ],
)
def test_candidates_are_ranked_by_their_mean_utility_against_the_references(utility, score):
    candidates = [*SAMPLES, "dogs run"]
    expected = sorted(
        ((c, sum(score(c, r) for r in SAMPLES) / len(SAMPLES)) for c in candidates),
        key=lambda pair: -pair[1],
    )
    got = select(candidates, SAMPLES, utility, n_best=3)
    assert [text for text, _ in got] == [text for text, _ in expected[:3]]
    assert [mean for _, mean in got] == pytest.approx([mean for _, mean in expected[:3]])
    assert got[0][0] != "the cat sleeps ."  # the outlier is never the consensus


def test_each_candidate_text_is_pooled_once_samples_first():
    mbr = MBR(Sampling(n=3), candidates="both")
    assert mbr.pool(["b", "a", "b"], ["a", "c"]) == ["b", "a", "c"]
    assert MBR(Sampling(n=3), candidates="beam").pool(["b"], ["a", "c"]) == ["a", "c"]
    assert MBR(Sampling(n=3)).pool(["b", "b"], ["a"]) == ["b"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (dict(sampling=Sampling(n=1)), "MBR needs at least 2 samples a sentence"),
        (dict(candidates="greedy"), "MBR candidates must be one of ('sample', 'beam', 'both')"),
        (dict(utility="meteor"), "MBR utility must be one of ('chrf', 'chrf++', 'bleu')"),
    ],
)
def test_what_mbr_cannot_do_is_refused_naming_it(options, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        MBR(**options)
