import pytest
import torch
from torch import Tensor

from transformer_nmt.decoding import greedy_search
from transformer_nmt.model import Transformer

BOS = 1  # as in conftest's tiny models
NEVER = -1  # an EOS id the model cannot emit


def reference_greedy(
    model: Transformer, src: Tensor, bos_id: int, eos_id: int, max_len_b: int
) -> Tensor:
    """One sentence at a time, unpadded and uncached: recompute the whole prefix every step."""
    pad_id = model.config.pad_id
    never = [pad_id, bos_id]  # never targets, so search never picks them
    rows = []
    for sentence in src:
        sentence = sentence[sentence != pad_id][None]  # (1, S_i)
        ys = [bos_id]
        while len(ys) - 1 < sentence.size(1) + max_len_b:
            logits = model(sentence, torch.tensor([ys], device=sentence.device))[0, -1]
            logits[never] = float("-inf")
            next_token = logits.argmax().item()
            ys.append(next_token)
            if next_token == eos_id:
                break
        rows.append(ys[1:])
    width = max(map(len, rows))
    return torch.tensor([row + [pad_id] * (width - len(row)) for row in rows], device=src.device)


@pytest.mark.parametrize("use_cache", [True, False])
@pytest.mark.parametrize(
    "overrides", [{}, {"norm_first": True, "positions": "learned"}, {"N_enc": 3, "N_dec": 1}]
)
def test_greedy_equals_uncached_reference(make_model, make_tokens, overrides, use_cache, device):
    model = make_model(**overrides).to(device)
    src = make_tokens([7, 3, 5, 6], device=device)
    with torch.no_grad():
        unstopped = reference_greedy(model, src, BOS, NEVER, max_len_b=4)
    # EOS ids the model emits first or later in some row, and one it never emits.
    for eos_id in (unstopped[0, 0].item(), unstopped[2, 2].item(), NEVER):
        with torch.no_grad():
            expected = reference_greedy(model, src, BOS, eos_id, max_len_b=4)
        out = greedy_search(model, src, BOS, eos_id, max_len_b=4, use_cache=use_cache)
        assert torch.equal(out, expected), eos_id


def test_rows_are_cut_at_source_length_plus_max_len_b(make_model, make_tokens, device):
    model = make_model().to(device)
    src = make_tokens([7, 3], device=device)
    out = greedy_search(model, src, BOS, NEVER, max_len_b=4)
    assert out.shape == (2, 7 + 4)
    assert (out[1, 3 + 4 :] == model.config.pad_id).all()


def test_stops_as_soon_as_every_row_has_finished(make_model, make_tokens):
    model = make_model()
    src = make_tokens([6])
    first = greedy_search(model, src, BOS, NEVER, max_len_b=4)[0, 0].item()
    assert greedy_search(model, src, BOS, first, max_len_b=4).tolist() == [[first]]


def test_output_never_outgrows_the_position_table(make_model, make_tokens):
    model = make_model(max_positions=8)
    out = greedy_search(model, make_tokens([7, 3]), BOS, NEVER, max_len_b=50)
    assert out.shape == (2, 8)


def test_training_mode_is_left_alone(make_model, make_tokens):
    model = make_model().train()
    out = greedy_search(model, make_tokens([5]), BOS, NEVER, max_len_b=2)
    assert model.training and not out.requires_grad


def test_never_picks_padding_or_bos(make_model, make_tokens, device):
    model = make_model()
    # A generator that favours PAD and BOS above every word.
    model.generator = torch.nn.Linear(model.config.d_model, model.config.vocab_size)
    with torch.no_grad():
        model.generator.bias[: BOS + 1] = 100.0
    src = make_tokens([5, 3], device=device)
    out = greedy_search(model.to(device), src, BOS, NEVER, max_len_b=2)
    assert not (out[:, :5] <= BOS).any()
