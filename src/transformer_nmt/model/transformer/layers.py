"""Encoder and decoder layers (section 3.1) and the residual connection around each sublayer."""

import torch
from torch import Tensor, nn

from transformer_nmt.model.transformer.attention import MultiHeadAttention
from transformer_nmt.model.transformer.config import TransformerConfig
from transformer_nmt.model.transformer.dropout import Dropout
from transformer_nmt.model.transformer.feed_forward import PositionwiseFeedForward


class SublayerConnection(nn.Module):
    """Residual connection with dropout and layer norm around one sublayer.

    The paper is post-norm: LayerNorm(x + Dropout(Sublayer(x))) (sections 3.1 and 5.4).
    norm_first=True is pre-norm: x + Dropout(Sublayer(LayerNorm(x))), which trains more stably in
    deep stacks but leaves the residual stream unnormalised, so the stacks end with a LayerNorm.
    rezero=True is ReZero (Bachlechner et al., 2020): x + alpha * Dropout(Sublayer(x)) with a
    trainable scalar alpha that starts at 0, so that every layer starts as the identity, and no
    LayerNorm at all.
    A layer calls `sublayer_input(x)`, runs its sublayer on that, and adds the result with `(x, y)`.
    """

    def __init__(
        self, d_model: int, dropout: float, norm_first: bool = False, rezero: bool = False
    ):
        super().__init__()
        self.norm_first = norm_first
        self.norm = None if rezero else nn.LayerNorm(d_model)
        self.alpha = nn.Parameter(torch.zeros(())) if rezero else None
        self.dropout = Dropout(dropout)

    def sublayer_input(self, x: Tensor) -> Tensor:
        return self.norm(x) if self.norm_first else x

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        """x: the residual stream (B, T, d_model); y: the sublayer's output on sublayer_input(x)."""
        if self.alpha is not None:
            return x + self.alpha * self.dropout(y)
        x = x + self.dropout(y)
        return x if self.norm_first else self.norm(x)


class EncoderLayer(nn.Module):
    """Self-attention, then the feed-forward network, each inside a `SublayerConnection`.

    Sized and switched by `config` (depths aside): d_model, h, d_k, d_v, d_ff, the dropouts,
    norm_first, rezero, activation and attention_kernel, each documented in `TransformerConfig`.
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.self_attn = _attention(config)
        self.feed_forward = _feed_forward(config, config.d_ff)
        self.sublayer = _sublayers(config, 2)

    def forward(
        self, x: Tensor, mask: Tensor, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """x (B, S, d_model), mask (B, 1, 1, S) -> (B, S, d_model), weights (B, h, S, S) or None."""
        q = self.sublayer[0].sublayer_input(x)
        y, weights = self.self_attn(q, mask=mask, need_weights=need_weights)
        x = self.sublayer[0](x, y)
        x = self.sublayer[1](x, self.feed_forward(self.sublayer[1].sublayer_input(x)))
        return x, weights


class DecoderLayer(nn.Module):
    """Masked self-attention, attention over the encoder output, then the feed-forward network.

    Sized and switched by `config`, as `EncoderLayer`, but d_ff_dec wide.
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.self_attn = _attention(config)
        self.src_attn = _attention(config, self_attention=False)
        self.feed_forward = _feed_forward(config, config.d_ff_dec)
        self.sublayer = _sublayers(config, 3)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        src_mask: Tensor,
        tgt_mask: Tensor | None,
        cache: dict[str, dict] | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """Run one decoder layer.

        Args:
            x: (B, T, d_model) target-side inputs (only the new positions when caching).
            memory: (B, S, d_model) encoder output.
            src_mask: (B, 1, 1, S).
            tgt_mask: broadcastable to (B, 1, T, T_total), only with a cache; without one the
                self-attention is causal (the fused kernel's flag, no mask tensor), with one and no
                mask a single new position attends to all cached ones.
            cache: {"self_attn": {...}, "src_attn": {...}}, each attention module's state.
            need_weights: also return self- and encoder-decoder attention weights.

        Returns:
            (B, T, d_model), self-attention weights (B, h, T, T_total) and encoder-decoder
            attention weights (B, h, T, S), the weights None unless need_weights.
        """
        self_cache, src_cache = (
            (None, None) if cache is None else (cache["self_attn"], cache["src_attn"])
        )
        q = self.sublayer[0].sublayer_input(x)
        y, self_weights = self.self_attn(
            q, mask=tgt_mask, causal=cache is None, need_weights=need_weights, cache=self_cache
        )
        x = self.sublayer[0](x, y)
        # Queries from the decoder; keys and values from the encoder output (section 3.2.3).
        q = self.sublayer[1].sublayer_input(x)
        y, src_weights = self.src_attn(
            q, memory, src_mask, need_weights=need_weights, cache=src_cache
        )
        x = self.sublayer[1](x, y)
        x = self.sublayer[2](x, self.feed_forward(self.sublayer[2].sublayer_input(x)))
        return x, self_weights, src_weights


def _attention(config: TransformerConfig, self_attention: bool = True) -> MultiHeadAttention:
    return MultiHeadAttention(
        config.d_model,
        config.h,
        config.d_k,
        config.d_v,
        self_attention=self_attention,
        kernel=config.attention_kernel,
        dropout=config.attention_dropout,
    )


def _feed_forward(config: TransformerConfig, d_ff: int) -> PositionwiseFeedForward:
    return PositionwiseFeedForward(
        config.d_model, d_ff, config.activation, config.activation_dropout
    )


def _sublayers(config: TransformerConfig, n: int) -> nn.ModuleList:
    """One residual connection per sublayer of a layer."""
    return nn.ModuleList(
        SublayerConnection(config.d_model, config.dropout, config.norm_first, config.rezero)
        for _ in range(n)
    )
