"""Decoding a translation from a trained model: greedy and beam search (section 6.1).

Every search takes target prefixes: ids each output must start with, forced before the search
goes on, their log-probabilities counted in its score (fairseq's --prefix-size, OpenNMT's
-tgt_prefix).
"""

import functools
from typing import NamedTuple

import torch
from torch import Tensor

from transformer_nmt.decoding.beam_trace import BeamTrace
from transformer_nmt.model.interface import Cache, EncoderDecoder
from transformer_nmt.model.masks import padding_mask

PENALTIES = ("gnmt", "fairseq")


class Hypothesis(NamedTuple):
    """One search or sampling output: ids without BOS, ending with EOS unless cut at the maximum
    length, and its score.

    `score` is log P(tokens | source), the sum of every id's log-probability under the model, EOS
    and forced prefix ids included: what `nmt-score` and `Translator.score` give the same pair
    (a hypothesis cut without EOS sums its ids alone; they score its text as ending in EOS).
    `normalized` is score / length_penalty(len(tokens), alpha, penalty), what beam search ranks by.
    """

    tokens: list[int]
    score: float
    normalized: float


def length_penalty(length: int, alpha: float, form: str = "gnmt") -> float:
    """The divisor of a hypothesis' score; `length` counts its ids, EOS included.

    "gnmt" is the paper's (Wu et al., 2016): ((5 + |Y|) / 6)^alpha. "fairseq" is |Y|^alpha,
    what fairseq's --lenpen computes, for comparing with fairseq.
    """
    if form == "gnmt":
        return ((5 + length) / 6) ** alpha
    if form == "fairseq":
        return length**alpha
    raise ValueError(f"length penalty form must be one of {PENALTIES}, got {form!r}")


def _max_lengths(model: EncoderDecoder, src_mask: Tensor, max_len_b: int) -> Tensor:
    """(B,) longest output of each row: source length + max_len_b, within the position table."""
    return (src_mask.sum(dim=(1, 2, 3)) + max_len_b).clamp(max=model.config.max_positions)


def _never_ids(model: EncoderDecoder, bos_id: int, device: torch.device) -> Tensor:
    """(2,) PAD and BOS, the ids search never picks; built once, so no step copies an index."""
    return torch.tensor([model.config.pad_id, bos_id], device=device)


def _next_log_probs(
    model: EncoderDecoder,
    prefix: Tensor,
    memory: Tensor,
    src_mask: Tensor,
    cache: Cache | None,
    never: Tensor,
) -> Tensor:
    """(R, T) prefixes -> (R, V) log-probabilities of the next id; `never` ids get -inf.

    With a cache only the last id goes through the decoder; without one the whole prefix is
    recomputed (the reference the cache must equal, and the benchmark's baseline).
    """
    # Padding and BOS are never targets in training, so a prediction of either is noise; a PAD
    # inside a prefix would also be masked by uncached decoding but not by the cache. They are
    # struck out after the softmax, as fairseq does: their mass stays in its total, so an id's
    # log-probability is the model's, as training's loss and forced decoding (nmt-score) read it.
    log_probs = _next_logits(model, prefix, memory, src_mask, cache).log_softmax(dim=-1)
    return log_probs.index_fill_(-1, never, float("-inf"))


def _next_logits(
    model: EncoderDecoder, prefix: Tensor, memory: Tensor, src_mask: Tensor, cache: Cache | None
) -> Tensor:
    """(R, T) prefixes -> (R, V) float32 logits of the next id."""
    if cache is None:
        logits = model.decode(prefix, memory, src_mask)[:, -1]
    else:
        logits = model.decode(prefix[:, -1:], memory, src_mask, cache)[:, -1]
    return logits.float()


@functools.cache
def _block_size(V: int) -> int | None:
    """The width nearest 64, from 32 to 128, of equal blocks that tile a row of V, or None."""
    widths = [b for b in range(32, 129) if V % b == 0]
    return min(widths, key=lambda b: abs(b - 64), default=None)


def _row_topk(x: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """x.topk(k, dim=-1) of (R, V) rows, faster on CPUs where V >> k.

    Torch's CPU topk sorts a copy of each row's (value, index) pairs; a max over each block of
    ~64 values is one vectorised pass. The k best values lie in the k blocks of best maxima, so
    only those k blocks are searched. Values equal topk's; among equal values the ids may differ.
    """
    R, V = x.shape
    block = _block_size(V)
    if not x.is_cpu or block is None or V < 4 * k * block:  # CUDA's topk is no bottleneck
        return x.topk(k, dim=-1)
    blocks = x.view(R, V // block, block)
    chosen = blocks.amax(dim=-1).topk(k, dim=-1).indices  # (R, k)
    inside = blocks.gather(1, chosen[:, :, None].expand(R, k, block)).view(R, k * block)
    values, where = inside.topk(k, dim=-1)
    return values, chosen.gather(1, where // block) * block + where % block


def _best_candidates(
    logits: Tensor, scores: Tensor, never: Tensor, count: int
) -> tuple[Tensor, Tensor]:
    """The `count` best next steps of each sentence's beams, as `candidates.topk(count)` would
    find them over the (n, K * V) sums of beam scores and log-probabilities, without writing
    those sums: each beam's best ids by logit (the softmax keeps a row's order), then the best of
    the n * K * count. Log-probabilities are logit - logsumexp, with `never` ids struck out after
    the softmax as in `_next_log_probs`.

    Returns:
        (n, count) candidate scores, best first, and their ids in the (K * V) flat index.
    """
    n, K = scores.shape
    V = logits.size(-1)
    struck = logits[:, never]  # (R, 2), their mass counted in the softmax's total below
    top, ids = _row_topk(logits.index_fill_(-1, never, float("-inf")), min(count, V))
    # logsumexp over the row, in place: the logits are not read again
    peak = torch.maximum(top[:, :1], struck.amax(dim=-1, keepdim=True))  # (R, 1)
    total = logits.sub_(peak).exp_().sum(dim=-1, keepdim=True) + (struck - peak).exp().sum(
        dim=-1, keepdim=True
    )
    normalizer = peak + total.log()
    sums = (scores.view(-1, 1) + (top - normalizer)).view(n, -1)  # (n, K * c)
    best, picked = sums.topk(min(count, sums.size(1)), dim=1)  # (n, count)
    beams = picked // top.size(1)
    return best, beams * V + ids.view(n, -1).gather(1, picked)


def forced_ids(target_prefixes: list[list[int]] | None, device: torch.device) -> Tensor | None:
    """(B, P) the prefixes' ids, -1 after a shorter one's end; None without prefixes."""
    if target_prefixes is None or not any(target_prefixes):
        return None
    width = max(map(len, target_prefixes))
    rows = [prefix + [-1] * (width - len(prefix)) for prefix in target_prefixes]
    return torch.tensor(rows, dtype=torch.long, device=device)


def force(log_probs: Tensor, forced: Tensor | None, t: int) -> Tensor:
    """(R, V) log-probabilities where each row whose prefix has an id at step t may pick only it.

    The forced id keeps its log-probability, so scores count the prefix as the model sees it.
    """
    if forced is None or t >= forced.size(1):
        return log_probs
    ids = forced[:, t, None]  # (R, 1), -1 where the row's prefix has ended
    known = ids.clamp(min=0)
    only = torch.full_like(log_probs, float("-inf")).scatter_(1, known, log_probs.gather(1, known))
    return torch.where(ids >= 0, only, log_probs)


@torch.no_grad()
def greedy_search(
    model: EncoderDecoder,
    src: Tensor,
    bos_id: int,
    eos_id: int,
    max_len_b: int = 50,
    use_cache: bool = True,
    target_prefixes: list[list[int]] | None = None,
) -> Tensor:
    """Pick the most likely token at each step, reusing the decoder's cached keys and values.

    The caller sets eval mode; this leaves the mode as it is. PAD and BOS are never picked.

    Args:
        model: any `EncoderDecoder`, e.g. the Transformer.
        src: (B, S) source ids, right-padded with model.config.pad_id.
        bos_id, eos_id: begin- and end-of-sentence ids.
        max_len_b: a row stops at its source length (without padding) + max_len_b tokens,
            the paper's "input length + 50" (section 6.1), unless it emits EOS first.
        use_cache: False recomputes the whole prefix every step (same output, slower).
        target_prefixes: per sentence, target ids (without BOS) the output starts with; at most its
            maximum length.

    Returns:
        (B, T_out) ids without the leading BOS; each row ends with EOS (or is cut at its maximum
        length) and is then filled with pad_id. T_out is the longest row's length.
    """
    pad_id = model.config.pad_id
    src_mask = padding_mask(src, pad_id)  # (B, 1, 1, S)
    memory = model.encode(src)
    max_lens = _max_lengths(model, src_mask, max_len_b)  # (B,)
    cache = model.new_cache() if use_cache else None
    ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1 + t)
    finished = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    never = _never_ids(model, bos_id, src.device)
    forced = forced_ids(target_prefixes, src.device)  # (B, P) or None
    for t in range(int(max_lens.max())):
        log_probs = _next_log_probs(model, ys, memory, src_mask, cache, never)
        tokens = force(log_probs, forced, t).argmax(dim=-1).masked_fill(finished, pad_id)  # (B,)
        ys = torch.cat([ys, tokens[:, None]], dim=1)
        finished |= (tokens == eos_id) | (t + 1 >= max_lens)
        if finished.all():  # the step's one device-to-host sync
            break
    return ys[:, 1:]


@torch.no_grad()
def beam_search(
    model: EncoderDecoder,
    src: Tensor,
    bos_id: int,
    eos_id: int,
    beam_size: int = 4,
    alpha: float = 0.6,
    max_len_b: int = 50,
    penalty: str = "gnmt",
    n_best: int = 1,
    use_cache: bool = True,
    target_prefixes: list[list[int]] | None = None,
    trace: BeamTrace | None = None,
) -> list[list[Hypothesis]]:
    """Beam search as in section 6.1, batched over sentences, with fairseq's bookkeeping.

    Each step expands every live beam, keeps the 2 * beam_size best candidates by log-probability,
    finishes those among the best beam_size that end in EOS (or reach the maximum length), and
    continues with the beam_size best that do not. A sentence stops once it has beam_size
    finished hypotheses or reaches its maximum length, and leaves the batch. Finished hypotheses
    are ranked by their `normalized` score, log-probability / length_penalty(|Y|, alpha,
    penalty). Beam size 1 is greedy search. The caller sets eval mode. PAD and BOS are never
    picked.

    Args:
        model: any `EncoderDecoder`, e.g. the Transformer.
        src: (B, S) source ids, right-padded with model.config.pad_id.
        bos_id, eos_id: begin- and end-of-sentence ids.
        beam_size: hypotheses kept per sentence (paper: 4).
        alpha: length penalty exponent (paper: 0.6); 0 ranks by log-probability alone.
        max_len_b: outputs stop at source length + max_len_b ids (paper: 50).
        penalty: "gnmt" (the paper's) or "fairseq"; see `length_penalty`.
        n_best: hypotheses returned per sentence, at most beam_size.
        use_cache: False recomputes the whole prefix every step (same output, slower).
        target_prefixes: per sentence, target ids (without BOS) every hypothesis starts with,
            at most its maximum length.
        trace: records every step's candidates (the attention explorer's beam view).

    Returns:
        For each sentence, in input order, its n_best finished hypotheses, best first by
        `normalized`; each `score` is its log-probability (see `Hypothesis`).
    """
    if not 1 <= n_best <= beam_size:
        raise ValueError(f"n_best must be between 1 and beam_size ({beam_size}), got {n_best}")
    length_penalty(1, alpha, penalty)  # fail on an unknown form before any work
    if beam_size == 1 and trace is None:
        return _one_beam(model, src, bos_id, eos_id, alpha, max_len_b, penalty, use_cache,
                         target_prefixes)  # fmt: skip
    pad_id = model.config.pad_id
    B, K = src.size(0), beam_size
    src_mask = padding_mask(src, pad_id)  # (B, 1, 1, S)
    max_lens = _max_lengths(model, src_mask, max_len_b)  # (B,)
    # Beam k of sentence b is row b * K + k of every per-row tensor and of the cache; the beams
    # share their sentence's memory (row b), which the model reads once for all K.
    rows = torch.arange(B, device=src.device).repeat_interleave(K)  # (B * K,)
    memory = model.encode(src)  # (B, S, d_model)
    cache = model.new_cache() if use_cache else None
    prefixes = torch.full((B * K, 1), bos_id, dtype=torch.long, device=src.device)  # (R, 1 + t)
    # All K beams start as the same BOS: only the first may expand, or it would be found K times.
    scores = torch.full((B, K), float("-inf"), device=src.device)  # (n, K) log-probabilities
    scores[:, 0] = 0.0
    never = _never_ids(model, bos_id, src.device)
    forced = forced_ids(target_prefixes, src.device)
    forced = None if forced is None else forced[rows]  # (B * K, P)
    # How many hypotheses each sentence has finished, on the device so that `done` stays there.
    num_finished = torch.zeros(B, dtype=torch.long, device=src.device)  # (n,), at most K
    sentences = torch.arange(B, device=src.device)  # the input index of each sentence searching
    steps = int(max_lens.max())
    found = _found(B, K, steps, src.device)  # each sentence's hypotheses, in the order found
    n = B
    for t in range(steps):
        # 2K candidates hold at least K that do not end in EOS: each beam has one EOS candidate.
        # At the first step a sentence's K beams are the same BOS, and only the first expands:
        # one row a sentence goes through the model, and its cache is spread to K rows after
        # (where one row's ids fill the 2K candidates).
        one_row = t == 0 and 1 < K and 2 * K <= model.config.vocab_size and forced is None
        if forced is None or t >= forced.size(1):
            every, beams = (K, 1) if one_row else (1, K)  # each sentence's first beam, or all
            logits = _next_logits(model, prefixes[::every], memory, src_mask, cache)
            V = logits.size(-1)
            cand_scores, cand_ids = _best_candidates(logits, scores[:, :beams], never, 2 * K)
        else:  # a prefix forces ids: every candidate's sum, as `force` leaves them
            log_probs = _next_log_probs(model, prefixes, memory, src_mask, cache, never)
            log_probs = force(log_probs, forced, t)
            V = log_probs.size(-1)
            candidates = (scores[:, :, None] + log_probs.view(n, K, V)).view(n, K * V)
            cand_scores, cand_ids = candidates.topk(min(2 * K, K * V), dim=1)
        cand_beams, cand_tokens = cand_ids // V, cand_ids % V
        at_max = t + 1 >= max_lens  # (n,)
        ends = (cand_tokens == eos_id) | at_max[:, None]  # (n, C)
        to_finish = ends[:, :K] & cand_scores[:, :K].isfinite()  # (n, K)
        # A sentence keeps the first K it finishes: slot = hypotheses before + rank among these.
        slots = num_finished[:, None] + to_finish.cumsum(dim=1) - 1  # (n, K)
        kept_finished = to_finish & (slots < K)
        num_finished = (num_finished + to_finish.sum(dim=1)).clamp(max=K)
        done = at_max | (num_finished == K)  # (n,)
        # The K best candidates that go on, in score order: those that did not end come first.
        C = cand_ids.size(1)
        go_on = (ends.long() * C + torch.arange(C, device=src.device)).topk(K, largest=False)
        next_beams, next_tokens, next_scores = (
            x.gather(1, go_on.indices) for x in (cand_beams, cand_tokens, cand_scores)
        )  # (n, K) each
        if trace is not None:
            lp = length_penalty(t + 1, alpha, penalty)
            trace.record(
                sentences.tolist(), cand_scores, cand_tokens, cand_beams, to_finish,
                go_on.indices, done, lp,
            )  # fmt: skip
        # The step's one device-to-host read: how many hypotheses end, how many sentences go on.
        ending, m = torch.stack([kept_finished.sum(), n - done.sum()]).tolist()
        if ending:
            i, c = torch.nonzero_static(kept_finished, size=ending).unbind(1)
            beams_rows = i * K + cand_beams[i, c]  # the rows of the beams they extend
            ids = torch.cat([prefixes[beams_rows, 1:], cand_tokens[i, c, None]], dim=1)
            _write(found, (sentences[i], slots[i, c]), cand_scores[i, c], ids)
        if not m:
            break

        # The host knows how many sentences go on, so selecting them needs no sync.
        live_index = torch.nonzero_static(~done, size=m)[:, 0]  # (m,)
        order = (live_index[:, None] * K + next_beams[live_index]).view(-1)  # (m * K,) their beams
        # Until a sentence leaves, `order` moves rows only among a sentence's beams, and what is
        # computed from the sources stays as it is.
        same_source = m == n
        prefixes = torch.cat([prefixes[order], next_tokens[live_index].view(-1, 1)], dim=1)
        scores = next_scores[live_index]  # (m, K)
        if not same_source:
            memory, src_mask = memory[live_index], src_mask[live_index]
            forced = None if forced is None else forced[order]
        if cache is not None:
            rows_from = order // K if one_row else order  # the cache's rows, one a sentence
            cache = model.reorder_cache(cache, rows_from, None if same_source else live_index)
        max_lens, num_finished = max_lens[live_index], num_finished[live_index]
        sentences = sentences[live_index]
        n = m
    return [ranked(_read(rows, alpha, penalty))[:n_best] for rows in found.tolist()]


def _one_beam(
    model: EncoderDecoder,
    src: Tensor,
    bos_id: int,
    eos_id: int,
    alpha: float,
    max_len_b: int,
    penalty: str,
    use_cache: bool,
    target_prefixes: list[list[int]] | None,
) -> list[list[Hypothesis]]:
    """`beam_search` with one beam: the same hypotheses, without the bookkeeping of K beams.

    A sentence's beam takes its best id each step and leaves the batch when that id is EOS or
    the sentence reaches its maximum length, its ids and score written to output tensors on the
    device; the host reads how many rows end a step and the outputs at the end. The general
    path's 2K candidates a sentence, their ranking and slots are work one beam does without
    (1.05x a greedy translation, experiments/frontier/README.md).
    """
    B, device = src.size(0), src.device
    src_mask = padding_mask(src, model.config.pad_id)  # (B, 1, 1, S)
    max_lens = _max_lengths(model, src_mask, max_len_b)  # (B,)
    memory = model.encode(src)
    cache = model.new_cache() if use_cache else None
    prefixes = torch.full((B, 1), bos_id, dtype=torch.long, device=device)  # (n, 1 + t)
    scores = torch.zeros(B, 1, device=device)  # (n, 1) log-probabilities
    never = _never_ids(model, bos_id, device)
    forced = forced_ids(target_prefixes, device)
    sentences = torch.arange(B, device=device)  # each row's input index
    steps = int(max_lens.max())
    found = _found(B, 1, steps, device)  # each sentence's hypothesis, once it ends
    for t in range(steps):
        if forced is None or t >= forced.size(1):
            logits = _next_logits(model, prefixes, memory, src_mask, cache)
            scores, tokens = _best_candidates(logits, scores, never, 1)  # (n, 1) each
        else:
            log_probs = _next_log_probs(model, prefixes, memory, src_mask, cache, never)
            scores, tokens = (scores + force(log_probs, forced, t)).max(dim=1, keepdim=True)
        prefixes = torch.cat([prefixes, tokens], dim=1)
        # As beam search: an end whose score is -inf (no id was possible) is no hypothesis.
        ends = ((tokens[:, 0] == eos_id) | (t + 1 >= max_lens)) & scores[:, 0].isfinite()
        n, ending = ends.size(0), int(ends.sum())  # the step's one device-to-host read
        if not ending:
            continue
        ended = torch.nonzero_static(ends, size=ending)[:, 0]
        _write(found, (sentences[ended], 0), scores[ended, 0], prefixes[ended, 1:])
        if ending == n:
            break
        live = torch.nonzero_static(~ends, size=n - ending)[:, 0]
        prefixes, scores, sentences = prefixes[live], scores[live], sentences[live]
        memory, src_mask, max_lens = memory[live], src_mask[live], max_lens[live]
        forced = None if forced is None else forced[live]
        if cache is not None:
            cache = model.reorder_cache(cache, live, live)
    return [_read(rows, alpha, penalty) for rows in found.tolist()]


def _found(B: int, K: int, steps: int, device: torch.device) -> Tensor:
    """(B, K, 2 + steps): up to K finished hypotheses a sentence, written on the device as they
    end and read once at the end; each row its length (0: none), score and ids (float64 holds
    ids exactly)."""
    return torch.zeros(B, K, 2 + steps, dtype=torch.float64, device=device)


def _write(found: Tensor, where: tuple[Tensor, Tensor | int], scores: Tensor, ids: Tensor) -> None:
    """Hypotheses of scores (m,) and ids (m, length) into `found` at (sentence, slot) `where`."""
    found[(*where, 0)] = ids.size(1)
    found[(*where, 1)] = scores.double()
    found[(*where, slice(2, 2 + ids.size(1)))] = ids.double()


def _read(rows: list[list[float]], alpha: float, penalty: str) -> list[Hypothesis]:
    """One sentence's rows of `_found`, read on the host: its hypotheses, in the order found."""
    return [
        scored([int(i) for i in ids[: int(length)]], score, alpha, penalty)
        for length, score, *ids in rows
        if length
    ]


def scored(tokens: list[int], score: float, alpha: float, penalty: str) -> Hypothesis:
    """The hypothesis of `tokens` whose log-probability is `score`, with its normalized score."""
    return Hypothesis(tokens, score, score / length_penalty(len(tokens), alpha, penalty))


def ranked(hypotheses: list[Hypothesis]) -> list[Hypothesis]:
    """Best first by normalized score, the first found first among equals."""
    return sorted(hypotheses, key=lambda h: h.normalized, reverse=True)
