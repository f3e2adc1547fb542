import math

import torch

from transformer_nmt.model.embeddings import (
    Embeddings,
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
)


def test_embeddings_are_scaled_by_sqrt_d_model():
    emb = Embeddings(vocab_size=10, d_model=16, pad_id=0)
    tokens = torch.tensor([[3, 4, 0]])
    torch.testing.assert_close(emb(tokens), emb.weight[tokens] * 4.0)
    assert emb.weight is emb.lut.weight


def test_sinusoids_follow_the_papers_formula():
    d_model = 16
    pe = SinusoidalPositionalEncoding(d_model, max_positions=100)
    out = pe(torch.zeros(1, 100, d_model))[0]
    for pos in (0, 1, 7, 99):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            assert math.isclose(out[pos, 2 * i].item(), math.sin(angle), abs_tol=1e-6)
            assert math.isclose(out[pos, 2 * i + 1].item(), math.cos(angle), abs_tol=1e-6)


def test_sinusoids_are_a_buffer_left_out_of_checkpoints():
    pe = SinusoidalPositionalEncoding(16, 100)
    assert list(pe.parameters()) == [] and pe.state_dict() == {}


def test_offset_continues_positions():
    for pe in (SinusoidalPositionalEncoding(16, 20), LearnedPositionalEmbedding(16, 20)):
        x = torch.randn(2, 5, 16)
        full = pe(x)
        torch.testing.assert_close(pe(x[:, 3:], offset=3), full[:, 3:])


def test_learned_positions_are_parameters_that_move_the_output():
    pe = LearnedPositionalEmbedding(16, 20)
    assert pe.embedding.weight.shape == (20, 16) and pe.embedding.weight.requires_grad
    x = torch.randn(2, 5, 16)
    before = pe(x)
    with torch.no_grad():
        pe.embedding.weight[2] += 1.0
    after = pe(x)
    assert not torch.allclose(after[:, 2], before[:, 2])
    torch.testing.assert_close(after[:, [0, 1, 3, 4]], before[:, [0, 1, 3, 4]])


def test_the_sinusoid_table_is_no_buffer_yet_moves_and_casts_with_the_module():
    pe = SinusoidalPositionalEncoding(16, 20)
    table = pe.pe.clone()
    assert not list(pe.buffers())  # nothing for DDP to broadcast every step
    pe.double()
    assert pe.pe.dtype == torch.float64
    torch.testing.assert_close(pe.pe.float(), table, rtol=0, atol=0)
    pe.to("meta")
    assert pe.pe.device.type == "meta"
