import torch
import torch.nn.functional as F

from transformer_nmt.model.layers import SublayerConnection


def test_post_norm_normalises_the_residual_sum():
    """The paper: LayerNorm(x + Dropout(Sublayer(x)))."""
    block = SublayerConnection(d_model=8, dropout=0.0)
    x, y = torch.randn(2, 3, 8), torch.randn(2, 3, 8)
    assert block.sublayer_input(x) is x
    torch.testing.assert_close(block(x, y), F.layer_norm(x + y, (8,)))


def test_pre_norm_normalises_the_sublayer_input_only():
    """norm_first: x + Dropout(Sublayer(LayerNorm(x)))."""
    block = SublayerConnection(d_model=8, dropout=0.0, norm_first=True)
    x, y = torch.randn(2, 3, 8), torch.randn(2, 3, 8)
    torch.testing.assert_close(block.sublayer_input(x), F.layer_norm(x, (8,)))
    torch.testing.assert_close(block(x, y), x + y)


def test_dropout_hits_the_sublayer_output_not_the_residual():
    block = SublayerConnection(d_model=8, dropout=1.0, norm_first=True).train()
    x, y = torch.randn(2, 3, 8), torch.randn(2, 3, 8)
    torch.testing.assert_close(block(x, y), x)


def test_rezero_scales_the_sublayer_output_by_a_trainable_alpha_from_zero():
    """ReZero: x + alpha * Dropout(Sublayer(x)), alpha = 0 at init, no LayerNorm."""
    block = SublayerConnection(d_model=8, dropout=0.0, rezero=True)
    x, y = torch.randn(2, 3, 8), torch.randn(2, 3, 8)
    assert block.norm is None and block.alpha.item() == 0.0 and block.alpha.requires_grad
    assert block.sublayer_input(x) is x
    assert torch.equal(block(x, y), x)
    with torch.no_grad():
        block.alpha.fill_(0.3)
    torch.testing.assert_close(block(x, y), x + 0.3 * y)
