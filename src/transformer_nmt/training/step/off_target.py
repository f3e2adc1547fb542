"""The off-target rate of validation outputs (`evaluation/off_target.py`) as a torchmetric."""

import logging

import torch
from torchmetrics import Metric

from transformer_nmt.data.languages import Languages
from transformer_nmt.evaluation.off_target import identifiable, identify

log = logging.getLogger(__name__)


class OffTargetRate(Metric):
    """The share of one direction's outputs written in another language than its target.

    Keeps two counts, summed across batches and ranks as `SacreBLEU` sums its statistics: the
    outputs identified (those with letters) and those identified as another language. Only the
    validation outputs are identified, each once (langid.py's model, ~1 ms a sentence on a CPU).

    Args:
        target: the language the outputs are asked in.
        languages: the model's languages, among which each output is identified.
    """

    full_state_update = False

    def __init__(self, target: str, languages: list[str]) -> None:
        super().__init__()
        self.target, self.languages = target, list(languages)
        self.add_state("counts", torch.zeros(2, dtype=torch.long), dist_reduce_fx="sum")

    def update(self, hypotheses: list[str]) -> None:
        found = [lang for lang in identify(hypotheses, self.languages) if lang is not None]
        off = sum(lang != self.target for lang in found)
        self.counts += torch.tensor([off, len(found)], device=self.counts.device)

    def compute(self) -> torch.Tensor:
        off, identified = self.counts.tolist()
        rate = off / identified if identified else 0.0
        return torch.tensor(rate, dtype=torch.float64, device=self.counts.device)


def direction_off_target(languages: Languages) -> torch.nn.ModuleDict | None:
    """An `OffTargetRate` per direction ("de-fr"); None, with a warning, for languages that
    language identification does not know (codes that are not ISO 639-1)."""
    if not identifiable(languages.languages):
        log.warning(
            "val/off_target is not measured: language identification knows no %s (it needs "
            "ISO 639-1 codes such as de, en, fr, cs)",
            ", ".join(languages.languages),
        )
        return None
    known = list(languages.languages)
    return torch.nn.ModuleDict(
        {
            name: OffTargetRate(d[1], known)
            for name, d in zip(languages.names, languages.directions, strict=True)
        }
    )
