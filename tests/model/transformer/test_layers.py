import torch
import torch.nn.functional as F

from transformer_nmt.model.transformer.config import TransformerConfig
from transformer_nmt.model.transformer.layers import DecoderLayer, EncoderLayer, SublayerConnection


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


def test_layers_take_every_size_and_switch_from_the_config():
    config = TransformerConfig(
        vocab_size=10, pad_id=0, d_model=16, h=2, d_k=3, d_v=5, d_ff=24, dropout=0.2,
        attention_dropout=0.1, activation_dropout=0.3, activation="gelu", rezero=True,
        attention_kernel="math",
    )  # fmt: skip
    encoder, decoder = EncoderLayer(config), DecoderLayer(config)
    assert len(encoder.sublayer) == 2 and len(decoder.sublayer) == 3
    for attn in (encoder.self_attn, decoder.self_attn, decoder.src_attn):
        assert (attn.h, attn.d_k, attn.d_v) == (2, 3, 5)
        assert (attn.kernel, attn.dropout_p) == ("math", 0.1)
        assert attn.w_o.weight.shape == (16, 2 * 5)
    assert decoder.self_attn.self_attention and not decoder.src_attn.self_attention
    for ff in (encoder.feed_forward, decoder.feed_forward):
        assert ff.w_1.weight.shape == (24, 16) and ff.dropout_p == 0.3
        assert isinstance(ff.activation, torch.nn.GELU)
    for block in (*encoder.sublayer, *decoder.sublayer):
        assert block.norm is None and block.alpha is not None and block.dropout.p == 0.2
