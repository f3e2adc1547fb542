"""The straightforward recipe a newcomer writes: nn.Transformer, and searches without a cache.

One of the peers (peers.py): a shared embedding, sinusoidal positions, `nn.Transformer` and a
tied output projection; greedy and beam search recompute the decoder on the whole prefix.
"""

import math
import warnings

import torch
from torch import Tensor, nn

from transformer_nmt.data.tokenizer import BOS_ID, EOS_ID, PAD_ID

ALPHA = 0.6  # length penalty exponent (paper, section 6.1)
# nn.Transformer's encoder runs on nested tensors at inference, and says so on every call.
warnings.filterwarnings("ignore", message="The PyTorch API of nested tensors is in prototype")


def sinusoids(length: int, d_model: int) -> Tensor:
    """(length, d_model) sinusoidal position encodings (section 3.5)."""
    position = torch.arange(length)[:, None]
    inv_freq = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
    table = torch.zeros(length, d_model)
    table[:, 0::2] = torch.sin(position * inv_freq)
    table[:, 1::2] = torch.cos(position * inv_freq)
    return table


class TorchTransformer(nn.Module):
    """The straightforward recipe: shared embedding, positions, nn.Transformer, tied projection."""

    def __init__(
        self, vocab: int, N: int, d_model: int, d_ff: int, h: int, dropout: float = 0.1,
        max_positions: int = 1024,
    ):  # fmt: skip
        super().__init__()
        self.scale = math.sqrt(d_model)
        self.embed = nn.Embedding(vocab, d_model, padding_idx=PAD_ID)
        self.register_buffer("positions", sinusoids(max_positions, d_model), persistent=False)
        self.dropout = nn.Dropout(dropout)
        self.transformer = nn.Transformer(d_model, h, N, N, d_ff, dropout, batch_first=True)
        self.out = nn.Linear(d_model, vocab, bias=False)
        self.out.weight = self.embed.weight

    def embed_tokens(self, ids: Tensor) -> Tensor:
        return self.dropout(self.embed(ids) * self.scale + self.positions[: ids.size(1)])

    def encode(self, src: Tensor) -> Tensor:
        """(B, S) -> memory (B, S, d_model)."""
        return self.transformer.encoder(self.embed_tokens(src), src_key_padding_mask=src == PAD_ID)

    def decode_states(self, tgt_in: Tensor, memory: Tensor, src_pad: Tensor) -> Tensor:
        """(B, T) -> (B, T, d_model); src_pad (B, S) is True at padding (nn.Transformer's way)."""
        T = tgt_in.size(1)
        future = torch.ones(T, T, dtype=torch.bool, device=tgt_in.device).triu(1)  # True = blocked
        return self.transformer.decoder(
            self.embed_tokens(tgt_in),
            memory,
            tgt_mask=future,
            tgt_is_causal=True,
            tgt_key_padding_mask=tgt_in == PAD_ID,
            memory_key_padding_mask=src_pad,
        )

    def next_logits(self, prefix: Tensor, memory: Tensor, src_pad: Tensor) -> Tensor:
        """(B, T) prefixes -> (B, V) logits of the next token, from the whole prefix (no cache)."""
        return self.out(self.decode_states(prefix, memory, src_pad)[:, -1])

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """(B, S), (B, T) -> logits (B, T, V)."""
        return self.out(self.decode_states(tgt_in, self.encode(src), src == PAD_ID))


@torch.no_grad()
def uncached_greedy(model: TorchTransformer, src: Tensor, max_len_b: int) -> Tensor:
    """Greedy search recomputing the decoder on the whole prefix every step; (B, T_out) ids."""
    src_pad = src == PAD_ID
    memory = model.encode(src)
    max_lens = (~src_pad).sum(1) + max_len_b  # (B,)
    ys = torch.full((src.size(0), 1), BOS_ID, dtype=torch.long)  # (B, 1 + t)
    finished = torch.zeros(src.size(0), dtype=torch.bool)
    for t in range(int(max_lens.max())):
        logits = model.next_logits(ys, memory, src_pad)  # (B, V)
        logits[:, [PAD_ID, BOS_ID]] = float("-inf")
        tokens = logits.argmax(-1).masked_fill(finished, PAD_ID)
        ys = torch.cat([ys, tokens[:, None]], dim=1)
        finished |= (tokens == EOS_ID) | (t + 1 >= max_lens)
        if finished.all():
            break
    return ys[:, 1:]


@torch.no_grad()
def uncached_beam(model: TorchTransformer, src: Tensor, max_len_b: int, beam: int) -> Tensor:
    """Plain batched beam search without a cache; (B, T_out) ids of each sentence's best beam.

    A finished beam extends only with padding at no cost, so it keeps its score and place; the
    search runs until every beam has finished. Beams are ranked by the GNMT length penalty.
    """
    B, K = src.size(0), beam
    src_pad = src == PAD_ID
    max_lens = ((~src_pad).sum(1) + max_len_b).repeat_interleave(K)  # (B * K,)
    memory = model.encode(src).repeat_interleave(K, dim=0)  # (B * K, S, d_model)
    src_pad = src_pad.repeat_interleave(K, dim=0)
    ys = torch.full((B * K, 1), BOS_ID, dtype=torch.long)  # (B * K, 1 + t)
    scores = torch.full((B, K), float("-inf"))
    scores[:, 0] = 0.0  # K identical BOS beams: only the first may expand
    finished = torch.zeros(B * K, dtype=torch.bool)
    first_row = torch.arange(B)[:, None] * K  # (B, 1)
    for t in range(int(max_lens.max())):
        log_probs = model.next_logits(ys, memory, src_pad).float().log_softmax(-1)  # (B*K, V)
        log_probs[:, [PAD_ID, BOS_ID]] = float("-inf")
        log_probs[finished] = float("-inf")
        log_probs[finished, PAD_ID] = 0.0
        V = log_probs.size(-1)
        candidates = (scores.view(-1, 1) + log_probs).view(B, K * V)
        scores, ids = candidates.topk(K, dim=1)  # (B, K)
        rows = (first_row + ids // V).view(-1)  # (B * K,) the beam each candidate extends
        tokens = (ids % V).view(-1)
        ys = torch.cat([ys[rows], tokens[:, None]], dim=1)
        finished = finished[rows] | (tokens == EOS_ID) | (t + 1 >= max_lens)
        if finished.all():
            break
    lengths = (ys[:, 1:] != PAD_ID).sum(1)
    penalized = scores.view(-1) / ((5 + lengths) / 6) ** ALPHA
    best = penalized.view(B, K).argmax(1) + first_row[:, 0]
    return ys[best, 1:]
