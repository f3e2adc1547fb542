"""Constrained beam search: every constraint appears, or the line reports what it misses."""

import pytest
import torch

from transformer_nmt.decoding import beam_search
from transformer_nmt.decoding.constraints import Phrases, Progress, constrained_beam_search
from transformer_nmt.model import RNNAttention

VOCAB, PAD, BOS, EOS = 50, 0, 1, 2  # as in conftest's tiny models


def contains(tokens: list[int], phrase: list[int]) -> bool:
    return any(tokens[i : i + len(phrase)] == phrase for i in range(len(tokens)))


def test_progress_counts_met_ids_and_loses_an_abandoned_phrase():
    phrases = Phrases.of([[7, 8, 9], [20]])
    start = Progress((False, False))
    assert start.wanted(phrases, True) == {7, 20}
    halfway = start.after(7, phrases, True).after(8, phrases, False)
    assert halfway.met_ids(phrases) == 2 and halfway.wanted(phrases, False) == {9}
    assert halfway.after(5, phrases, False).met_ids(phrases) == 0  # abandoned
    restarted = halfway.after(7, phrases, False)  # abandons, and starts the phrase again
    assert restarted.met_ids(phrases) == 1
    done = halfway.after(9, phrases, False).after(20, phrases, False)
    assert done.all_met() and done.met_ids(phrases) == 4 and done.wanted(phrases, False) == set()


def test_a_phrase_is_met_in_its_first_word_form_at_the_start_and_its_inside_form_later():
    phrases = Phrases([[4, 7, 8]], first=[[7, 9]])
    start = Progress((False,))
    assert start.wanted(phrases, True) == {7} and start.wanted(phrases, False) == {4}
    assert start.after(7, phrases, True).after(9, phrases, False).all_met()
    assert not start.after(7, phrases, False).after(9, phrases, False).all_met()
    later = start.after(4, phrases, False).after(7, phrases, False).after(8, phrases, False)
    assert later.all_met() and later.met_ids(phrases) == 3  # the longer form's size


@pytest.mark.parametrize("family", ["transformer", "rnn_attention"])
def test_every_constraint_appears_in_every_hypothesis(family, make_model, make_tokens, device):
    if family == "transformer":
        model = make_model().to(device)
    else:
        torch.manual_seed(0)
        model = RNNAttention(VOCAB, PAD, embed_dim=16, hidden_size=16, dropout=0.0).to(device)
    src = make_tokens([6, 2, 4, 5], device=device)
    constraints = [[[7, 8, 9], [20]], [], [[11, 12], [11]], [[30, 31, 32, 33]]]
    found, missed = constrained_beam_search(
        model.eval(), src, BOS, EOS, constraints, beam_size=4, max_len_b=10, n_best=3
    )
    assert missed == [[], [], [], []]
    for hypotheses, phrases in zip(found, constraints, strict=True):
        assert 1 <= len(hypotheses) <= 3  # only those meeting every constraint
        normalized = [h.normalized for h in hypotheses]
        assert normalized == sorted(normalized, reverse=True)
        for h in hypotheses:
            assert all(contains(h.tokens, phrase) for phrase in phrases), (h.tokens, phrases)


def test_a_constraint_longer_than_the_output_may_be_is_reported_not_dropped(
    make_model, make_tokens
):
    model, src = make_model(), make_tokens([3, 4])
    constraints = [[[5] * 10, [6]], [[6]]]
    found, missed = constrained_beam_search(model, src, BOS, EOS, constraints, max_len_b=2)
    assert missed == [[0], []]  # line 1 cannot hold ten 5s in 5 ids; its 6 is met
    assert contains(found[0][0].tokens, [6]) and contains(found[1][0].tokens, [6])


def test_more_best_hypotheses_than_the_beam_holds_are_refused(make_model, make_tokens):
    with pytest.raises(ValueError, match=r"n_best must be between 1 and beam_size \(2\), got 3"):
        constrained_beam_search(make_model(), make_tokens([3]), BOS, EOS, [[]], 2, n_best=3)


@pytest.mark.parametrize("beam_size", [1, 4])
@pytest.mark.parametrize("seed", range(6))
def test_a_batch_without_constraints_is_searched_exactly_as_beam_search(
    beam_size, seed, make_model, make_tokens
):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 8, (5,), generator=g).tolist()
    model, src = make_model(seed=seed), make_tokens(lengths, seed=seed)
    options = dict(beam_size=beam_size, max_len_b=int(torch.randint(1, 12, (1,), generator=g)))
    options |= dict(n_best=beam_size, alpha=[0.0, 0.6, 1.0][seed % 3])
    found, missed = constrained_beam_search(model, src, BOS, EOS, [[]] * len(lengths), **options)
    assert missed == [[]] * len(lengths)
    expected = beam_search(model, src, BOS, EOS, **options)
    assert [[h.tokens for h in hs] for hs in found] == [[h.tokens for h in hs] for hs in expected]
    # Beam search drops finished sentences from the batch, which moves the last float bits.
    for got, want in zip(sum(found, []), sum(expected, []), strict=True):
        assert got.score == pytest.approx(want.score, rel=1e-6)
        assert got.normalized == pytest.approx(want.normalized, rel=1e-6)
