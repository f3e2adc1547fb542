"""Several models decoding as one: their log-probabilities averaged, with optional weights.

The ensemble is itself an `EncoderDecoder`, so greedy, beam search and sampling run it unchanged:
its memory is the members' memories side by side on the feature axis (beam search selects rows of
it as of any memory), its cache one cache per member, reordered by each member's own rule.
"""

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from transformer_nmt.model.interface import Cache, EncoderDecoder


@dataclass
class EnsembleConfig:
    """What search reads of a model's config, for the members together."""

    family: ClassVar[str] = "ensemble"
    vocab_size: int
    pad_id: int
    max_positions: int  # the smallest member's: every member reads and writes within it
    d_model: int

    def to_dict(self) -> dict[str, Any]:
        raise TypeError("an ensemble is not saved as one model: save its members")


class Ensemble(nn.Module):
    """Members over one vocabulary whose next-token distribution is their weighted geometric mean.

    `decode` returns sum_i w_i * logits_i (the weights scaled to sum to 1). Search's log_softmax of
    that equals the renormalised weighted average of the members' log-probabilities, because each
    member's log_softmax differs from its logits by a constant per row (Marian's `--weights`, and
    fairseq's ensembles up to averaging log-probabilities rather than probabilities). One member
    with weight 1, or identical members, give that member's logits bit for bit.

    Args:
        members: models sharing vocab_size and pad_id (any families).
        weights: one positive number per member; None weighs them equally.
    """

    def __init__(self, members: list[EncoderDecoder], weights: list[float] | None = None):
        super().__init__()
        if not members:
            raise ValueError("an ensemble needs at least one member")
        self.weights = normalized_weights(weights, len(members))
        first = members[0].config
        for i, member in enumerate(members[1:], start=2):
            shape = (member.config.vocab_size, member.config.pad_id)
            if shape != (first.vocab_size, first.pad_id):
                raise ValueError(
                    f"member {i} has a vocabulary of {shape[0]} with padding id {shape[1]}, "
                    f"member 1 {first.vocab_size} with {first.pad_id}: members share one vocabulary"
                )
        self.members = nn.ModuleList(members)
        self.config = EnsembleConfig(
            vocab_size=first.vocab_size,
            pad_id=first.pad_id,
            max_positions=min(m.config.max_positions for m in members),
            d_model=first.d_model,
        )
        self._widths: list[int] | None = None  # each member's memory width, known at `encode`

    def encode(self, src: Tensor, need_weights: bool = False) -> Tensor:
        """(B, S) -> (B, S, sum of the members' widths): each member's memory, side by side."""
        if need_weights:
            raise ValueError("an ensemble has no one encoder's attention: ask a member")
        memories = [member.encode(src) for member in self.members]
        self._widths = [memory.size(-1) for memory in memories]
        return torch.cat(memories, dim=-1)

    def decode(
        self,
        tgt_in: Tensor,
        memory: Tensor,
        src_mask: Tensor,
        cache: Cache | None = None,
        need_weights: bool = False,
    ) -> Tensor:
        """(B, T, V) float32: the members' logits, weighted and summed (see the class)."""
        if need_weights:
            raise ValueError("an ensemble has no one attention: ask a member for its alignments")
        if self._widths is None:
            raise RuntimeError("decode reads the memory of this ensemble's `encode`")
        caches = [None] * len(self.members) if cache is None else cache
        parts = memory.split(self._widths, dim=-1)
        total = None
        for member, weight, part, member_cache in zip(
            self.members, self.weights, parts, caches, strict=True
        ):
            logits = member.decode(tgt_in, part, src_mask, member_cache).float() * weight
            total = logits if total is None else total + logits
        return total

    def forward(self, src: Tensor, tgt_in: Tensor, index: Tensor | None = None) -> Tensor:
        """Teacher-forced weighted logits: (B, T, V), or (N, V) at the flat positions `index`."""
        total = None
        for member, weight in zip(self.members, self.weights, strict=True):
            logits = member(src, tgt_in, index).float() * weight
            total = logits if total is None else total + logits
        return total

    def new_cache(self) -> Cache:
        return [member.new_cache() for member in self.members]

    def reorder_cache(self, cache: Cache, order: Tensor, sources: Tensor | None = None) -> Cache:
        return [
            member.reorder_cache(c, order, sources)
            for member, c in zip(self.members, cache, strict=True)
        ]


def normalized_weights(weights: list[float] | None, n: int) -> list[float]:
    """One positive weight per member, scaled to sum to 1; None: equal weights."""
    weights = [1.0] * n if weights is None else [float(w) for w in weights]
    if len(weights) != n:
        raise ValueError(f"{len(weights)} ensemble weights for {n} members: give one each")
    if not all(math.isfinite(w) and w > 0 for w in weights):
        raise ValueError(f"ensemble weights must be finite and > 0, got {weights}")
    return [w / sum(weights) for w in weights]
