"""Dynamic int8 quantization: every linear layer quantized, the embeddings and the original kept."""

import warnings

import pytest
import torch
from torch import nn
from torch.ao.nn.quantized.dynamic import Linear as DynamicQuantizedLinear

from helpers.tiny_models import FAMILIES
from transformer_nmt.model.quantization import quantize_int8


def linear_names(model: nn.Module, kind: type) -> set[str]:
    return {name for name, m in model.named_modules() if type(m) is kind}


@pytest.mark.parametrize("family", FAMILIES)
def test_every_linear_layer_is_quantized_and_the_original_kept(make_family, make_tokens, family):
    model = make_family(family)
    before = {k: t.clone() for k, t in model.state_dict().items()}
    quantized = quantize_int8(model)
    linears = linear_names(model, nn.Linear)
    assert "generator" in linears
    assert linear_names(quantized, DynamicQuantizedLinear) == linears
    assert not linear_names(quantized, nn.Linear)
    assert not quantized.training
    # The tied output projection has its own int8 copy; the embedding lookup reads the float32
    # matrix it always read, and the model handed in is unchanged.
    assert quantized.tgt_embed.weight.dtype == torch.float32
    torch.testing.assert_close(quantized.tgt_embed.weight, model.tgt_embed.weight)
    assert model.generator.weight is model.tgt_embed.weight
    assert linear_names(model, nn.Linear) == linears
    for key, t in model.state_dict().items():
        assert torch.equal(t, before[key]), key
    src, tgt = make_tokens([7, 4, 6]), make_tokens([5, 5, 5], seed=1, bos=True)
    with torch.no_grad():
        exact, approx = model(src, tgt), quantized(src, tgt)
    # int8 weights with per-row scales: an error a small fraction of the logits' spread.
    error = (approx - exact).pow(2).mean().sqrt() / exact.std()
    assert 0 < error < 0.05


def test_no_deprecation_warning_reaches_the_user(make_model):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quantize_int8(make_model())
    assert [str(w.message) for w in caught] == []
