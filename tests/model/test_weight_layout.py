"""Linear weights laid out transposed for the CPU: the same values, parameters and ties."""

import pytest
import torch
from torch import nn

from helpers.tiny_models import FAMILIES
from transformer_nmt.model.weight_layout import transpose_linear_weights


@pytest.mark.parametrize("family", FAMILIES)
def test_every_linear_weight_is_transposed_in_place_and_computes_the_same(
    make_family, make_tokens, family
):
    model = make_family(family)
    before = {k: t.clone() for k, t in model.state_dict().items()}
    parameters = list(model.parameters())
    src, tgt = make_tokens([7, 4, 6]), make_tokens([5, 5, 5], seed=1, bos=True)
    with torch.no_grad():
        expected = model(src, tgt)
        assert transpose_linear_weights(model) is model
        got = model(src, tgt)
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    assert linears
    for linear in linears:  # W^T (in, out) is the contiguous matrix now
        assert linear.weight.t().is_contiguous()
    assert list(model.parameters()) == parameters  # the same objects: ties and optimizers hold
    if family != "rnn":
        assert model.generator.weight is model.tgt_embed.weight
    for key, t in model.state_dict().items():
        assert torch.equal(t, before[key]), key
    torch.testing.assert_close(got, expected)


def test_a_weight_tied_between_two_linear_layers_is_transposed_once():
    first = nn.Linear(3, 4)
    second = nn.Linear(3, 4)
    second.weight = first.weight
    values = first.weight.detach().clone()
    transpose_linear_weights(nn.Sequential(first, nn.ReLU(), second))
    assert second.weight is first.weight and first.weight.t().is_contiguous()
    assert torch.equal(first.weight, values)
