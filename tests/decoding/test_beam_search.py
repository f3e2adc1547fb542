import itertools

import pytest
import torch

from helpers.decoded_rows import decoded_rows
from transformer_nmt.decoding import beam_search, greedy_search, length_penalty, search
from transformer_nmt.decoding.beam_trace import BeamTrace
from transformer_nmt.model import Transformer

BOS, EOS = 1, 2  # as in conftest's tiny models
NEVER = -1  # an EOS id the model cannot emit


def test_length_penalty_is_the_papers_and_fairseqs():
    assert length_penalty(7, 0.6) == pytest.approx(((5 + 7) / 6) ** 0.6)
    assert length_penalty(7, 0.6, "fairseq") == pytest.approx(7**0.6)
    assert length_penalty(7, 0.0) == length_penalty(7, 0.0, "fairseq") == 1.0
    with pytest.raises(ValueError, match="gnmt"):
        length_penalty(7, 0.6, "wu")


@pytest.mark.parametrize(
    "overrides", [{}, {"norm_first": True, "positions": "learned"}, {"N_enc": 3, "N_dec": 1}]
)
def test_beam_size_one_is_greedy(make_model, make_tokens, overrides, device):
    model = make_model(**overrides).to(device)
    src = make_tokens([7, 3, 5, 6], device=device)
    unstopped = greedy_search(model, src, BOS, NEVER, max_len_b=4)
    for eos_id in (unstopped[0, 0].item(), unstopped[2, 2].item(), NEVER):
        greedy = greedy_search(model, src, BOS, eos_id, max_len_b=4)
        beams = beam_search(model, src, BOS, eos_id, beam_size=1, max_len_b=4)
        for row, (best,) in zip(greedy.tolist(), beams, strict=True):
            assert best.tokens == row[: len(best.tokens)], eos_id
            assert all(pad == model.config.pad_id for pad in row[len(best.tokens) :])


@pytest.mark.parametrize("prefixes", [None, [[5], [], [4, 6, 7, 3]]])
def test_one_beam_gives_what_the_whole_beam_bookkeeping_gives(make_model, make_tokens, prefixes):
    # A trace takes beam search's general path, which keeps every beam's candidates.
    model, src = make_model(), make_tokens([7, 3, 5])
    unstopped = greedy_search(model, src, BOS, NEVER, max_len_b=4)
    for eos_id in (unstopped[0, 1].item(), unstopped[1, 3].item(), NEVER):
        options = dict(beam_size=1, max_len_b=4, alpha=1.0, target_prefixes=prefixes)
        fast = beam_search(model, src, BOS, eos_id, **options)
        general = beam_search(model, src, BOS, eos_id, trace=BeamTrace(), **options)
        for (ours,), (theirs,) in zip(fast, general, strict=True):
            assert ours.tokens == theirs.tokens, eos_id
            assert ours.score == pytest.approx(theirs.score, abs=1e-6)
            assert ours.normalized == pytest.approx(theirs.normalized, abs=1e-6)
        assert len({len(h.tokens) for (h,) in fast}) > 1  # rows left the batch at different steps


def test_cached_equals_uncached(make_model, make_tokens, device):
    model, src = make_model().to(device), make_tokens([6, 2, 4], device=device)
    eos_id = greedy_search(model, src, BOS, NEVER, max_len_b=3)[1, 1].item()
    kwargs = dict(beam_size=3, n_best=3, max_len_b=3)
    cached = beam_search(model, src, BOS, eos_id, **kwargs)
    uncached = beam_search(model, src, BOS, eos_id, use_cache=False, **kwargs)
    for ours, theirs in zip(itertools.chain(*cached), itertools.chain(*uncached), strict=True):
        assert ours.tokens == theirs.tokens
        assert ours.score == pytest.approx(theirs.score, abs=1e-5)
        assert ours.normalized == pytest.approx(theirs.normalized, abs=1e-5)


def test_greedy_copies_the_cache_only_when_a_sentence_leaves(make_model, make_tokens):
    model, src = make_model(), make_tokens([7, 3, 5, 5])
    reorder, rows_kept = model.reorder_cache, []

    def counted(cache, order, sources=None):
        rows_kept.append(len(order))
        return reorder(cache, order, sources)

    model.reorder_cache = counted
    # No EOS: rows leave at their source length + 2; the 3's, then both 5's, then the 7's.
    beam_search(model, src, BOS, NEVER, beam_size=1, max_len_b=2)
    assert rows_kept == [3, 1]
    rows_kept.clear()
    beam_search(model, src, BOS, NEVER, beam_size=2, max_len_b=2)  # beams move every step
    assert len(rows_kept) == 7 + 2 - 1


def test_the_first_step_decodes_one_row_a_sentence(make_model, make_tokens):
    model, src = make_model(), make_tokens([7, 3, 5])
    kwargs = dict(beam_size=3, n_best=3, max_len_b=2)
    with decoded_rows(model) as rows:
        cached = beam_search(model, src, BOS, NEVER, **kwargs)  # the 3 leaves first, at step 5
    assert rows[:6] == [3, 9, 9, 9, 9, 6]
    # The same hypotheses as every beam decoding every step, from the uncached prefixes.
    uncached = beam_search(model, src, BOS, NEVER, use_cache=False, **kwargs)
    for ours, theirs in zip(itertools.chain(*cached), itertools.chain(*uncached), strict=True):
        assert ours.tokens == theirs.tokens
        assert ours.score == pytest.approx(theirs.score, abs=1e-5)


def test_batched_equals_one_sentence_at_a_time_in_input_order(make_model, make_tokens, device):
    model, src = make_model().to(device), make_tokens([3, 7, 5], device=device)
    batched = beam_search(model, src, BOS, EOS, n_best=2, max_len_b=3)
    for sentence, expected in zip(src, batched, strict=True):
        alone = beam_search(model, sentence[sentence != 0][None], BOS, EOS, n_best=2, max_len_b=3)
        assert [h.tokens for h in alone[0]] == [h.tokens for h in expected]


def exhaustive_ranking(
    model: Transformer, sentence: torch.Tensor, max_len: int, alpha: float, penalty: str
) -> list[tuple[float, list[int]]]:
    """Every output the length rules allow, scored with the uncached model, best first.

    Outputs are word sequences ending in EOS of at most max_len ids, or max_len ids without EOS.
    """
    words = [i for i in range(model.config.vocab_size) if i not in (0, BOS, EOS)]
    outputs = [
        [*prefix, EOS] for n in range(max_len) for prefix in itertools.product(words, repeat=n)
    ] + [list(seq) for seq in itertools.product(words, repeat=max_len)]
    scored = []
    for ys in outputs:
        logits = model(sentence[None], torch.tensor([[BOS, *ys[:-1]]]))[0]  # (T, V)
        # The full softmax: PAD and BOS are never picked, yet their mass counts.
        log_prob = logits.log_softmax(-1).gather(1, torch.tensor(ys)[:, None]).sum().item()
        scored.append((log_prob / length_penalty(len(ys), alpha, penalty), ys))
    return sorted(scored, reverse=True)


@pytest.mark.parametrize(("alpha", "penalty"), [(0.6, "gnmt"), (1.0, "fairseq"), (0.0, "gnmt")])
def test_a_beam_wide_enough_ranks_like_exhaustive_search(make_model, alpha, penalty):
    # 3 words + EOS, at most 3 ids: 40 outputs, and a beam of 64 never has to drop one.
    model = make_model(vocab_size=6)
    src = torch.tensor([[3, 4], [5, 0]])
    beams = beam_search(
        model, src, BOS, EOS, beam_size=64, n_best=10, alpha=alpha, max_len_b=1, penalty=penalty
    )
    for sentence, hypotheses in zip(src, beams, strict=True):
        sentence = sentence[sentence != 0]
        with torch.no_grad():
            expected = exhaustive_ranking(model, sentence, len(sentence) + 1, alpha, penalty)[:10]
        assert [h.tokens for h in hypotheses] == [ys for _, ys in expected]
        assert [h.normalized for h in hypotheses] == pytest.approx(
            [s for s, _ in expected], abs=1e-5
        )


def test_early_stopping_leaves_no_beam_unfinished(make_model, make_tokens, device):
    model, src = make_model().to(device), make_tokens([6, 3, 5], device=device)
    max_len_b = 4
    eos_id = greedy_search(model, src, BOS, NEVER, max_len_b=max_len_b)[0, 1].item()
    beams = beam_search(model, src, BOS, eos_id, beam_size=4, n_best=4, max_len_b=max_len_b)
    stopped_early = False
    for length, hypotheses in zip([6, 3, 5], beams, strict=True):
        assert len(hypotheses) == 4
        for h in hypotheses:
            assert h.tokens[-1] == eos_id or len(h.tokens) == length + max_len_b
            assert eos_id not in h.tokens[:-1]
        stopped_early |= all(h.tokens[-1] == eos_id for h in hypotheses)
    assert stopped_early


def test_n_best_cannot_exceed_the_beam(make_model, make_tokens):
    with pytest.raises(ValueError, match="n_best"):
        beam_search(make_model(), make_tokens([3]), BOS, EOS, beam_size=2, n_best=3)


@pytest.mark.parametrize(("V", "k"), [(8000, 2), (8000, 8), (4097, 8), (3000, 12), (600, 8)])
def test_blocked_top_k_finds_topks_values_at_their_ids(V, k):
    x = torch.randn(37, V, generator=torch.Generator().manual_seed(V + k))
    x[:, 5] = float("-inf")  # a struck-out id, as search strikes PAD and BOS
    values, ids = search._row_topk(x, k)
    assert torch.equal(values, x.topk(k, dim=-1).values)
    assert torch.equal(x.gather(1, ids), values)


def test_a_wide_vocabularys_beams_equal_plain_topks(make_model, make_tokens, monkeypatch):
    """A vocabulary wide enough for the blocked search of each beam's best ids (V >> 2K)."""
    model, src = make_model(vocab_size=3000), make_tokens([7, 3, 5, 6])
    eos_id = greedy_search(model, src, BOS, NEVER, max_len_b=4)[1, 2].item()
    kwargs = dict(beam_size=3, n_best=3, max_len_b=4, alpha=1.0, penalty="fairseq")
    blocked = beam_search(model, src, BOS, eos_id, **kwargs)
    monkeypatch.setattr(search, "_row_topk", lambda x, k: x.topk(k, dim=-1))
    plain = beam_search(model, src, BOS, eos_id, **kwargs)
    reference = beam_search(model, src, BOS, eos_id, use_cache=False, **kwargs)
    runs = [list(itertools.chain.from_iterable(r)) for r in (blocked, plain, reference)]
    for ours, *theirs in zip(*runs, strict=True):
        assert all(ours.tokens == other.tokens for other in theirs)
        assert all(ours.score == pytest.approx(other.score, rel=1e-6) for other in theirs)
