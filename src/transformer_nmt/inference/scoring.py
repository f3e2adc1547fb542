"""Scores of given translations (forced decoding), the engine behind `Translator.score`.

Pairs are read in chunks, sorted by source length and scored in batches as translation decodes,
and given back in input order.
"""

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import TYPE_CHECKING, NamedTuple

import torch

from transformer_nmt.data.framing import (
    ADDED_TOKENS,
    decoder_input,
    decoder_target,
    pad_batch,
    source_batch,
)
from transformer_nmt.decoding.ensemble import Ensemble
from transformer_nmt.decoding.forced import cross_attention, token_log_probs
from transformer_nmt.inference.alignment import Alignment, pharaoh

if TYPE_CHECKING:
    from transformer_nmt.inference.translator import Translator


class TargetScore(NamedTuple):
    """What the model gives a target: log P(target + EOS | source), that over the target's
    tokens (EOS included), and on request each token's log-probability and the alignment."""

    log_prob: float
    score: float
    token_log_probs: list[float] | None = None
    alignment: str | None = None


def score_stream(
    translator: "Translator",
    sources: Iterable[str],
    targets: Iterable[str],
    batch_size: int = 64,
    max_tokens: int | None = None,
    per_token: bool = False,
    alignment: Alignment | None = None,
    chunk: int = 64,
    start: int = 0,
) -> Iterator[TargetScore]:
    """Each (source, target)'s `TargetScore`, in input order; arguments as `Translator.score`.

    chunk: pairs read, sorted and batched together; start: the index of the first pair in a
    larger input (line numbers in errors).
    """
    if translator.engine != "torch":
        raise ValueError(f"scoring runs on engine 'torch', not {translator.engine!r}")
    for name, value in (("batch_size", batch_size), ("max_tokens", max_tokens)):
        if value is not None and value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if alignment is not None and isinstance(translator.model, Ensemble):
        raise ValueError("alignments are one model's attention: score them without an ensemble")
    pairs = _pairs(sources, targets)
    first_line, sizes = start + 1, (batch_size, max_tokens)
    vocab = None if alignment is None else translator.tokenizer.tokens()
    while pairs_read := list(islice(pairs, chunk)):
        aligning = (alignment, vocab)
        yield from _score_chunk(translator, pairs_read, first_line, sizes, per_token, aligning)
        first_line += len(pairs_read)


def _pairs(sources: Iterable[str], targets: Iterable[str]) -> Iterator[tuple[str, str]]:
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


def _score_chunk(
    translator: "Translator",
    chunk: list[tuple[str, str]],
    first_line: int,
    sizes: tuple[int, int | None],
    per_token: bool,
    aligning: tuple[Alignment | None, list[str] | None],
) -> list[TargetScore]:
    lines = [first_line + i for i in range(len(chunk))]
    sources = translator._encode([s.strip() for s, _ in chunk], lines)
    targets = translator.tokenizer.encode_batch([t.strip() for _, t in chunk], side="target")
    limit = translator.search.max_positions - ADDED_TOKENS  # BOS or EOS beside the target
    for line, target in zip(lines, targets, strict=True):
        if len(target) > limit:
            raise ValueError(
                f"line {line}: the target has {len(target)} tokens, more than the model's "
                f"{limit}: it cannot be scored whole"
            )
    tokens = dict(enumerate(sources))
    # Both sides alike in a batch: a long target beside short ones would pad them all.
    by_length = sorted(tokens, key=lambda i: len(tokens[i]) + len(targets[i]))
    results: list[TargetScore | None] = [None] * len(chunk)
    for batch in translator._batches(by_length, tokens, *sizes):
        src_ids, tgt_ids = [sources[i] for i in batch], [targets[i] for i in batch]
        found = _score_batch(translator, src_ids, tgt_ids, per_token, aligning)
        for i, result in zip(batch, found, strict=True):
            results[i] = result
    return results


def _score_batch(
    translator: "Translator",
    src_ids: list[list[int]],
    tgt_ids: list[list[int]],
    per_token: bool,
    aligning: tuple[Alignment | None, list[str] | None],
) -> list[TargetScore]:
    """aligning: the attention that aligns (None: none) and the vocabulary's tokens."""
    alignment, vocab = aligning
    model, device = translator.model, translator.device
    src = source_batch(src_ids, translator.search.max_positions).to(device)
    tgt_in = pad_batch([decoder_input(t) for t in tgt_ids]).to(device)
    tgt_out = pad_batch([decoder_target(t) for t in tgt_ids]).to(device)
    autocast = translator.search.autocast
    with torch.autocast(device.type, dtype=autocast, enabled=autocast is not None):
        log_probs = token_log_probs(model, src, tgt_in, tgt_out).cpu()  # (B, T)
        weights = None
        if alignment is not None:
            weights = cross_attention(model, src, tgt_in, alignment.index).cpu()  # (B, h, T, S)
    out = []
    for b, (source, target) in enumerate(zip(src_ids, tgt_ids, strict=True)):
        per_id = log_probs[b, : len(target) + ADDED_TOKENS].tolist()
        total = sum(per_id)
        aligned = None
        if weights is not None:
            aligned = pharaoh(weights[b], source, target, vocab, alignment.heads)
        out.append(TargetScore(total, total / len(per_id), per_id if per_token else None, aligned))
    return out
