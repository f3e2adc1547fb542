"""Forced decoding of encoded batches: the model's scores of given translations.

`Translator.score` reads, encodes and batches the pairs as it does for translation and hands each
batch here, as it hands batches to its search engine.
"""

from collections.abc import Iterable, Iterator
from typing import NamedTuple

import torch

from transformer_nmt.data.framing import (
    ADDED_TOKENS,
    PLAIN,
    Frame,
    decoder_input,
    decoder_target,
    pad_batch,
    source_batch,
)
from transformer_nmt.decoding.forced import cross_attention, token_log_probs
from transformer_nmt.inference.alignment import Alignment, pharaoh
from transformer_nmt.model import EncoderDecoder


class TargetScore(NamedTuple):
    """What the model gives a target: its score, log P(target + EOS | source) as search and
    sampling score a hypothesis (`Hypothesis.score`); that over the target's tokens (EOS
    included); and on request each token's log-probability and the alignment."""

    score: float
    mean: float
    token_log_probs: list[float] | None = None
    alignment: str | None = None


def read_pairs(sources: Iterable[str], targets: Iterable[str]) -> Iterator[tuple[str, str]]:
    """(source, target) pairs; one side ending first is an error naming the line."""
    targets, count = iter(targets), 0
    for source in sources:
        count += 1
        target = next(targets, None)
        if target is None:
            raise ValueError(f"line {count}: a source without a target, the targets ended before")
        yield source, target
    if next(targets, None) is not None:
        raise ValueError(f"more targets than the {count} sources")


def check_targets(targets: list[list[int]], lines: list[int], max_positions: int) -> None:
    """Refuse, naming its line, a target longer than the model can score whole."""
    limit = max_positions - ADDED_TOKENS  # BOS or EOS beside the target
    for line, target in zip(lines, targets, strict=True):
        if len(target) > limit:
            raise ValueError(
                f"line {line}: the target has {len(target)} tokens, more than the model's "
                f"{limit}: it cannot be scored whole"
            )


def score_batch(
    model: EncoderDecoder,
    device: torch.device,
    src_ids: list[list[int]],
    tgt_ids: list[list[int]],
    autocast: torch.dtype | None = None,
    per_token: bool = False,
    aligning: tuple[Alignment, list[str]] | None = None,
    frame: Frame = PLAIN,
) -> list[TargetScore]:
    """Each (source, target)'s `TargetScore`.

    Args:
        model, device: the model (an `Ensemble` too) and where it runs.
        src_ids, tgt_ids: one batch of token ids, without BOS or EOS.
        autocast: compute in this dtype under `torch.autocast`, as `TorchSearch` does.
        per_token: also each target token's log-probability, EOS last.
        aligning: the attention that aligns (not an ensemble's) and the vocabulary's
            tokens; None aligns nothing.
        frame: a multilingual model's tag, framing the pairs as translation framed them.
    """
    prefix = frame.source_prefix
    src = source_batch(src_ids, model.config.max_positions, prefix).to(device)
    tgt_in = pad_batch([decoder_input(t, frame.bos_id) for t in tgt_ids]).to(device)
    tgt_out = pad_batch([decoder_target(t) for t in tgt_ids]).to(device)
    with torch.autocast(device.type, dtype=autocast, enabled=autocast is not None):
        log_probs = token_log_probs(model, src, tgt_in, tgt_out).cpu()  # (B, T)
        weights = None
        if aligning is not None:
            alignment, vocab = aligning
            weights = cross_attention(model, src, tgt_in, alignment.index).cpu()  # (B, h, T, S)
            weights = weights[..., len(prefix) :]  # a source tag is no word of the sentence
    out = []
    for b, (source, target) in enumerate(zip(src_ids, tgt_ids, strict=True)):
        per_id = log_probs[b, : len(target) + ADDED_TOKENS].tolist()
        total = sum(per_id)
        aligned = None
        if weights is not None:
            aligned = pharaoh(weights[b], source, target, vocab, alignment.heads)
        out.append(TargetScore(total, total / len(per_id), per_id if per_token else None, aligned))
    return out
