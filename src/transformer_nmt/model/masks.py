"""Attention masks. One convention everywhere: boolean, True = may attend.

This is how torch.nn.functional.scaled_dot_product_attention reads a boolean mask; every mask
here broadcasts to the attention scores (B, h, T_q, T_k).
"""

import torch
from torch import Tensor


def padding_mask(tokens: Tensor, pad_id: int) -> Tensor:
    """(B, S) token ids -> (B, 1, 1, S), True at real tokens: no query attends to padding."""
    return (tokens != pad_id)[:, None, None, :]


def causal_mask(size: int, device: torch.device | str | None = None) -> Tensor:
    """(1, 1, T, T) lower-triangular: position i attends to positions 0..i."""
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()[None, None]
