"""The RNN encoder-decoder with additive attention (Bahdanau, Cho and Bengio, 2015; "RNNsearch").

The system the Transformer set out to replace, behind the same `EncoderDecoder` interface:
- a bidirectional RNN encoder whose annotations h_j = [->h_j; <-h_j] concatenate the forward and
  backward states;
- a decoder RNN, s_i = f(s_{i-1}, y_{i-1}, c_i), started from s_0 = tanh(W_s <-h_1);
- the context c_i = sum_j alpha_ij h_j, alpha_ij = softmax_j(e_ij) over the real source
  positions, e_ij = v_a^T tanh(W_a s_{i-1} + U_a h_j);
- the paper's deep output layer with maxout (its appendix A.2.2): t_i = maxout(U_o s_i +
  V_o E y_{i-1} + C_o c_i), p(y_i) = softmax(W_o t_i). Maxout keeps the larger of each pair of
  units; t_i has embed_dim units so that W_o can be the target embedding matrix.

The cell is a GRU by default: the paper's "gated hidden unit" is the GRU (Cho et al., 2014),
which matches the LSTM in translation quality with three gates instead of four, so fewer
parameters and faster steps on a CPU. `cell="lstm"` switches both encoder and decoder.
"""

from dataclasses import asdict
from typing import Any

import torch
from torch import Tensor, nn

from transformer_nmt.model.embeddings import Embeddings
from transformer_nmt.model.rnn_config import RNNConfig

# The decoder's incremental state, every tensor batch-first so that one index_select reorders it:
# "h" (B, num_layers, hidden_size) the states s_{i-1} (and "c", the LSTM's cells, alike), and
# "keys" (B, S, attention_dim), U_a h_j, computed once per source.
Cache = dict[str, Tensor]

RNNS = {"gru": nn.GRU, "lstm": nn.LSTM}
CELLS = {"gru": nn.GRUCell, "lstm": nn.LSTMCell}


def reversal_index(src_mask: Tensor) -> Tensor:
    """(B, S) gather index reversing each row's real positions in place; padding stays put.

    Its own inverse. A backward RNN reading the reversed rows meets padding only after every real
    token, so its states at real positions do not depend on how much padding follows.
    """
    lengths = src_mask.sum(dim=1, keepdim=True)  # (B, 1)
    positions = torch.arange(src_mask.size(1), device=src_mask.device)  # (S,)
    return torch.where(positions < lengths, lengths - 1 - positions, positions)


class BidirectionalEncoder(nn.Module):
    """Layers of a forward and a backward RNN; each layer reads the one below's annotations."""

    def __init__(
        self, cell: str, input_size: int, hidden_size: int, num_layers: int, dropout: float
    ):
        super().__init__()
        sizes = [input_size] + [2 * hidden_size] * (num_layers - 1)
        self.forward_rnns = nn.ModuleList(
            RNNS[cell](n, hidden_size, batch_first=True) for n in sizes
        )
        self.backward_rnns = nn.ModuleList(
            RNNS[cell](n, hidden_size, batch_first=True) for n in sizes
        )
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, src_mask: Tensor) -> Tensor:
        """x (B, S, input_size), src_mask (B, S) -> annotations (B, S, 2 * hidden_size)."""
        reverse = reversal_index(src_mask)[:, :, None]  # (B, S, 1)
        for layer, (forward_rnn, backward_rnn) in enumerate(
            zip(self.forward_rnns, self.backward_rnns, strict=True)
        ):
            if layer:
                x = self.dropout(x)
            forwards, _ = forward_rnn(x)  # (B, S, H)
            backwards, _ = backward_rnn(x.gather(1, reverse.expand_as(x)))
            backwards = backwards.gather(1, reverse.expand_as(backwards))  # back in source order
            x = torch.cat([forwards, backwards], dim=-1)
        return x


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
        # As the Transformer's: N(0, embed_dim^-0.5), so the sqrt(embed_dim)-scaled embeddings
        # start at unit scale and tied output logits at about unit scale; padding stays zero.
        for embed in {self.src_embed, self.tgt_embed}:
            nn.init.normal_(embed.weight, 0.0, self.config.embed_dim**-0.5)
            with torch.no_grad():
                embed.weight[self.config.pad_id].zero_()

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
            memory: (B, S, 2 * hidden_size) annotations from `encode`.
            src_mask: (B, 1, 1, S), padding_mask(src, pad_id).
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

    def reorder_cache(self, cache: Cache, order: Tensor, same_source: bool = False) -> Cache:
        """New cache whose batch row i is row order[i] of `cache`.

        same_source: row i reads the same source as row order[i], so the keys U_a h_j are kept.
        """
        return {
            name: t if same_source and name == "keys" else t.index_select(0, order)
            for name, t in cache.items()
        }

    def _start(self, memory: Tensor) -> Cache:
        """The state before the first target id: s_0 = tanh(W_s <-h_1) for every layer."""
        B, H = memory.size(0), self.config.hidden_size
        h = torch.tanh(self.init_state(memory[:, 0, H:])).view(B, -1, H)  # (B, L, H)
        state = {"h": h, "keys": self.attention.keys(memory)}
        if self.config.cell == "lstm":
            state["c"] = torch.zeros_like(h)
        return state

    def _output_features(
        self, tgt_in: Tensor, memory: Tensor, src_mask: Tensor, cache: Cache | None = None
    ) -> tuple[Tensor, Tensor]:
        """[s_i; E y_{i-1}; c_i] (B, T, H + E + 2H) and alpha (B, T, S), one decoder step per id.

        src_mask: (B, S), True at real source positions.
        """
        if cache is None:
            state = self._start(memory)
        else:
            if not cache:
                cache.update(self._start(memory))
            state = cache
        h, c, keys = state["h"], state.get("c"), state["keys"]
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
