import pytest
import torch

from transformer_nmt.model.attention import MultiHeadAttention
from transformer_nmt.model.masks import causal_mask


@pytest.fixture
def mha() -> MultiHeadAttention:
    torch.manual_seed(0)
    return MultiHeadAttention(d_model=32, h=4, d_k=8, d_v=8)


def test_fast_path_equals_explicit_softmax(mha):
    q, kv = torch.randn(2, 5, 32), torch.randn(2, 7, 32)
    mask = torch.rand(2, 1, 5, 7) > 0.3
    mask[..., 0] = True  # every query sees at least one key
    fast, no_weights = mha(q, kv, kv, mask)
    explicit, weights = mha(q, kv, kv, mask, need_weights=True)
    assert no_weights is None
    assert weights.shape == (2, 4, 5, 7)
    torch.testing.assert_close(fast, explicit, atol=1e-5, rtol=1e-5)


def test_weights_sum_to_one_and_are_zero_where_masked(mha):
    x = torch.randn(2, 6, 32)
    mask = causal_mask(6)
    _, weights = mha(x, x, x, mask, need_weights=True)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, 6))
    assert (weights.masked_select(~mask) == 0).all()  # exactly, not approximately
    assert (weights.masked_select(mask) > 0).all()


def test_d_k_and_d_v_are_independent_of_d_model_and_h():
    mha = MultiHeadAttention(d_model=32, h=4, d_k=6, d_v=10)
    assert mha.w_q.weight.shape == mha.w_k.weight.shape == (4 * 6, 32)
    assert mha.w_v.weight.shape == (4 * 10, 32)
    assert mha.w_o.weight.shape == (32, 4 * 10)
    q, kv = torch.randn(2, 3, 32), torch.randn(2, 5, 32)
    fast, _ = mha(q, kv, kv)
    explicit, weights = mha(q, kv, kv, need_weights=True)
    assert fast.shape == (2, 3, 32) and weights.shape == (2, 4, 3, 5)
    torch.testing.assert_close(fast, explicit, atol=1e-5, rtol=1e-5)


def test_cache_appends_self_attention_keys_and_values(mha):
    x = torch.randn(2, 5, 32)
    full, _ = mha(x, x, x, causal_mask(5))
    cache = {}
    steps = [mha(x_t, x_t, x_t, cache=cache)[0] for x_t in x.split(1, dim=1)]
    assert cache["k"].shape == (2, 4, 5, 8) and cache["v"].shape == (2, 4, 5, 8)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)


def test_static_cache_projects_memory_once(mha):
    memory, q = torch.randn(2, 7, 32), torch.randn(2, 1, 32)
    cache = {}
    first, _ = mha(q, memory, memory, cache=cache, static_kv=True)
    k = cache["k"]
    # Later steps must not read key/value at all: pass garbage to prove it.
    again, _ = mha(q, torch.randn(2, 7, 32), torch.randn(2, 7, 32), cache=cache, static_kv=True)
    assert cache["k"] is k
    torch.testing.assert_close(again, first)
