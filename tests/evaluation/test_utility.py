"""Batched sentence chrF, chrF++ and BLEU equal sacreBLEU's, pair by pair."""

import random

import pytest
import sacrebleu

from transformer_nmt.evaluation.utility import utility_matrix

WORDS = "a man is standing on the street . , A dog runs ! (hi) über Straße the- -x 1,5".split()
SACREBLEU = {
    "chrf": lambda h, r: sacrebleu.sentence_chrf(h, [r]).score,
    "chrf++": lambda h, r: sacrebleu.sentence_chrf(h, [r], word_order=2).score,
    "bleu": lambda h, r: sacrebleu.sentence_bleu(h, [r]).score,  # exp smoothing, effective order
}


def sentences(seed: int, count: int) -> list[str]:
    """Random sentences of 0 to 12 words, some empty, some ending in a tokenized period."""
    rng = random.Random(seed)
    return [
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 12)))
        + rng.choice(["", ".", " .", "!", "  "])
        for _ in range(count)
    ]


@pytest.mark.parametrize("utility", list(SACREBLEU))
@pytest.mark.parametrize("seed", range(3))
def test_every_pairs_score_is_sacrebleus_sentence_score(utility, seed):
    hypotheses, references = sentences(seed, 25), sentences(seed + 100, 20)
    scores = utility_matrix(hypotheses, references, utility)
    assert scores.shape == (25, 20)
    for i, hypothesis in enumerate(hypotheses):
        for j, reference in enumerate(references):
            expected = SACREBLEU[utility](hypothesis, reference)
            assert scores[i, j] == pytest.approx(expected, abs=1e-9), (hypothesis, reference)


def test_an_unknown_utility_is_refused_naming_the_choices():
    with pytest.raises(ValueError, match=r"utility must be one of \('chrf', 'chrf\+\+', 'bleu'\)"):
        utility_matrix(["a"], ["a"], "meteor")
