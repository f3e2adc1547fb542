"""Scaled dot-product and multi-head attention (section 3.2)."""

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor]:
    """softmax(Q K^T / sqrt(d_k)) V, written out so that it can return the weights."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, h, T_q, T_k)
    if mask is not None:
        # -inf, not a large negative number, so masked weights are exactly 0.
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v, weights  # (B, h, T_q, d_v), (B, h, T_q, T_k)


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W^O, head_i = Attention(QW^Q_i, KW^K_i, VW^V_i).

    Attention-weight dropout is left out: the paper applies dropout only to sublayer outputs and
    embedding sums (section 5.4).
    """

    def __init__(self, d_model: int, h: int, d_k: int, d_v: int):
        super().__init__()
        self.h, self.d_k, self.d_v = h, d_k, d_v
        # All h heads' projections in one matrix each.
        self.w_q = nn.Linear(d_model, h * d_k)
        self.w_k = nn.Linear(d_model, h * d_k)
        self.w_v = nn.Linear(d_model, h * d_v)
        self.w_o = nn.Linear(h * d_v, d_model)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        mask: Tensor | None = None,
        need_weights: bool = False,
        cache: dict[str, Tensor] | None = None,
        static_kv: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from query to key/value.

        Args:
            query: (B, T_q, d_model).
            key, value: (B, T_k, d_model).
            mask: boolean, True = may attend, broadcastable to (B, h, T_q, T_k); None = attend all.
            need_weights: take the explicit softmax path and return the weights (B, h, T_q, T_k);
                otherwise the fused kernel runs and the weights are None.
            cache: this module's incremental decoding state, updated in place. Its "k" and "v"
                (B, h, T, d_k / d_v) are the keys and values so far; the new ones are appended.
            static_kv: key and value are the same at every step (the encoder memory): project
                them once into the cache and reuse them.

        Returns:
            (B, T_q, d_model) output and the weights or None.
        """
        q = self._split_heads(self.w_q(query), self.d_k)  # (B, h, T_q, d_k)
        k, v = self._keys_values(key, value, cache, static_kv)  # (B, h, T_k, d_k), (B, h, T_k, d_v)
        if need_weights:
            out, weights = attention(q, k, v, mask)
        else:
            out, weights = F.scaled_dot_product_attention(q, k, v, attn_mask=mask), None
        B, _, T_q, _ = out.shape
        out = out.transpose(1, 2).reshape(B, T_q, self.h * self.d_v)  # concatenate the heads
        return self.w_o(out), weights

    def _keys_values(
        self, key: Tensor, value: Tensor, cache: dict[str, Tensor] | None, static_kv: bool
    ) -> tuple[Tensor, Tensor]:
        if cache is not None and static_kv and "k" in cache:
            return cache["k"], cache["v"]
        k = self._split_heads(self.w_k(key), self.d_k)
        v = self._split_heads(self.w_v(value), self.d_v)
        if cache is not None:
            if "k" in cache:
                k = torch.cat([cache["k"], k], dim=2)
                v = torch.cat([cache["v"], v], dim=2)
            cache["k"], cache["v"] = k, v
        return k, v

    def _split_heads(self, x: Tensor, d: int) -> Tensor:
        B, T, _ = x.shape
        return x.view(B, T, self.h, d).transpose(1, 2)  # (B, T, h*d) -> (B, h, T, d)
