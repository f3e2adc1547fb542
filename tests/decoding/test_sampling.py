"""Sampling draws from the reshaped distribution, reproducibly per sentence; prefixes are forced."""

import re

import pytest
import torch
from pytest import approx

from helpers.decoded_rows import decoded_rows
from transformer_nmt.decoding import beam_search, greedy_search
from transformer_nmt.decoding.sampling import Sampling, draw, sample
from transformer_nmt.model import RNNAttention

VOCAB, PAD, BOS, EOS = 50, 0, 1, 2  # as in conftest's tiny models
NEVER = -1  # an EOS id the model cannot emit


def rnn() -> RNNAttention:
    torch.manual_seed(0)
    return RNNAttention(VOCAB, PAD, embed_dim=16, hidden_size=16, dropout=0.0).eval()


def tokens(found) -> list[list[list[int]]]:
    return [[h.tokens for h in hypotheses] for hypotheses in found]


def grid_draws(probs: list[float], sampling: Sampling, n: int = 1000) -> list[int]:
    """How often each id is drawn by n evenly spaced uniforms: n times the distribution, each
    count within one (a uniform on a boundary of the CDF falls either side of it)."""
    log_probs = torch.tensor(probs).log().expand(n, -1)
    picks = draw(log_probs, sampling, torch.arange(n) / n)
    return torch.bincount(picks, minlength=len(probs)).tolist()


def test_draws_follow_the_distribution_cut_by_top_k_and_top_p_and_sharpened_by_temperature():
    probs = [0.05, 0.5, 0.15, 0.3]
    cases = [
        (Sampling(), [50, 500, 150, 300]),
        (Sampling(top_k=2), [0, 625, 0, 375]),  # 0.5 and 0.3, renormalised
        (Sampling(top_p=0.75), [0, 625, 0, 375]),  # the fewest ids whose mass reaches 0.75
        (Sampling(top_p=0.81), [0, 526, 158, 316]),  # 0.15 too
        (Sampling(top_p=0.01), [0, 1000, 0, 0]),  # the most likely always stays
        # Temperature 0.5 squares the probabilities: 0.0025, 0.25, 0.0225, 0.09 of 0.365.
        (Sampling(temperature=0.5), [7, 685, 62, 247]),
        (Sampling(epsilon=0.1), [0, 526, 158, 316]),  # 0.05 < epsilon dropped
        (Sampling(epsilon=0.6), [0, 1000, 0, 0]),  # the most likely always stays
        # epsilon cuts after temperature: 0.0225 / 0.365 = 0.062 stays, 0.007 goes.
        (Sampling(temperature=0.5, epsilon=0.05), [0, 690, 62, 248]),
    ]
    for sampling, counts in cases:
        assert grid_draws(probs, sampling) == approx(counts, abs=1), sampling


@pytest.mark.parametrize("family", ["transformer", "rnn_attention"])
def test_top_k_one_is_greedy_search(family, make_model, make_tokens, device):
    model = (make_model() if family == "transformer" else rnn()).to(device)
    src = make_tokens([6, 2, 4], device=device)
    greedy = greedy_search(model, src, BOS, EOS, max_len_b=5).tolist()
    sampling = Sampling(n=3, top_k=1, temperature=2.0, seed=7)
    found = sample(model, src, BOS, EOS, sampling, indices=[0, 1, 2], max_len_b=5)
    for row, samples in zip(greedy, tokens(found), strict=True):
        assert samples == [row[: len(samples[0])]] * 3
        assert all(pad == PAD for pad in row[len(samples[0]) :])


@pytest.mark.parametrize("family", ["transformer", "rnn_attention"])
def test_the_first_step_decodes_one_row_a_sentence(family, make_model, make_tokens):
    model, src = (make_model() if family == "transformer" else rnn()), make_tokens([6, 2, 4])
    sampling = Sampling(n=4, temperature=1.5, seed=3)
    with decoded_rows(model) as rows:
        cached = sample(model, src, BOS, NEVER, sampling, indices=[0, 1, 2], max_len_b=3)
    assert rows == [3] + [12] * 8  # one row a sentence, then its n, to the longest (6 + 3)
    # The cache spread to n rows continues as the whole prefixes do.
    uncached = sample(model, src, BOS, NEVER, sampling, [0, 1, 2], max_len_b=3, use_cache=False)
    assert tokens(cached) == tokens(uncached)


def test_the_same_seed_gives_the_same_samples_in_any_batch(make_model, make_tokens):
    model, src = make_model(), make_tokens([6, 2, 4, 5])
    sampling = Sampling(n=4, temperature=1.5, seed=11)
    batched = tokens(sample(model, src, BOS, EOS, sampling, indices=[10, 11, 12, 13]))
    for b in range(4):
        alone = sample(
            model, src[b : b + 1, : int((src[b] != PAD).sum())], BOS, EOS, sampling, [10 + b]
        )
        assert tokens(alone) == [batched[b]]
    other_seed = Sampling(n=4, temperature=1.5, seed=12)
    assert tokens(sample(model, src, BOS, EOS, other_seed, [10, 11, 12, 13])) != batched
    assert len({tuple(s) for s in batched[0]}) > 1  # the samples of a sentence differ


def test_a_samples_score_is_its_log_probability_under_the_model(make_model, make_tokens):
    model, src = make_model(), make_tokens([6, 3])
    found = sample(model, src, BOS, EOS, Sampling(n=2, temperature=3.0, top_k=5), [0, 1])
    for b, samples in enumerate(found):
        for h in samples:
            tgt = torch.tensor([[BOS, *h.tokens]])
            logits = model(src[b : b + 1], tgt[:, :-1])[0]
            # The full softmax: PAD and BOS are never drawn, yet their mass counts.
            expected = logits.log_softmax(-1).gather(1, tgt[0, 1:, None]).sum().item()
            assert h.score == pytest.approx(expected, abs=1e-4)
            assert h.normalized == h.score  # alpha 0


def test_every_search_keeps_a_prefix_verbatim(make_model, make_tokens, device):
    model, src = make_model().to(device), make_tokens([6, 2, 4], device=device)
    prefixes = [[7, 8, 9], [], [40]]
    greedy = greedy_search(model, src, BOS, EOS, max_len_b=6, target_prefixes=prefixes).tolist()
    beams = beam_search(model, src, BOS, EOS, 3, n_best=3, max_len_b=6, target_prefixes=prefixes)
    sampled = sample(model, src, BOS, EOS, Sampling(n=2), [0, 1, 2], 6, target_prefixes=prefixes)
    for prefix, row, hypotheses, samples in zip(prefixes, greedy, beams, sampled, strict=True):
        assert row[: len(prefix)] == prefix
        assert all(h.tokens[: len(prefix)] == prefix for h in hypotheses + samples)
    # The model's own greedy start, forced, leaves greedy search's output as it was.
    free = greedy_search(model, src, BOS, EOS, max_len_b=6)
    own = [row[:2] for row in free.tolist()]
    assert torch.equal(greedy_search(model, src, BOS, EOS, max_len_b=6, target_prefixes=own), free)


@pytest.mark.parametrize(
    ("option", "value", "rule"),
    [
        ("n", 0, ">= 1"),
        ("temperature", 0.0, "> 0"),
        ("temperature", float("inf"), "> 0"),
        ("top_k", 0, ">= 1"),
        ("top_p", 0.0, "in (0, 1]"),
        ("top_p", 1.5, "in (0, 1]"),
        ("seed", -1, ">= 0"),
        ("epsilon", 1.0, "in [0, 1)"),
        ("epsilon", -0.1, "in [0, 1)"),
    ],
)
def test_sampling_options_out_of_range_are_refused_naming_them(option, value, rule):
    with pytest.raises(ValueError, match=re.escape(f"sampling {option} must be {rule}")):
        Sampling(**{option: value})
