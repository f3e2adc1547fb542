"""Positional encodings (section 3.5): the paper's sinusoids, or learned (Table 3 row E)."""

import math
from collections.abc import Callable
from typing import Self

import torch
from torch import Tensor, nn


class SinusoidalPositionalEncoding(nn.Module):
    """Adds PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(same)."""

    def __init__(self, d_model: int, max_positions: int):
        super().__init__()
        pos = torch.arange(max_positions, dtype=torch.float64)[:, None]  # (P, 1)
        two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # 2i, (ceil(d_model / 2),)
        angles = pos / 10000 ** (two_i / d_model)  # (P, ceil(d_model / 2)), float64 for accuracy
        pe = torch.zeros(max_positions, d_model, dtype=torch.float64)
        pe[:, 0::2] = torch.sin(angles)
        pe[:, 1::2] = torch.cos(angles[:, : d_model // 2])
        # A plain tensor, not a buffer: DDP broadcasts every buffer from rank zero before each
        # forward, and this one is a fixed function of the sizes, the same on every rank (nor do
        # checkpoints carry it). `_apply` moves and casts it with the module all the same.
        self.pe = pe.float()  # (P, d_model)

    def _apply(self, fn: Callable[[Tensor], Tensor], recurse: bool = True) -> Self:
        # What `.to()`, `.cuda()`, `.half()` apply to parameters and buffers.
        self.pe = fn(self.pe)
        return super()._apply(fn, recurse)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """x (B, T, d_model) sits at positions offset..offset+T-1 (offset > 0 mid-decoding)."""
        return x + self.pe[offset : offset + x.size(1)]


class FairseqSinusoidalPositions(SinusoidalPositionalEncoding):
    """fairseq's sinusoids, which M2M-100 and NLLB were trained with; not the paper's.

    Three departures from the paper's table: the sines fill the first half of the features and
    the cosines the second; the frequencies are 10000^(-i / (d_model / 2 - 1)), not
    10000^(-2i / d_model); and positions count from FIRST, since fairseq's vocabulary puts
    `<pad>` at 1 and numbers a sequence's tokens from padding_idx + 1 (its padding row is zero).
    An odd d_model leaves its last feature zero.
    """

    FIRST = 2

    def __init__(self, d_model: int, max_positions: int):
        nn.Module.__init__(self)
        half = d_model // 2
        # In float32, as fairseq computes it: the table the models trained with, bit for bit.
        frequencies = torch.exp(torch.arange(half).float() * -(math.log(10000) / (half - 1)))
        pos = torch.arange(self.FIRST, self.FIRST + max_positions).float()[:, None]  # (P, 1)
        angles = pos * frequencies[None]  # (P, d_model // 2)
        pe = torch.zeros(max_positions, d_model)
        pe[:, :half], pe[:, half : 2 * half] = torch.sin(angles), torch.cos(angles)
        self.pe = pe  # (P, d_model), not a buffer: see the parent class


class LearnedPositionalEmbedding(nn.Module):
    """Adds a learned vector per position: Table 3 row (E), about as good as the sinusoids."""

    def __init__(self, d_model: int, max_positions: int):
        super().__init__()
        self.embedding = nn.Embedding(max_positions, d_model)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """x (B, T, d_model) sits at positions offset..offset+T-1 (offset > 0 mid-decoding)."""
        positions = torch.arange(offset, offset + x.size(1), device=x.device)
        return x + self.embedding(positions)  # (T, d_model) broadcast over the batch
