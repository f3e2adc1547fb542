"""An ensemble decodes as one model: the members' log-probabilities averaged, each its own cache."""

import itertools

import pytest
import torch

from transformer_nmt.decoding import beam_search, greedy_search
from transformer_nmt.decoding.ensemble import Ensemble
from transformer_nmt.model import RNNAttention
from transformer_nmt.model.masks import padding_mask

VOCAB, PAD, BOS, EOS = 50, 0, 1, 2  # as in conftest's tiny models
OPTIONS = dict(beam_size=3, n_best=3, max_len_b=4)


def rnn(seed: int = 0) -> RNNAttention:
    torch.manual_seed(seed)
    return RNNAttention(VOCAB, PAD, embed_dim=16, hidden_size=16, dropout=0.0).eval()


def flat(found):
    return [tuple(h) for h in itertools.chain(*found)]


@pytest.mark.parametrize("family", ["transformer", "rnn_attention"])
def test_an_ensemble_of_one_is_the_model_bit_for_bit(family, make_model, make_tokens, device):
    model = (make_model() if family == "transformer" else rnn()).to(device)
    src = make_tokens([6, 2, 4], device=device)
    single = beam_search(model, src, BOS, EOS, **OPTIONS)
    assert flat(beam_search(Ensemble([model]), src, BOS, EOS, **OPTIONS)) == flat(single)
    greedy = greedy_search(model, src, BOS, EOS, max_len_b=4)
    assert torch.equal(greedy_search(Ensemble([model], [3.0]), src, BOS, EOS, max_len_b=4), greedy)


def test_two_identical_members_are_one_model_bit_for_bit(make_model, make_tokens, device):
    model, src = make_model().to(device), make_tokens([6, 2, 4], device=device)
    single = beam_search(model, src, BOS, EOS, **OPTIONS)
    assert flat(beam_search(Ensemble([model, model]), src, BOS, EOS, **OPTIONS)) == flat(single)


def test_the_next_token_distribution_is_the_weighted_mean_of_log_probabilities(
    make_model, make_tokens
):
    members, weights = [make_model(seed=1), make_model(seed=2), rnn(seed=3)], [1.0, 2.0, 5.0]
    src, tgt = make_tokens([5, 3]), make_tokens([4, 4], seed=1, bos=True)
    ensemble = Ensemble(members, weights)
    got = ensemble(src, tgt).log_softmax(-1)
    mean = sum(w / 8 * m(src, tgt).log_softmax(-1) for m, w in zip(members, weights, strict=True))
    torch.testing.assert_close(got, mean.log_softmax(-1))
    # The search's decoder path, member by member through the side-by-side memory, agrees.
    stepped = ensemble.decode(tgt, ensemble.encode(src), padding_mask(src, PAD))
    torch.testing.assert_close(stepped.log_softmax(-1), got)


def test_each_member_keeps_its_own_cache_across_families(make_model, make_tokens, device):
    ensemble = Ensemble([make_model(seed=1), rnn(seed=2), make_model(seed=3, N=1)]).to(device)
    src = make_tokens([6, 2, 4], device=device)
    cached = beam_search(ensemble, src, BOS, EOS, **OPTIONS)
    uncached = beam_search(ensemble, src, BOS, EOS, use_cache=False, **OPTIONS)
    for ours, theirs in zip(itertools.chain(*cached), itertools.chain(*uncached), strict=True):
        assert ours.tokens == theirs.tokens
        assert ours.score == pytest.approx(theirs.score, abs=1e-5)


def test_members_of_another_vocabulary_or_bad_weights_are_refused(make_model):
    with pytest.raises(ValueError, match="member 2 has a vocabulary of 60 with padding id 0"):
        Ensemble([make_model(), make_model(vocab_size=60)])
    with pytest.raises(ValueError, match="1 ensemble weights for 2 members"):
        Ensemble([make_model(), make_model()], [1.0])
    for weights in ([1.0, 0.0], [1.0, float("nan")]):
        with pytest.raises(ValueError, match="weights must be finite and > 0"):
            Ensemble([make_model(), make_model()], weights)
