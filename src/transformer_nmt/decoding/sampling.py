"""Sampling translations (back-translation, diversity, MBR's candidates): temperature, top-k,
top-p (nucleus) and epsilon sampling.

Each sample draws its ids from its own random stream, seeded by (seed, the sentence's index in
the input, the sample's number): the same input gives the same samples whatever the batches it is
decoded in, and a sentence's samples do not depend on its neighbours.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from transformer_nmt.decoding.search import (
    Hypothesis,
    _max_lengths,
    _never_ids,
    _next_log_probs,
    force,
    forced_ids,
    length_penalty,
    scored,
)
from transformer_nmt.model.interface import EncoderDecoder
from transformer_nmt.model.masks import padding_mask


@dataclass(frozen=True)
class Sampling:
    """How to sample: `n` samples a sentence from the model's distribution, reshaped.

    Args:
        n: samples a sentence.
        temperature: log-probabilities are divided by it; below 1 sharpens, above 1 flattens.
        top_k: sample among the k most likely ids only; None: all.
        top_p: sample among the fewest most likely ids whose probability reaches p (Holtzman et
            al., 2020); 1: all.
        seed: with the sentence's index and the sample's number, seeds each sample's stream.
        epsilon: sample among the ids of probability at least epsilon only (after temperature),
            the most likely always kept (Hewitt et al., 2022; the candidates Freitag et al., 2023
            found best for MBR); 0: all.
    """

    n: int = 1
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float = 1.0
    seed: int = 0
    epsilon: float = 0.0

    def __post_init__(self) -> None:
        rules = {  # name: (holds, the rule)
            "n": (self.n >= 1, ">= 1"),
            "temperature": (math.isfinite(self.temperature) and self.temperature > 0, "> 0"),
            "top_k": (self.top_k is None or self.top_k >= 1, ">= 1 (or None: no limit)"),
            "top_p": (0 < self.top_p <= 1, "in (0, 1]"),
            "seed": (self.seed >= 0, ">= 0"),
            "epsilon": (0 <= self.epsilon < 1, "in [0, 1)"),
        }
        for name, (holds, rule) in rules.items():
            if not holds:
                raise ValueError(f"sampling {name} must be {rule}, got {getattr(self, name)}")


@torch.no_grad()
def sample(
    model: EncoderDecoder,
    src: Tensor,
    bos_id: int,
    eos_id: int,
    sampling: Sampling,
    indices: Sequence[int],
    max_len_b: int = 50,
    alpha: float = 0.0,
    penalty: str = "gnmt",
    use_cache: bool = True,
    target_prefixes: list[list[int]] | None = None,
) -> list[list[Hypothesis]]:
    """`sampling.n` sampled outputs of each sentence, batched like beam search's beams.

    The caller sets eval mode. PAD and BOS are never drawn. top_k=1 is greedy search.

    Args:
        model: any `EncoderDecoder`.
        src: (B, S) source ids, right-padded with model.config.pad_id.
        bos_id, eos_id: begin- and end-of-sentence ids.
        sampling: temperature, top-k, top-p, samples a sentence and seed.
        indices: (B,) each sentence's index in the whole input, for its random streams.
        max_len_b: outputs stop at source length + max_len_b ids.
        alpha, penalty: a sample's `normalized` score divides its `score`, its log-probability
            under the model (without temperature or truncation, as `nmt-score` gives it), by
            length_penalty(|Y|, alpha, penalty).
        use_cache: False recomputes the whole prefix every step (same output, slower).
        target_prefixes: per sentence, target ids (without BOS) every sample starts with.

    Returns:
        For each sentence, in input order, its n samples in the order drawn.
    """
    length_penalty(1, alpha, penalty)  # fail on an unknown form before any work
    pad_id, n = model.config.pad_id, sampling.n
    B, device = src.size(0), src.device
    rows = torch.arange(B, device=device).repeat_interleave(n)  # sample j of b: row b * n + j
    # A sentence's samples share its memory (row b), which the model reads once for all n.
    src_mask = padding_mask(src, pad_id)  # (B, 1, 1, S)
    memory = model.encode(src)  # (B, S, d)
    max_lens = _max_lengths(model, src_mask, max_len_b)[rows]  # (R,)
    steps = int(max_lens.max())
    uniforms = _uniforms(sampling.seed, indices, n, steps).to(device)  # (R, steps)
    cache = model.new_cache() if use_cache else None
    forced = forced_ids(target_prefixes, device)
    forced = None if forced is None else forced[rows]
    never = _never_ids(model, bos_id, device)
    ys = torch.full((B * n, 1), bos_id, dtype=torch.long, device=device)  # (R, 1 + t)
    log_prob = torch.zeros(B * n, device=device)
    lengths = torch.zeros(B * n, dtype=torch.long, device=device)
    finished = torch.zeros(B * n, dtype=torch.bool, device=device)
    for t in range(steps):
        if t == 0 and n > 1:  # a sentence's n rows are the same BOS: one goes through the model
            log_probs = _next_log_probs(model, ys[::n], memory, src_mask, cache, never)[rows]
            cache = None if cache is None else model.reorder_cache(cache, rows)  # to n rows
        else:
            log_probs = _next_log_probs(model, ys, memory, src_mask, cache, never)
        log_probs = force(log_probs, forced, t)
        tokens = draw(log_probs, sampling, uniforms[:, t]).masked_fill(finished, pad_id)  # (R,)
        log_prob += log_probs.gather(1, tokens[:, None])[:, 0].masked_fill(finished, 0.0)
        lengths += (~finished).long()
        ys = torch.cat([ys, tokens[:, None]], dim=1)
        finished |= (tokens == eos_id) | (t + 1 >= max_lens)
        if finished.all():  # the step's one device-to-host sync
            break
    return _hypotheses(ys[:, 1:], log_prob, lengths, n, alpha, penalty)


def draw(log_probs: Tensor, sampling: Sampling, uniforms: Tensor) -> Tensor:
    """(R, V) log-probabilities, (R,) uniforms in [0, 1) -> (R,) ids, by the inverse of the CDF
    of the reshaped distribution: over the top-k ids, over the ids sorted most likely first for
    top-p, else over every id in id order (no sort: a step's costliest part otherwise)."""
    scaled = log_probs / sampling.temperature
    if sampling.epsilon > 0:
        rare = scaled.softmax(dim=-1) < sampling.epsilon
        rare &= scaled < scaled.amax(dim=-1, keepdim=True)  # the most likely always stays
        scaled = scaled.masked_fill(rare, float("-inf"))
    ids = None  # the ids of the columns of `values`; None: every id, in id order
    if sampling.top_k is not None:
        values, ids = scaled.topk(min(sampling.top_k, scaled.size(-1)), dim=-1)
    elif sampling.top_p < 1:
        values, ids = scaled.sort(dim=-1, descending=True)
    else:
        values = scaled
    probs = values.softmax(dim=-1)  # (R, C)
    if sampling.top_p < 1:  # `values` are sorted, most likely first
        before = probs.cumsum(dim=-1) - probs  # the mass of the more likely ids
        probs = probs.masked_fill(before >= sampling.top_p, 0.0)  # the most likely always stays
    cdf = probs.cumsum(dim=-1)
    target = uniforms.to(cdf.dtype)[:, None] * cdf[:, -1:]
    picks = torch.searchsorted(cdf, target, right=True)  # (R, 1)
    # u * total may round up to the total: stay on the last id of nonzero probability.
    last = _last_nonzero(probs)
    picks = torch.minimum(picks, last)
    return (picks if ids is None else ids.gather(1, picks))[:, 0]


def _last_nonzero(probs: Tensor) -> Tensor:
    """(R, C) -> (R, 1) the column of each row's last nonzero probability."""
    columns = torch.arange(probs.size(-1), device=probs.device)
    return torch.where(probs > 0, columns, -1).amax(dim=-1, keepdim=True)


def _uniforms(seed: int, indices: Sequence[int], n: int, steps: int) -> Tensor:
    """(len(indices) * n, steps) uniforms: row b * n + j the stream of sample j of sentence b."""
    streams = [
        np.random.default_rng([seed, index, j]).random(steps) for index in indices for j in range(n)
    ]
    return torch.from_numpy(np.stack(streams)).float()


def _hypotheses(
    ids: Tensor, log_prob: Tensor, lengths: Tensor, n: int, alpha: float, penalty: str
) -> list[list[Hypothesis]]:
    """Per sentence, its n samples, each cut after its EOS and scored."""
    rows = zip(ids.tolist(), log_prob.tolist(), lengths.tolist(), strict=True)
    out = [scored(tokens[:length], lp, alpha, penalty) for tokens, lp, length in rows]
    return [out[b * n : (b + 1) * n] for b in range(len(out) // n)]
