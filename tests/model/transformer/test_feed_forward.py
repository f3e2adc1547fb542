import pytest
import torch
import torch.nn.functional as F

from transformer_nmt.model.transformer.dropout import LANES, keep_mask
from transformer_nmt.model.transformer.feed_forward import PositionwiseFeedForward


@pytest.mark.parametrize(
    "activation, fn", [("relu", torch.relu), ("gelu", F.gelu), ("swish", F.silu)]
)
def test_ffn_is_two_linears_around_the_activation(activation, fn):
    torch.manual_seed(0)
    ffn = PositionwiseFeedForward(d_model=8, d_ff=16, activation=activation)
    x = torch.randn(2, 3, 8)
    w1, b1, w2, b2 = ffn.w_1.weight, ffn.w_1.bias, ffn.w_2.weight, ffn.w_2.bias
    torch.testing.assert_close(ffn(x), fn(x @ w1.T + b1) @ w2.T + b2)


def test_relu_and_gelu_differ():
    torch.manual_seed(0)
    relu = PositionwiseFeedForward(8, 16, "relu")
    gelu = PositionwiseFeedForward(8, 16, "gelu")
    gelu.load_state_dict(relu.state_dict())
    x = torch.randn(2, 3, 8)
    assert not torch.allclose(relu(x), gelu(x))


def test_unknown_activation_is_rejected():
    with pytest.raises(ValueError, match="activation"):
        PositionwiseFeedForward(8, 16, "tanh")


def test_activation_dropout_drops_the_inner_activations_in_training_only():
    torch.manual_seed(0)
    ffn = PositionwiseFeedForward(d_model=8, d_ff=16, dropout=0.25)
    x = torch.randn(2, 3, 8)
    inner = torch.relu(ffn.w_1(x))
    torch.testing.assert_close(ffn.eval()(x), ffn.w_2(inner))
    torch.manual_seed(1)
    y = ffn.train()(x)
    torch.manual_seed(1)  # the same draws again
    torch.testing.assert_close(y, ffn.w_2(inner * keep_mask(inner, round(0.25 * LANES))))
