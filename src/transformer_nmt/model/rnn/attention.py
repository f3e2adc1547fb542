"""The alignment model: additive attention over the annotations (Bahdanau et al., section 3.1)."""

import torch
from torch import Tensor, nn


class AdditiveAttention(nn.Module):
    """e_ij = v_a^T tanh(W_a s_{i-1} + U_a h_j), alpha_ij = softmax_j(e_ij), c_i = Σ_j alpha_ij h_j.

    Args:
        query_size: size of the decoder state s_{i-1}.
        key_size: size of the annotations h_j.
        attention_dim: width of the tanh layer.
    """

    def __init__(self, query_size: int, key_size: int, attention_dim: int):
        super().__init__()
        self.W_a = nn.Linear(query_size, attention_dim, bias=False)
        self.U_a = nn.Linear(key_size, attention_dim)
        self.v_a = nn.Linear(attention_dim, 1, bias=False)

    def keys(self, memory: Tensor) -> Tensor:
        """U_a h_j for every source position, (B, S, attention_dim): the same at every step."""
        return self.U_a(memory)

    def forward(
        self, query: Tensor, keys: Tensor, memory: Tensor, src_mask: Tensor
    ) -> tuple[Tensor, Tensor]:
        """query (B, query_size), keys (B, S, A), memory (B, S, key_size), src_mask (B, S).

        Returns the context c_i (B, key_size) and the weights alpha_i (B, S), exactly 0 on padding.
        """
        scores = self.v_a(torch.tanh(self.W_a(query)[:, None] + keys)).squeeze(-1)  # (B, S)
        weights = scores.masked_fill(~src_mask, float("-inf")).softmax(dim=-1)
        context = (weights[:, None] @ memory).squeeze(1)  # (B, 1, S) @ (B, S, key_size)
        return context, weights
