"""Minimum Bayes risk (MBR) decoding: of many candidates, the one most like the model's samples.

The model's samples of a sentence stand for its distribution over translations: they are the
pseudo-references. Each candidate's expected utility is its mean sentence score (chrF, chrF++
or BLEU, `evaluation.utility`) against them, and the candidate of the highest is kept
(Kumar and Byrne, 2004; Eikema and Aziz, 2020; Freitag et al., 2022). The candidates are the
samples themselves, the beam's n-best, or both (Freitag et al., 2023 found epsilon samples the
best candidates). A sample scored against itself counts, as in the papers' N x N matrix.
"""

from dataclasses import dataclass, field

import numpy as np

from transformer_nmt.decoding.sampling import Sampling
from transformer_nmt.evaluation.utility import UTILITIES, utility_matrix

CANDIDATES = ("sample", "beam", "both")


@dataclass(frozen=True)
class MBR:
    """How MBR decodes a sentence.

    Args:
        sampling: how the pseudo-references are drawn, `sampling.n` (N >= 2) of them, seeded
            per sentence as sampling is; e.g. Sampling(n=32, epsilon=0.02).
        candidates: "sample" (the N samples), "beam" (the beam's beam_size n-best) or "both".
        utility: "chrf" (sacreBLEU's chrF2), "chrf++" or "bleu" (sentence BLEU, exp smoothing).
    """

    sampling: Sampling = field(default_factory=lambda: Sampling(n=16))
    candidates: str = "sample"
    utility: str = "chrf"

    def __post_init__(self) -> None:
        if self.sampling.n < 2:
            n = self.sampling.n
            raise ValueError(f"MBR needs at least 2 samples a sentence (its references), got {n}")
        if self.candidates not in CANDIDATES:
            raise ValueError(f"MBR candidates must be one of {CANDIDATES}, got {self.candidates!r}")
        if self.utility not in UTILITIES:
            raise ValueError(f"MBR utility must be one of {UTILITIES}, got {self.utility!r}")

    @property
    def uses_beam(self) -> bool:
        return self.candidates != "sample"

    def pool(self, samples: list[str], beam: list[str]) -> list[str]:
        """One sentence's candidates, each text once, in the order found (samples first)."""
        found = (samples if self.candidates != "beam" else []) + (beam if self.uses_beam else [])
        return list(dict.fromkeys(found))


def select(
    candidates: list[str], references: list[str], utility: str, n_best: int = 1
) -> list[tuple[str, float]]:
    """The n_best candidates of the highest mean utility against the references, best first
    (ties: the one found first), each with that mean (0 to 100)."""
    expected = utility_matrix(candidates, references, utility).mean(axis=1)  # (C,)
    order = np.argsort(-expected, kind="stable")[:n_best]
    return [(candidates[i], float(expected[i])) for i in order]
