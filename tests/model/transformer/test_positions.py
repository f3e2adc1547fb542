import math

import pytest
import torch

from transformer_nmt.model.transformer.positions import (
    FairseqSinusoidalPositions,
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
)


def test_sinusoids_follow_the_papers_formula():
    d_model = 16
    pe = SinusoidalPositionalEncoding(d_model, max_positions=100)
    out = pe(torch.zeros(1, 100, d_model))[0]
    for pos in (0, 1, 7, 99):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            assert math.isclose(out[pos, 2 * i].item(), math.sin(angle), abs_tol=1e-6)
            assert math.isclose(out[pos, 2 * i + 1].item(), math.cos(angle), abs_tol=1e-6)


def test_fairseq_sinusoids_follow_fairseqs_formula_from_position_2():
    d_model = 16
    half = d_model // 2
    out = FairseqSinusoidalPositions(d_model, max_positions=100)(torch.zeros(1, 100, d_model))[0]
    for index in (0, 1, 7, 99):
        pos = index + 2  # fairseq numbers tokens from its padding_idx 1 + 1
        for i in range(half):
            angle = pos * math.exp(-i * math.log(10000) / (half - 1))
            assert math.isclose(out[index, i].item(), math.sin(angle), abs_tol=1e-4)
            assert math.isclose(out[index, half + i].item(), math.cos(angle), abs_tol=1e-4)


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


def rotation_by_offset(k: int, d_model: int) -> torch.Tensor:
    """T_k (d_model, d_model): one 2x2 rotation by the angle k w_i per frequency w_i.

    w_i = 10000^(-2i/d_model); the rotation takes (sin(pos w_i), cos(pos w_i)) to
    (sin((pos+k) w_i), cos((pos+k) w_i)) for every pos. Built from the frequencies alone:
    sin(a+b) = sin a cos b + cos a sin b and cos(a+b) = cos a cos b - sin a sin b, with
    a = pos w_i and b = k w_i. Dims 2i and 2i+1 are the pair, as our table interleaves sin (even
    dims) and cos (odd dims).
    """
    w = 10000 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (d_model / 2,)
    cos, sin = torch.cos(k * w), torch.sin(k * w)
    blocks = [torch.tensor([[c, s], [-s, c]]) for c, s in zip(cos, sin, strict=True)]
    return torch.block_diag(*blocks)  # (d_model, d_model)


@pytest.mark.parametrize("d_model", [16, 64])
@pytest.mark.parametrize("k", [1, 2, 5, 17, 100])
def test_a_shifted_position_is_a_fixed_rotation_of_the_position(d_model, k):
    """Section 3.5: for any offset k, PE(pos+k) is a linear function of PE(pos)."""
    pe = SinusoidalPositionalEncoding(d_model, max_positions=400)
    table = pe(torch.zeros(1, 400, d_model))[0].double()  # (P, d_model)
    T_k = rotation_by_offset(k, d_model)
    torch.testing.assert_close(T_k @ T_k.T, torch.eye(d_model, dtype=torch.float64))
    positions = torch.tensor([0, 1, 3, 50, 123, 399 - k])
    # One T_k for every position: PE(pos+k) = T_k PE(pos), each PE a column vector.
    shifted = table[positions] @ T_k.T  # (n, d_model)
    torch.testing.assert_close(shifted, table[positions + k], atol=1e-6, rtol=0)
    # And not by accident: another offset's rotation misses.
    assert not torch.allclose(
        table[positions] @ rotation_by_offset(k + 1, d_model).T, table[positions + k], atol=1e-3
    )
