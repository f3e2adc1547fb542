"""Dropout's cheaper CPU mask: the distribution, scale, gradient and seeding of nn.Dropout."""

import pytest
import torch
import torch.nn.functional as F

from transformer_nmt.model.transformer.dropout import LANES, Dropout


def train_mode(p: float) -> Dropout:
    return Dropout(p).train()


@pytest.mark.parametrize("p", [0.1, 0.3])
def test_drops_p_of_the_elements_in_every_lane_and_scales_the_rest(p):
    torch.manual_seed(0)
    x = torch.rand(4 * 2**18) + 1  # no zeros of its own
    y = train_mode(p)(x)
    kept = y != 0
    threshold = round(p * LANES)
    torch.testing.assert_close(y[kept], x[kept] * LANES / (LANES - threshold))
    # Each of a 64-bit draw's four lanes (element i % 4), the top one included: 2^18 elements a
    # lane put the drop rate within 0.003 of p (5 standard deviations).
    for lane in range(4):
        rate = 1 - kept[lane::4].float().mean().item()
        assert abs(rate - p) < 0.003, (lane, rate)


def test_the_output_is_unbiased_and_the_gradient_is_the_mask():
    torch.manual_seed(1)
    x = torch.ones(2**20, requires_grad=True)
    y = train_mode(0.1)(x)
    assert abs(y.mean().item() - 1) < 0.003
    y.sum().backward()
    torch.testing.assert_close(x.grad, y.detach())  # d(x * mask) / dx = mask = y / x


def test_the_same_seed_gives_the_same_mask_and_another_seed_another():
    x = torch.ones(3, 5, 7)
    masks = []
    for seed in (0, 0, 1):
        torch.manual_seed(seed)
        masks.append(train_mode(0.5)(x))
    assert torch.equal(masks[0], masks[1])
    assert not torch.equal(masks[0], masks[2])


@pytest.mark.parametrize("p", [0.0, 1.0])
def test_rates_of_zero_and_one_are_nn_dropouts(p):
    x = torch.randn(4, 6)
    assert torch.equal(train_mode(p)(x), F.dropout(x, p, training=True))


def test_eval_mode_is_the_identity_and_the_shape_and_dtype_are_kept():
    x = torch.randn(2, 3, 5, dtype=torch.bfloat16)
    assert train_mode(0.2).eval()(x) is x
    y = train_mode(0.2)(x)
    assert y.shape == x.shape and y.dtype == torch.bfloat16
