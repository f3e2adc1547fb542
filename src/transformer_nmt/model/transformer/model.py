"""The encoder-decoder Transformer (section 3) and its incremental decoding cache."""

import copy
from dataclasses import asdict
from typing import Any

import torch
from torch import Tensor, nn

from transformer_nmt.model.embeddings import Embeddings
from transformer_nmt.model.masks import causal_mask, padding_mask
from transformer_nmt.model.transformer.attention import KeyValueCache, MultiHeadAttention
from transformer_nmt.model.transformer.config import TransformerConfig
from transformer_nmt.model.transformer.dropout import Dropout
from transformer_nmt.model.transformer.layers import DecoderLayer, EncoderLayer
from transformer_nmt.model.transformer.positions import (
    FairseqSinusoidalPositions,
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
)

POSITIONS = {
    "sinusoidal": SinusoidalPositionalEncoding,
    "learned": LearnedPositionalEmbedding,
    "fairseq": FairseqSinusoidalPositions,
}

# One dict per decoder layer: "self_attn", that attention's `KeyValueCache`, and "src_attn", the
# encoder-decoder attention's keys transposed "k" (B, h, d_k, S) and values "v" (B, h, S, d_v).
Cache = list[dict[str, dict[str, Tensor]]]


class Encoder(nn.Module):
    """N_enc identical encoder layers, then a LayerNorm if the layers are pre-norm."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        layer = EncoderLayer(config)
        self.layers = nn.ModuleList(copy.deepcopy(layer) for _ in range(config.N_enc))
        self.norm = nn.LayerNorm(config.d_model) if config.norm_first else nn.Identity()

    def forward(
        self, x: Tensor, mask: Tensor, need_weights: bool = False
    ) -> tuple[Tensor, list[Tensor]]:
        """x (B, S, d_model), mask (B, 1, 1, S) -> (B, S, d_model), per-layer weights if asked."""
        all_weights = []
        for layer in self.layers:
            x, weights = layer(x, mask, need_weights)
            if need_weights:
                all_weights.append(weights)
        return self.norm(x), all_weights


class Decoder(nn.Module):
    """N_dec identical decoder layers, then a LayerNorm if the layers are pre-norm."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        layer = DecoderLayer(config)
        self.layers = nn.ModuleList(copy.deepcopy(layer) for _ in range(config.N_dec))
        self.norm = nn.LayerNorm(config.d_model) if config.norm_first else nn.Identity()

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        src_mask: Tensor,
        tgt_mask: Tensor | None,
        cache: Cache | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        """(B, T, d_model) -> (B, T, d_model), per-layer self and src attention weights if asked."""
        self_weights, src_weights = [], []
        for layer, layer_cache in zip(self.layers, cache or [None] * len(self.layers), strict=True):
            x, w_self, w_src = layer(x, memory, src_mask, tgt_mask, layer_cache, need_weights)
            if need_weights:
                self_weights.append(w_self)
                src_weights.append(w_src)
        return self.norm(x), self_weights, src_weights


class Transformer(nn.Module):
    """Encoder-decoder Transformer for translation, sized by default as the paper's base model.

    Built from numbers, so that a Hydra `_target_` builds any variant: `vocab_size`, `pad_id` and
    any other field of `TransformerConfig` (sizes and switches, each documented there), which
    `self.config` then holds.
    """

    def __init__(self, vocab_size: int, pad_id: int, **settings: Any):
        super().__init__()
        self.config = config = TransformerConfig(vocab_size=vocab_size, pad_id=pad_id, **settings)
        d_model = config.d_model
        self.src_embed = Embeddings(vocab_size, d_model, pad_id)
        self.tgt_embed = (
            self.src_embed
            if config.tie_embeddings == "all"
            else Embeddings(vocab_size, d_model, pad_id)
        )
        Positions = POSITIONS[config.positions]
        self.src_positions = Positions(d_model, config.max_positions)
        # A decoder start token takes a position before the target's own max_positions.
        started = config.decoder_start is not None
        self.tgt_positions = Positions(d_model, config.max_positions + started)
        self.dropout = Dropout(config.dropout)
        self.encoder = Encoder(config)
        self.decoder = Decoder(config)
        # The pre-softmax linear transformation; tying shares its weight, never its bias.
        self.generator = nn.Linear(d_model, vocab_size, bias=config.output_bias)
        self._reset_parameters()
        if config.tie_embeddings != "none":
            self.generator.weight = self.tgt_embed.weight

    @classmethod
    def from_config(cls, config: TransformerConfig) -> "Transformer":
        return cls(**asdict(config))

    def _reset_parameters(self) -> None:
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        for module in self.modules():
            if isinstance(module, MultiHeadAttention):
                module.reset_parameters()
        # Each matrix once, source first: a set's order follows addresses, not the seed.
        for embed in dict.fromkeys((self.src_embed, self.tgt_embed)):
            embed.reset_parameters()
        if self.generator.bias is not None:  # every token starts equally likely
            nn.init.zeros_(self.generator.bias)

    def encode(
        self, src: Tensor, need_weights: bool = False
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """Encode source ids.

        Args:
            src: (B, S) source ids, right-padded with pad_id.
            need_weights: also return the encoder self-attention weights, a list over layers of
                (B, h, S, S) tensors (computed with the explicit softmax path).

        Returns:
            memory (B, S, d_model), or (memory, weights) if need_weights.
        """
        x = self.dropout(self.src_positions(self.src_embed(src)))
        memory, weights = self.encoder(x, padding_mask(src, self.config.pad_id), need_weights)
        return (memory, weights) if need_weights else memory

    def decode(
        self,
        tgt_in: Tensor,
        memory: Tensor,
        src_mask: Tensor,
        cache: Cache | None = None,
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, list[Tensor], list[Tensor]]:
        """Next-token logits for each target position.

        Args:
            tgt_in: (B, T) target ids starting with BOS; with a cache, only the new ids.
            memory: (B, S, d_model) from `encode`; or a row per G rows of tgt_in (B / G, S,
                d_model), rows g * G .. g * G + G - 1 reading row g: a sentence's beams or
                samples share its memory, read once (`MultiHeadAttention`).
            src_mask: (B, 1, 1, S), padding_mask(src, pad_id), with memory's rows.
            cache: from `new_cache()`, updated in place: the new positions' keys and values are
                appended and positions continue from the cached length. The new ids attend to all
                cached ones; target padding is not masked here, so search must ignore what a row
                predicts after it has finished.
            need_weights: also return per-layer lists of decoder self-attention weights
                (B, h, T, T_total) and encoder-decoder attention weights (B, h, T, S).

        Returns:
            logits (B, T, vocab_size), or (logits, self_weights, src_weights) if need_weights.
        """
        x, self_weights, src_weights = self._decoder_states(
            tgt_in, memory, src_mask, cache, need_weights
        )
        logits = self.generator(x)
        return (logits, self_weights, src_weights) if need_weights else logits

    def forward(self, src: Tensor, tgt_in: Tensor, index: Tensor | None = None) -> Tensor:
        """Logits for the shifted targets, at every position or only at the indexed ones.

        Args:
            src: (B, S) source ids; tgt_in: (B, T) target ids starting with BOS.
            index: (N,) flat indices into the B * T target positions (row-major); only these get
                the output projection, the model's largest matmul. Training passes the non-pad
                positions, so padding costs no projection and no softmax.

        Returns:
            (B, T, vocab_size) logits, or (N, vocab_size) with index.
        """
        src_mask = padding_mask(src, self.config.pad_id)
        x, _, _ = self._decoder_states(tgt_in, self.encode(src), src_mask)
        if index is not None:
            x = x.flatten(0, 1).index_select(0, index)  # (N, d_model)
        return self.generator(x)

    def _decoder_states(
        self,
        tgt_in: Tensor,
        memory: Tensor,
        src_mask: Tensor,
        cache: Cache | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        """The decoder stack's output (B, T, d_model) before the output projection.

        With `config.decoder_start`, the decoder reads that token first: at the first step (no
        cache, or an empty one) it is put before `tgt_in`, its output dropped; a cache then
        holds it, so later steps' positions count it.
        """
        offset = self._cached_length(cache)
        start = self.config.decoder_start
        if start is not None and offset == 0:
            first = torch.full_like(tgt_in[:, :1], start)  # (B, 1)
            x, self_weights, src_weights = self._decoder_layers(
                torch.cat([first, tgt_in], dim=1), memory, src_mask, cache, need_weights, 0
            )
            # The start's own output, and the attention rows of its query, predict nothing.
            self_weights = [w[:, :, 1:] for w in self_weights]
            src_weights = [w[:, :, 1:] for w in src_weights]
            return x[:, 1:], self_weights, src_weights
        return self._decoder_layers(tgt_in, memory, src_mask, cache, need_weights, offset)

    def _decoder_layers(
        self,
        tgt_in: Tensor,
        memory: Tensor,
        src_mask: Tensor,
        cache: Cache | None,
        need_weights: bool,
        offset: int,
    ) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        """Embed `tgt_in` at positions offset.. and run the decoder stack on it."""
        x = self.dropout(self.tgt_positions(self.tgt_embed(tgt_in), offset))
        # Without a cache the decoder layers attend causally with the fused kernel's flag instead of
        # a (B, 1, T, T) mask: targets are right-padded, so that alone keeps every real position
        # off the padding. With one, a single new position sees every cached one; only several
        # new positions at once need the causal mask written out.
        tgt_mask = None
        if cache is not None and tgt_in.size(1) > 1:
            tgt_mask = causal_mask(offset + tgt_in.size(1), tgt_in.device)[:, :, offset:]
        return self.decoder(x, memory, src_mask, tgt_mask, cache, need_weights)

    @property
    def dropout_rate(self) -> float:
        """The rate every dropout of the model drops with (`SettableDropout`)."""
        return next(m.p for m in self.modules() if isinstance(m, Dropout))

    @dropout_rate.setter
    def dropout_rate(self, p: float) -> None:
        for module in self.modules():
            if isinstance(module, Dropout):
                module.p = p

    def new_cache(self) -> Cache:
        """Empty incremental decoding state to pass to `decode`."""
        return [{"self_attn": KeyValueCache(), "src_attn": {}} for _ in self.decoder.layers]

    def reorder_cache(self, cache: Cache, order: Tensor, sources: Tensor | None = None) -> Cache:
        """New cache whose batch row i is row order[i] of `cache`; see `reorder_cache`."""
        return reorder_cache(cache, order, sources)

    @staticmethod
    def _cached_length(cache: Cache | None) -> int:
        return cache[0]["self_attn"].length if cache else 0


def reorder_cache(cache: Cache, order: Tensor, sources: Tensor | None = None) -> Cache:
    """New cache whose batch row i is row order[i] of `cache`; beam search's one reordering hook.

    sources: the memory rows the next `decode` reads (`memory[sources]`), at which the
    encoder-decoder keys and values, a function of the memory alone, are kept; None: the memory
    is unchanged, so they are kept as they are, uncopied.
    """
    return [
        {
            "self_attn": layer["self_attn"].reordered(order),
            "src_attn": layer["src_attn"] if sources is None else _rows(layer["src_attn"], sources),
        }
        for layer in cache
    ]


def _rows(state: dict[str, Tensor], order: Tensor) -> dict[str, Tensor]:
    """One attention module's keys and values, at the batch rows `order`."""
    return {key: t.index_select(0, order) for key, t in state.items()}
