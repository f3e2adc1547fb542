"""RNNsearch: the encoder, the attentive decoder with its deep output layer, and its cache."""

from dataclasses import asdict
from typing import Any

import torch
from torch import Tensor, nn

from transformer_nmt.model.embeddings import Embeddings
from transformer_nmt.model.rnn.attention import AdditiveAttention
from transformer_nmt.model.rnn.config import RNNConfig
from transformer_nmt.model.rnn.encoder import BidirectionalEncoder

# The decoder's incremental state, every tensor batch-first so that one index_select reorders it:
# "h" (B, num_layers, hidden_size) the states s_{i-1} (and "c", the LSTM's cells, alike), and
# "keys" (B, S, attention_dim), U_a h_j, computed once per source.
Cache = dict[str, Tensor]

CELLS = {"gru": nn.GRUCell, "lstm": nn.LSTMCell}
# The cache's state computed from the source alone: beam moves within a sentence keep it.
FROM_SOURCE = ("keys", "memory", "mask")


class RNNAttention(nn.Module):
    """Encoder-decoder RNN with additive attention for translation (Bahdanau et al., 2015).

    Built from numbers, so that a Hydra `_target_` builds any variant: `vocab_size`, `pad_id` and
    any other field of `RNNConfig` (sizes and switches, each documented there), which
    `self.config` then holds.
    """

    def __init__(self, vocab_size: int, pad_id: int, **settings: Any):
        super().__init__()
        self.config = config = RNNConfig(vocab_size=vocab_size, pad_id=pad_id, **settings)
        E, H, L = config.embed_dim, config.hidden_size, config.num_layers
        self.src_embed = Embeddings(vocab_size, E, pad_id)
        self.tgt_embed = (
            self.src_embed if config.tie_embeddings == "all" else Embeddings(vocab_size, E, pad_id)
        )
        self.dropout = nn.Dropout(config.dropout)
        self.encoder = BidirectionalEncoder(config.cell, E, H, L, config.dropout)
        self.attention = AdditiveAttention(H, 2 * H, config.attention_dim)
        self.init_state = nn.Linear(H, L * H)  # W_s: s_0 from the backward state of the first word
        # Layer 1 reads [E y_{i-1}; c_i], the layers above the state of the one below.
        self.cells = nn.ModuleList(
            CELLS[config.cell](E + 2 * H if layer == 0 else H, H) for layer in range(L)
        )
        # U_o, V_o and C_o as one matrix over [s_i; E y_{i-1}; c_i], to 2 * E units for maxout.
        self.deep_output = nn.Linear(H + E + 2 * H, 2 * E)
        # W_o; no bias, so tying makes it exactly the target embeddings.
        self.generator = nn.Linear(E, vocab_size, bias=False)
        self._reset_embeddings()
        if config.tie_embeddings != "none":
            self.generator.weight = self.tgt_embed.weight

    @classmethod
    def from_config(cls, config: RNNConfig) -> "RNNAttention":
        return cls(**asdict(config))

    def _reset_embeddings(self) -> None:
        # Each matrix once, source first: a set's order follows addresses, not the seed.
        for embed in dict.fromkeys((self.src_embed, self.tgt_embed)):
            embed.reset_parameters()

    def encode(self, src: Tensor, need_weights: bool = False) -> Tensor | tuple[Tensor, list]:
        """Encode source ids.

        Args:
            src: (B, S) source ids, right-padded with pad_id.
            need_weights: also return the encoder's attention weights: an RNN has none, so [].

        Returns:
            annotations (B, S, 2 * hidden_size), or (annotations, []) if need_weights.
        """
        src_mask = src != self.config.pad_id  # (B, S)
        memory = self.encoder(self.dropout(self.src_embed(src)), src_mask)
        return (memory, []) if need_weights else memory

    def decode(
        self,
        tgt_in: Tensor,
        memory: Tensor,
        src_mask: Tensor,
        cache: Cache | None = None,
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, list, list[Tensor]]:
        """Next-token logits for each target position.

        Args:
            tgt_in: (B, T) target ids starting with BOS; with a cache, only the new ids.
            memory: (B, S, 2 * hidden_size) annotations from `encode`, or a row per G rows of
                tgt_in (B / G rows), repeated for its rows once, as decoding starts.
            src_mask: (B, 1, 1, S), padding_mask(src, pad_id), with memory's rows.
            cache: from `new_cache()`, updated in place: it holds the decoder state after the
                last id it has read, so decoding continues from there.
            need_weights: also return [] (no decoder self-attention) and a one-element list of
                the alignment weights alpha (B, 1, T, S), one "layer" with one "head".

        Returns:
            logits (B, T, vocab_size), or (logits, [], [alpha]) if need_weights.
        """
        features, weights = self._output_features(tgt_in, memory, src_mask[:, 0, 0], cache)
        logits = self._logits(features)
        return (logits, [], [weights[:, None]]) if need_weights else logits

    def forward(self, src: Tensor, tgt_in: Tensor, index: Tensor | None = None) -> Tensor:
        """Logits for the shifted targets, at every position or only at the indexed ones.

        Args:
            src: (B, S) source ids; tgt_in: (B, T) target ids starting with BOS.
            index: (N,) flat indices into the B * T target positions (row-major); only these go
                through the output layer.

        Returns:
            (B, T, vocab_size) logits, or (N, vocab_size) with index.
        """
        src_mask = src != self.config.pad_id
        features, _ = self._output_features(tgt_in, self.encode(src), src_mask)
        if index is not None:
            features = features.flatten(0, 1).index_select(0, index)  # (N, H + E + 2H)
        return self._logits(features)

    def new_cache(self) -> Cache:
        """Empty incremental decoding state to pass to `decode`."""
        return {}

    def reorder_cache(self, cache: Cache, order: Tensor, sources: Tensor | None = None) -> Cache:
        """New cache whose batch row i is row order[i] of `cache`.

        sources: None, each row reads the source row order[i] read, so what the cache holds of
        the source (a row's own memory, mask and keys U_a h_j) is kept where the rows stay as
        many (they only move among one sentence's rows, which hold the same); else it moves with
        the rows too.
        """
        return {
            name: (
                t
                if sources is None and name in FROM_SOURCE and len(order) == len(t)
                else t.index_select(0, order)
            )
            for name, t in cache.items()
        }

    def _start(self, memory: Tensor, src_mask: Tensor, rows: int) -> Cache:
        """The state of `rows` rows before the first target id: s_0 = tanh(W_s <-h_1) for every
        layer, and each row's memory, mask (B, S) and keys; a sentence's rows repeat its own."""
        if (groups := rows // memory.size(0)) > 1:
            memory = memory.repeat_interleave(groups, 0)
            src_mask = src_mask.repeat_interleave(groups, 0)
        B, H = memory.size(0), self.config.hidden_size
        h = torch.tanh(self.init_state(memory[:, 0, H:])).view(B, -1, H)  # (B, L, H)
        keys = self.attention.keys(memory)
        state = {"h": h, "keys": keys, "memory": memory, "mask": src_mask}
        if self.config.cell == "lstm":
            state["c"] = torch.zeros_like(h)
        return state

    def _output_features(
        self, tgt_in: Tensor, memory: Tensor, src_mask: Tensor, cache: Cache | None = None
    ) -> tuple[Tensor, Tensor]:
        """[s_i; E y_{i-1}; c_i] (B, T, H + E + 2H) and alpha (B, T, S), one decoder step per id.

        src_mask: (B, S), True at real source positions; memory and src_mask may have a row per
        G rows of tgt_in, and are read only as decoding starts (then the cache holds them).
        """
        if cache is None:
            state = self._start(memory, src_mask, tgt_in.size(0))
        else:
            if not cache:
                cache.update(self._start(memory, src_mask, tgt_in.size(0)))
            state = cache
        h, c, keys = state["h"], state.get("c"), state["keys"]
        memory, src_mask = state["memory"], state["mask"]
        embedded = self.dropout(self.tgt_embed(tgt_in))  # (B, T, E)
        features, weights = [], []
        for t in range(tgt_in.size(1)):
            # The alignment reads s_{i-1}, the top layer's state before this step.
            context, alpha = self.attention(h[:, -1], keys, memory, src_mask)
            h, c = self._step(torch.cat([embedded[:, t], context], dim=-1), h, c)
            features.append(torch.cat([h[:, -1], embedded[:, t], context], dim=-1))
            weights.append(alpha)
        if cache is not None:
            cache["h"] = h
            if c is not None:
                cache["c"] = c
        return torch.stack(features, dim=1), torch.stack(weights, dim=1)

    def _step(self, x: Tensor, h: Tensor, c: Tensor | None) -> tuple[Tensor, Tensor | None]:
        """One step of the stacked cells: x (B, E + 2H), h and c (B, L, H) -> new h and c."""
        new_h, new_c = [], []
        for layer, cell in enumerate(self.cells):
            if layer:
                x = self.dropout(x)
            if c is None:
                x = cell(x, h[:, layer])
            else:
                x, c_layer = cell(x, (h[:, layer], c[:, layer]))
                new_c.append(c_layer)
            new_h.append(x)
        return torch.stack(new_h, dim=1), torch.stack(new_c, dim=1) if new_c else None

    def _logits(self, features: Tensor) -> Tensor:
        """Deep output with maxout, then W_o: (..., H + E + 2H) -> (..., vocab_size)."""
        t = self.deep_output(features)  # (..., 2E)
        t = t.unflatten(-1, (-1, 2)).amax(dim=-1)  # maxout over pairs of units: (..., E)
        return self.generator(self.dropout(t))
