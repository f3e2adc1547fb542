"""What beam search did at each step, recorded only when a caller asks (`beam_search(trace=)`)."""

from typing import NamedTuple

from torch import Tensor

# A candidate's fate at its step: it goes on, it ends a finished hypothesis, or it is dropped.
KEPT, FINISHED, PRUNED = "kept", "finished", "pruned"


class Candidate(NamedTuple):
    """One of a step's 2K best expansions of a sentence's beams, best first."""

    beam: int  # the beam it extends: an index into the previous step's kept candidates
    token: int
    score: float  # the whole prefix's log-probability, as `Hypothesis.score`
    status: str  # KEPT, FINISHED or PRUNED
    normalized: float | None  # FINISHED only: score / length_penalty, as hypotheses are ranked


class BeamTrace:
    """Every step's candidates of every sentence, in input order: `steps[b][t]` for sentence b.

    `beam_search` calls `record` once a step with tensors it has computed anyway; without a
    trace it calls nothing, so search pays nothing for the option.
    """

    def __init__(self) -> None:
        self.steps: list[list[list[Candidate]]] = []
        self._finished: list[int] = []

    def record(
        self,
        sentences: list[int],
        cand_scores: Tensor,
        cand_tokens: Tensor,
        cand_beams: Tensor,
        to_finish: Tensor,
        kept: Tensor,
        done: Tensor,
        penalty: float,
    ) -> None:
        """One step of the searching sentences; the tensors have one row per sentence.

        Args:
            sentences: the input index of each row.
            cand_scores, cand_tokens, cand_beams: (n, C) the candidates, best first.
            to_finish: (n, K) which of the K best end a hypothesis.
            kept: (n, K) the indices of the candidates that go on.
            done: (n,) the sentences that stop after this step.
            penalty: this step's length penalty, the same for every hypothesis ending here.
        """
        while len(self.steps) <= max(sentences):
            self.steps.append([])
            self._finished.append(0)
        K = kept.size(1)
        rows = zip(
            sentences,
            cand_scores.tolist(),
            cand_tokens.tolist(),
            cand_beams.tolist(),
            to_finish.tolist(),
            kept.tolist(),
            done.tolist(),
            strict=True,
        )
        for b, scores, tokens, beams, finish, kept_i, done_i in rows:
            step = []
            for c, (log_prob, token, beam) in enumerate(zip(scores, tokens, beams, strict=True)):
                # As beam search does: a sentence keeps at most K finished hypotheses.
                if c < K and finish[c] and self._finished[b] < K:
                    self._finished[b] += 1
                    step.append(Candidate(beam, token, log_prob, FINISHED, log_prob / penalty))
                else:
                    status = KEPT if c in kept_i and not done_i else PRUNED
                    step.append(Candidate(beam, token, log_prob, status, None))
            self.steps[b].append(step)

    def finished(self, sentence: int) -> list[tuple[list[int], float, float]]:
        """(ids, score, normalized) of each hypothesis the sentence finished, in the order found."""
        found, beams = [], None  # beams: the ids of each kept candidate, in `kept` order
        for step in self.steps[sentence]:
            kept = []
            for c in step:
                ids = [c.token] if beams is None else [*beams[c.beam], c.token]
                if c.status == FINISHED:
                    found.append((ids, c.score, c.normalized))
                elif c.status == KEPT:
                    kept.append(ids)
            beams = kept
        return found
