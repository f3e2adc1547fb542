from collections import Counter

import pytest
import torch

from transformer_nmt.model import Transformer
from transformer_nmt.model.masks import causal_mask, padding_mask
from transformer_nmt.model.transformer.attention import (
    KeyValueCache,
    MultiHeadAttention,
    attention,
    attention_kernel,
    scaled_dot_product,
)
from transformer_nmt.model.transformer.config import ATTENTION_KERNELS
from transformer_nmt.model.transformer.dropout import LANES, keep_mask


@pytest.fixture
def mha() -> MultiHeadAttention:
    torch.manual_seed(0)
    return MultiHeadAttention(d_model=32, h=4, d_k=8, d_v=8)


@pytest.fixture
def cross() -> MultiHeadAttention:
    torch.manual_seed(0)
    return MultiHeadAttention(d_model=32, h=4, d_k=8, d_v=8, self_attention=False)


def test_fast_path_equals_explicit_softmax(cross):
    q, kv = torch.randn(2, 5, 32), torch.randn(2, 7, 32)
    mask = torch.rand(2, 1, 5, 7) > 0.3
    mask[..., 0] = True  # every query sees at least one key
    fast, no_weights = cross(q, kv, mask)
    explicit, weights = cross(q, kv, mask, need_weights=True)
    assert no_weights is None
    assert weights.shape == (2, 4, 5, 7)
    torch.testing.assert_close(fast, explicit, atol=1e-5, rtol=1e-5)


def test_causal_flag_equals_causal_mask_on_both_paths(mha):
    x = torch.randn(2, 6, 32)
    masked, _ = mha(x, mask=causal_mask(6))
    flagged, _ = mha(x, causal=True)
    explicit, weights = mha(x, causal=True, need_weights=True)
    torch.testing.assert_close(flagged, masked, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(explicit, masked, atol=1e-5, rtol=1e-5)
    assert (weights.masked_select(~causal_mask(6)) == 0).all()


def test_fused_projection_equals_separate_projections(mha):
    """w_qkv is [W^Q; W^K; W^V]: the same as projecting queries, keys and values one by one."""
    x, mask = torch.randn(2, 5, 32), causal_mask(5)
    w_q, w_k, w_v = mha.w_qkv.weight.split(mha.fused_sizes)
    b_q, b_k, b_v = mha.w_qkv.bias.split(mha.fused_sizes)
    heads = lambda t: t.view(2, 5, 4, 8).transpose(1, 2)  # noqa: E731
    q, k, v = (heads(x @ w.T + b) for w, b in ((w_q, b_q), (w_k, b_k), (w_v, b_v)))
    scores = (q @ k.transpose(-2, -1) / 8**0.5).masked_fill(~mask, float("-inf"))
    out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(2, 5, 32)
    torch.testing.assert_close(mha(x, mask=mask)[0], mha.w_o(out), atol=1e-5, rtol=1e-5)


def test_each_projection_is_initialised_at_its_own_xavier_scale():
    torch.manual_seed(0)
    mha = MultiHeadAttention(d_model=256, h=4, d_k=64, d_v=64)
    mha.reset_parameters()
    bound = (6 / (256 + 256)) ** 0.5  # fan_in d_model, fan_out h * d_k
    for w in mha.w_qkv.weight.split(mha.fused_sizes):
        assert bound * 0.95 < w.abs().max() <= bound


def test_weights_sum_to_one_and_are_zero_where_masked(mha):
    x = torch.randn(2, 6, 32)
    mask = causal_mask(6)
    _, weights = mha(x, mask=mask, need_weights=True)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, 6))
    assert (weights.masked_select(~mask) == 0).all()  # exactly, not approximately
    assert (weights.masked_select(mask) > 0).all()


def test_d_k_and_d_v_are_independent_of_d_model_and_h():
    mha = MultiHeadAttention(d_model=32, h=4, d_k=6, d_v=10, self_attention=False)
    assert mha.w_q.weight.shape == (4 * 6, 32)
    assert mha.w_kv.weight.shape == (4 * (6 + 10), 32)
    assert mha.w_o.weight.shape == (32, 4 * 10)
    q, kv = torch.randn(2, 3, 32), torch.randn(2, 5, 32)
    fast, _ = mha(q, kv)
    explicit, weights = mha(q, kv, need_weights=True)
    assert fast.shape == (2, 3, 32) and weights.shape == (2, 4, 3, 5)
    torch.testing.assert_close(fast, explicit, atol=1e-5, rtol=1e-5)


def test_cache_appends_self_attention_keys_and_values(mha):
    x = torch.randn(2, 5, 32)
    full, _ = mha(x, causal=True)
    cache = KeyValueCache()
    steps = [mha(x_t, cache=cache)[0] for x_t in x.split(1, dim=1)]
    keys, values = cache.view(cache.keys), cache.view(cache.values)
    assert cache.length == 5 and keys.shape == (2, 4, 5, 8) and values.shape == (2, 4, 5, 8)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    # The keys are the projections of x, each position's written once, in its slot.
    k = mha.w_qkv(x).split(mha.fused_sizes, dim=-1)[1]
    torch.testing.assert_close(keys, k.view(2, 5, 4, 8).transpose(1, 2))


def test_key_value_cache_grows_and_reorders_its_filled_slots():
    cache, k = KeyValueCache(), torch.randn(3, 2, 70, 4)  # more positions than a first buffer
    cache.append(k[:, :, :5], -k[:, :, :5])  # a prefix at once, then one position a step
    for t in range(5, 70):
        keys, values = cache.append(k[:, :, t : t + 1], -k[:, :, t : t + 1])
    assert cache.keys.size(0) >= 70 and torch.equal(keys, k) and torch.equal(values, -k)
    order = torch.tensor([2, 0, 2, 1])  # as beam search does: permute and duplicate
    moved = cache.reordered(order)
    assert torch.equal(moved.view(moved.keys), k[order]) and moved.length == 70
    assert torch.equal(cache.view(cache.keys), k)  # the original unchanged
    keys, _ = moved.append(k[order, :, :1], k[order, :, :1])
    assert torch.equal(keys, torch.cat([k[order], k[order, :, :1]], dim=2))


def test_encoder_decoder_cache_projects_memory_once(cross):
    memory, q = torch.randn(2, 7, 32), torch.randn(2, 1, 32)
    cache = {}
    first, _ = cross(q, memory, cache=cache)
    k = cache["k"]
    # Later steps must not read the memory at all: pass garbage to prove it.
    again, _ = cross(q, torch.randn(2, 7, 32), cache=cache)
    assert cache["k"] is k
    torch.testing.assert_close(again, first)


def masked_keys(batch: int, t_q: int, t_k: int) -> torch.Tensor:
    """A random (B, 1, T_q, T_k) mask in which every query sees at least one key."""
    mask = torch.rand(batch, 1, t_q, t_k, generator=torch.Generator().manual_seed(1)) > 0.3
    mask[..., 0] = True
    return mask


def output_and_grads(mha: MultiHeadAttention, x, memory=None, **kwargs) -> list[torch.Tensor]:
    """The output and the gradients of a fixed projection of it wrt the inputs and parameters."""
    out, _ = mha(x, memory, **kwargs)
    weight = torch.randn(out.shape, generator=torch.Generator().manual_seed(2))
    inputs = [t for t in (x, memory) if t is not None] + list(mha.parameters())
    return [out, *torch.autograd.grad((out * weight).sum(), inputs)]


@pytest.mark.parametrize("kernel", ATTENTION_KERNELS)
@pytest.mark.parametrize("case", ["self, mask", "self, causal", "encoder-decoder, mask"])
def test_every_kernel_equals_the_explicit_softmax_forward_and_backward(kernel, case):
    self_attention = case.startswith("self")
    torch.manual_seed(0)
    mha = MultiHeadAttention(d_model=32, h=4, d_k=8, d_v=8, self_attention=self_attention)
    x = torch.randn(3, 5, 32, requires_grad=True)
    memory = None if self_attention else torch.randn(3, 7, 32, requires_grad=True)
    kwargs = (
        {"causal": True}
        if case.endswith("causal")
        else {"mask": masked_keys(3, 5, 5 if self_attention else 7)}
    )
    # need_weights takes the explicit softmax path whatever the kernel: the reference.
    reference = output_and_grads(mha, x, memory, need_weights=True, **kwargs)
    mha.kernel = kernel
    for got, want in zip(output_and_grads(mha, x, memory, **kwargs), reference, strict=True):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    ("device_type", "dtype", "grad", "dropout", "kernel"),
    [
        ("cpu", torch.float32, True, False, "fused"),
        ("cpu", torch.bfloat16, True, False, "explicit"),
        ("cpu", torch.float32, False, False, "fused"),
        ("cpu", torch.bfloat16, False, False, "fused"),
        ("cpu", torch.float32, True, True, "explicit"),  # the cheaper mask
        ("cuda", torch.float32, True, False, "fused"),
        ("cuda", torch.bfloat16, True, False, "fused"),
        ("cuda", torch.float16, False, False, "fused"),
        ("cuda", torch.float32, True, True, "fused"),  # SDPA's own dropout on GPUs
    ],
)
def test_auto_picks_the_kernel_measured_fastest(device_type, dtype, grad, dropout, kernel):
    assert attention_kernel(device_type, dtype, grad, dropout) == kernel


@pytest.mark.parametrize(
    ("device_type", "dtype", "kernel"),
    [
        ("cpu", torch.float32, "explicit"),
        ("cpu", torch.bfloat16, "fused"),
        ("cuda", torch.float32, "fused"),
    ],
)
def test_decodings_encoder_decoder_attention_is_explicit_in_float32_on_cpus(
    device_type, dtype, kernel
):
    assert attention_kernel(device_type, dtype, False, False, cached_memory=True) == kernel


def test_a_decoding_step_runs_the_matmuls_on_the_cached_keys_as_they_lie(make_model, make_tokens):
    model, src = make_model(), make_tokens([7, 4, 6])  # N=2: 2 decoder layers
    memory, src_mask = model.encode(src), padding_mask(src, 0)
    cache, bos = model.new_cache(), torch.full((3, 1), 1)
    with torch.no_grad():
        model.decode(bos, memory, src_mask, cache)
        for layer in cache:  # K^T and V contiguous, the rows kept so when sentences leave
            assert layer["src_attn"]["k"].shape == (3, 4, 8, 7)
            assert all(t.is_contiguous() for t in layer["src_attn"].values())
        cache = model.reorder_cache(cache, torch.tensor([2, 0]), torch.tensor([2, 0]))
        assert all(t.is_contiguous() for layer in cache for t in layer["src_attn"].values())
        with torch.profiler.profile() as profile:
            model.decode(bos[:2], memory[[2, 0]], src_mask[[2, 0]], cache)
    calls = Counter(event.name for event in profile.events())
    # Encoder-decoder attention explicit, without copying its keys; self-attention fused.
    assert calls[FUSED_CPU_OP] == 2 and calls[MATH_OP] == 0 and calls["aten::softmax"] == 2
    assert calls["aten::clone"] == calls["aten::contiguous"] == 0


FUSED_CPU_OP = "aten::_scaled_dot_product_flash_attention_for_cpu"
MATH_OP = "aten::_scaled_dot_product_attention_math"


def attention_calls(model: Transformer, dtype: torch.dtype, grad: bool) -> dict[str, int]:
    """How often each kernel ran in one forward pass of `model` under autocast to `dtype`."""
    src, tgt = torch.randint(3, 50, (2, 6)), torch.randint(3, 50, (2, 5))
    autocast = torch.autocast("cpu", dtype, enabled=dtype != torch.float32)
    with torch.profiler.profile() as profile, torch.set_grad_enabled(grad), autocast:
        model(src, tgt)
    calls = Counter(event.name for event in profile.events())
    # Math attention computes its own softmax; the explicit path is every other one.
    explicit = calls["aten::softmax"] - calls[MATH_OP]
    return {"fused": calls[FUSED_CPU_OP], "math": calls[MATH_OP], "explicit": explicit}


@pytest.mark.parametrize("setting", ATTENTION_KERNELS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("grad", [True, False], ids=["training", "inference"])
def test_each_setting_runs_its_kernel_in_every_attention(make_model, setting, dtype, grad):
    model = make_model(attention_kernel=setting)  # N=2: 2 + 2 * 2 attention modules
    expected = attention_kernel("cpu", dtype, grad, False) if setting == "auto" else setting
    calls = {kernel: 0 for kernel in ("fused", "math", "explicit")} | {expected: 6}
    assert attention_calls(model, dtype, grad) == calls


def test_an_unknown_attention_kernel_is_refused(make_model):
    with pytest.raises(ValueError, match="model.attention_kernel='flash' must be one of auto"):
        make_model(attention_kernel="flash")


def test_attention_dropout_drops_weights_not_outputs_and_returns_the_weights_before_it():
    torch.manual_seed(0)
    q, k, v = torch.randn(3, 2, 4, 5, 8).unbind(0)
    mask = causal_mask(5, "cpu")
    plain, weights = attention(q, k, v, mask)
    torch.manual_seed(1)
    out, returned = attention(q, k, v, mask, dropout_p=0.3)
    torch.manual_seed(1)  # the same draws again
    keep = keep_mask(weights, round(0.3 * LANES))
    torch.testing.assert_close(out, (weights * keep) @ v)
    assert torch.equal(returned, weights)
    assert not torch.allclose(out, plain)


@pytest.mark.parametrize("kernel", ["explicit", "math", "fused"])
def test_every_kernel_drops_attention_weights_without_bias(kernel):
    """Over 4,000 copies of one query, each dropped afresh, the mean output is the undropped one."""
    torch.manual_seed(0)
    q, k, v = torch.randn(3, 1, 1, 6, 8).unbind(0)
    copies = [t.expand(4000, 1, 6, 8) for t in (q, k, v)]
    dropped = scaled_dot_product(*copies, None, True, kernel, dropout_p=0.3)
    plain = scaled_dot_product(q, k, v, None, True, kernel)
    assert not torch.allclose(dropped[0], plain[0])
    # One copy's output element has a standard deviation below 2 (|v| < 4, 6 keys at most):
    # 4,000 copies put the mean within 0.1 of the undropped output (3 standard deviations).
    torch.testing.assert_close(dropped.mean(0), plain[0], atol=0.1, rtol=0)


def test_attention_dropout_is_off_in_eval_mode_and_makes_auto_run_explicit_in_training(
    make_model,
):
    model, reference = make_model(attention_dropout=0.5), make_model()
    src, tgt = torch.randint(3, 50, (2, 6)), torch.randint(3, 50, (2, 5))
    torch.testing.assert_close(model(src, tgt), reference(src, tgt))
    model.train()
    calls = attention_calls(model, torch.float32, grad=True)
    assert calls == {"fused": 0, "math": 0, "explicit": 6}
