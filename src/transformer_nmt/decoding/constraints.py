"""Terminology constraints: beam search whose outputs contain given phrases, by dynamic beam
allocation (Post and Vilar, 2018, "Fast Lexically Constrained Decoding with Dynamic Beam
Allocation for Neural Machine Translation").

Each step, every hypothesis proposes its best next ids overall, the next id of each constraint it
could advance, and its single best id; the candidates are grouped into banks by how many
constraint ids they have met, and the beam's K slots are shared among the banks (K / (C + 1)
each, C the sentence's constraint ids, slots a bank cannot fill going to the banks with more met),
so hypotheses that make progress on the constraints are not crowded out by likelier ones that do
not. A hypothesis may end (EOS) only once every constraint is met. A constraint abandoned halfway
loses its progress. Given the ids that go on a word (`continuing`), none may follow a constraint's
last id, so that a constraint is met as a whole word ("employee", never "employeeing"). When no
hypothesis meets every constraint within the maximum length, the one meeting the most is
returned, and the constraints it misses are reported. A phrase may have a second form, its ids as
a sentence's first word (a tokenizer writes that word without the space before it): met at the
first position, a constraint is met in that form, anywhere else in the other.
"""

from dataclasses import dataclass

import torch
from torch import Tensor

from transformer_nmt.decoding.search import (
    Hypothesis,
    _max_lengths,
    _never_ids,
    _next_log_probs,
    length_penalty,
    ranked,
    scored,
)
from transformer_nmt.model.interface import EncoderDecoder
from transformer_nmt.model.masks import padding_mask


@dataclass(frozen=True)
class Phrases:
    """One sentence's constraints: each phrase's ids inside a sentence, and as its first word."""

    inside: list[list[int]]
    first: list[list[int]]

    @classmethod
    def of(cls, inside: list[list[int]], first: list[list[int]] | None = None) -> "Phrases":
        """first None: a phrase is the same at the start of a sentence as inside it."""
        return cls(inside, inside if first is None else first)

    def ids(self, i: int, initial: bool) -> list[int]:
        return (self.first if initial else self.inside)[i]

    def size(self, i: int) -> int:
        """The ids constraint i counts for in its bank, whichever form meets it."""
        return max(len(self.inside[i]), len(self.first[i]))


@dataclass(frozen=True)
class Progress:
    """A hypothesis' progress through its sentence's constraints."""

    met: tuple[bool, ...]
    current: int | None = None  # the constraint in progress
    matched: int = 0  # its ids matched so far
    completed: bool = False  # a constraint's last id was the last one appended
    initial: bool = False  # the constraint in progress began the sentence: its first-word form

    def met_ids(self, phrases: Phrases) -> int:
        """Constraint ids met: the bank of the hypothesis."""
        done = sum(phrases.size(i) for i, met in enumerate(self.met) if met)
        return done + self.matched

    def all_met(self) -> bool:
        return all(self.met)

    def wanted(self, phrases: Phrases, at_start: bool) -> set[int]:
        """The ids that would advance a constraint; at_start: as the sentence's first id."""
        if self.current is not None:
            return {phrases.ids(self.current, self.initial)[self.matched]}
        return {phrases.ids(i, at_start)[0] for i, met in enumerate(self.met) if not met}

    def after(self, token: int, phrases: Phrases, at_start: bool) -> "Progress":
        """The progress once `token` is appended; at_start: as the sentence's first id."""
        if self.current is not None:
            ids = phrases.ids(self.current, self.initial)
            if token == ids[self.matched]:
                return self._matched(self.current, self.matched + 1, ids, self.initial)
        # Any constraint in progress is abandoned: its ids count no more.
        for i, met in enumerate(self.met):
            ids = phrases.ids(i, at_start)
            if not met and token == ids[0]:
                return self._matched(i, 1, ids, at_start)
        return Progress(self.met)

    def _matched(self, i: int, matched: int, ids: list[int], initial: bool) -> "Progress":
        if matched < len(ids):
            return Progress(self.met, i, matched, initial=initial)
        return Progress(tuple(m or j == i for j, m in enumerate(self.met)), completed=True)


@dataclass
class _Beam:
    log_prob: float
    tokens: list[int]
    progress: Progress
    row: int = 0  # the beam slot it grew from, at the step before
    ends: bool = False  # its last id is EOS: a candidate that ranks, never a beam


@torch.no_grad()
def constrained_beam_search(
    model: EncoderDecoder,
    src: Tensor,
    bos_id: int,
    eos_id: int,
    constraints: list[list[list[int]]],
    beam_size: int = 4,
    alpha: float = 0.6,
    max_len_b: int = 50,
    penalty: str = "gnmt",
    n_best: int = 1,
    continuing: list[int] | None = None,
    first_words: list[list[list[int]]] | None = None,
) -> tuple[list[list[Hypothesis]], list[list[int]]]:
    """Beam search whose outputs contain each sentence's constraints (dynamic beam allocation).

    The caller sets eval mode. PAD and BOS are never picked. Sentences keep their rows until the
    batch ends; every reorder stays within a sentence's beams.

    Args:
        model, src, bos_id, eos_id, beam_size, alpha, max_len_b, penalty, n_best: as for
            `beam_search`.
        constraints: per sentence, its phrases as id lists (none: []).
        continuing: the ids whose text goes on the word before them, never appended right after
            a constraint; None allows any.
        first_words: per sentence, its phrases' ids as the sentence's first word, the form a
            constraint met at the first position takes; None: the same ids as inside.

    Returns:
        Per sentence, its n_best hypotheses, best first; and the indices of the constraints its
        best misses ([] when all are met).
    """
    if not 1 <= n_best <= beam_size:
        raise ValueError(f"n_best must be between 1 and beam_size ({beam_size}), got {n_best}")
    length_penalty(1, alpha, penalty)  # fail on an unknown form before any work
    B, K = src.size(0), beam_size
    src_mask = padding_mask(src, model.config.pad_id)
    max_lens = _max_lengths(model, src_mask, max_len_b).tolist()
    memory = model.encode(src)  # beam k of sentence b, row b * K + k, reads its row b
    cache = model.new_cache()
    prefixes = torch.full((B * K, 1), bos_id, dtype=torch.long, device=src.device)
    never = _never_ids(model, bos_id, src.device)
    phrases = [
        Phrases.of(c, None if first_words is None else first_words[b])
        for b, c in enumerate(constraints)
    ]
    start = [Progress(tuple(False for _ in c)) for c in constraints]
    beams = [[_Beam(0.0, [], start[b])] + [None] * (K - 1) for b in range(B)]
    finished: list[list[Hypothesis]] = [[] for _ in range(B)]
    fallback: list[list[tuple[int, Hypothesis, Progress]]] = [[] for _ in range(B)]
    done = [False] * B
    # Indexes the scores, which each step moves to the CPU.
    going_on = (
        None if continuing is None else torch.tensor(continuing, dtype=torch.long, device="cpu")
    )
    for t in range(max(max_lens)):
        log_probs = _next_log_probs(model, prefixes, memory, src_mask, cache, never).cpu()
        if going_on is not None:
            ended = [
                b * K + k
                for b in range(B)
                for k, beam in enumerate(beams[b])
                if beam is not None and beam.progress.completed
            ]
            rows_ended = torch.tensor(ended, dtype=torch.long, device="cpu")[:, None]
            log_probs[rows_ended, going_on] = float("-inf")
        order, tokens = [], []
        for b in range(B):
            if not done[b]:
                step = _Step(phrases[b], beams[b], log_probs[b * K : (b + 1) * K], t)
                kept = step.advance(
                    K, eos_id, max_lens[b], (alpha, penalty), finished[b], fallback[b]
                )
                beams[b] = kept + [None] * (K - len(kept))
                done[b] = not kept or len(finished[b]) >= K
            if done[b]:  # its rows stay as they are, unread
                order += [b * K + k for k in range(K)]
                tokens += [bos_id] * K
                continue
            for beam in beams[b]:  # an empty slot copies the best row; it is never read
                grown = beam or beams[b][0]
                order.append(b * K + grown.row)
                tokens.append(grown.tokens[-1])
        if all(done):
            break
        order_t = torch.tensor(order, device=src.device)
        next_ids = torch.tensor(tokens, device=src.device)[:, None]
        prefixes = torch.cat([prefixes[order_t], next_ids], dim=1)
        cache = model.reorder_cache(cache, order_t)  # rows move within their sentence
    return _results(finished, fallback, constraints, n_best)


class _Step:
    """One sentence's candidates at one step, and the beams dynamic allocation keeps."""

    def __init__(self, phrases: Phrases, beams: list, log_probs: Tensor, t: int):
        self.phrases, self.beams, self.log_probs, self.t = phrases, beams, log_probs, t

    def candidates(self, K: int) -> list[tuple[float, int, int]]:
        """(log_prob, beam, id) of the 2K best overall, each beam's wanted ids and its best id,
        best first; summed in float32 as `beam_search` sums, so that their scores agree."""
        live = [k for k, beam in enumerate(self.beams) if beam is not None]
        totals = torch.stack([self.log_probs[k] + self.beams[k].log_prob for k in live])
        V = totals.size(-1)
        best = totals.view(-1).topk(min(2 * K, totals.numel())).indices.tolist()
        pairs = {(j, i % V) for i in best for j in [i // V]}
        for j, k in enumerate(live):
            wanted = self.beams[k].progress.wanted(self.phrases, self.t == 0)
            pairs |= {(j, token) for token in wanted}
            pairs.add((j, int(self.log_probs[k].argmax())))
        found = [(float(totals[j, token]), live[j], token) for j, token in pairs]
        return sorted(found, key=lambda c: (-c[0], c[1], c[2]))

    def advance(
        self,
        K: int,
        eos_id: int,
        max_len: int,
        ranking: tuple[float, str],
        finished: list[Hypothesis],
        fallback: list,
    ) -> list[_Beam]:
        """The beams to go on with, best first; hypotheses that end are stored.

        As in `beam_search`, a hypothesis that ends finishes only among the K best candidates
        of its bank (the bank of every constraint met), so that without constraints this is
        beam search.

        ranking: (alpha, penalty) of the length penalty finished hypotheses are ranked by.
        """
        at_max = self.t + 1 >= max_len
        banks: dict[int, list[_Beam]] = {}
        for log_prob, k, token in self.candidates(K):
            if log_prob == float("-inf"):
                continue
            beam = self.beams[k]
            tokens, progress = [*beam.tokens, token], beam.progress
            if token != eos_id:
                progress = progress.after(token, self.phrases, self.t == 0)
            bank = banks.setdefault(progress.met_ids(self.phrases), [])
            if token == eos_id or at_max:
                hypothesis = scored(tokens, log_prob, *ranking)
                if progress.all_met() and len(bank) < K and len(finished) < K:
                    finished.append(hypothesis)
                elif not progress.all_met() and at_max:
                    fallback.append((progress.met_ids(self.phrases), hypothesis, progress))
            # EOS before every constraint is met ends nothing, yet ranks in its bank.
            bank.append(_Beam(log_prob, tokens, progress, row=k, ends=token == eos_id))
        if at_max:
            return []
        C = sum(self.phrases.size(i) for i in range(len(self.phrases.inside)))
        going_on = {b: [beam for beam in c if not beam.ends] for b, c in banks.items()}
        return _allocate(going_on, K, C)


def _allocate(banks: dict[int, list[_Beam]], K: int, C: int) -> list[_Beam]:
    """At most K beams shared among banks 0..C: K // (C + 1) each (the remainder to the banks
    with the most met), then slots a bank leaves empty filled from the most met banks down."""
    by_bank = {bank: sorted(c, key=lambda b: b.log_prob, reverse=True) for bank, c in banks.items()}
    shares = [K // (C + 1)] * (C + 1)
    for i in range(K - sum(shares)):
        shares[C - i] += 1
    chosen, rest = [], []
    for bank in range(C, -1, -1):
        candidates = by_bank.get(bank, [])
        chosen += candidates[: shares[bank]]
        rest += candidates[shares[bank] :]
    chosen += rest[: K - len(chosen)]
    return sorted(chosen, key=lambda b: b.log_prob, reverse=True)


def _results(
    finished: list[list[Hypothesis]],
    fallback: list[list[tuple[int, Hypothesis, Progress]]],
    constraints: list[list[list[int]]],
    n_best: int,
) -> tuple[list[list[Hypothesis]], list[list[int]]]:
    out, missed = [], []
    for b, hypotheses in enumerate(finished):
        if hypotheses:
            out.append(ranked(hypotheses)[:n_best])
            missed.append([])
            continue
        # The most constraints met whole, then the most ids met, then the best normalized score.
        key = lambda x: (sum(x[2].met), x[0], x[1].normalized)  # noqa: E731
        best_met = sorted(fallback[b], key=key, reverse=True)[:n_best]
        out.append([h for _, h, _ in best_met])
        best = best_met[0][2] if best_met else Progress(tuple(False for _ in constraints[b]))
        missed.append([i for i, met in enumerate(best.met) if not met])
    return out, missed
