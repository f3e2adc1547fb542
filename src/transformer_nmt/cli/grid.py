"""`nmt-evaluate`'s grid: every combination of several `--average-last`, `--beam-size` and
`--alpha` values, each decoded once, and the table that compares them."""

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Setting:
    """One cell of the grid: how many checkpoints to average (None: those given) and the search."""

    average_last: int | None
    beam_size: int
    alpha: float

    @property
    def name(self) -> str:
        """The cell's folder under --output-dir, e.g. avg5_beam4_alpha0.6."""
        average = "" if self.average_last is None else f"avg{self.average_last}_"
        return f"{average}beam{self.beam_size}_alpha{self.alpha:g}"


def settings(
    average_last: list[int] | None, beam_sizes: list[int], alphas: list[float]
) -> list[Setting]:
    """Every combination, in the order given, each once; grouped by averaging, which is the
    costly part (a model loaded), so that each average is built once."""
    return [
        Setting(n, beam, alpha)
        for n in dict.fromkeys(average_last or [None])
        for beam in dict.fromkeys(beam_sizes)
        for alpha in dict.fromkeys(alphas)
    ]


def table(rows: list[tuple[Setting, dict[str, Any]]]) -> str:
    """A Markdown table of each cell's BLEU, chrF2, chrF2++ and TER (`score`'s), the best BLEU
    in bold."""
    best = max(scores["BLEU"]["score"] for _, scores in rows)
    lines = [
        "| average | beam | alpha | BLEU | chrF2 | chrF2++ | TER |",
        "|---|---|---|---|---|---|---|",
    ]
    for setting, scores in rows:
        bleu = f"{scores['BLEU']['score']:.2f}"
        if scores["BLEU"]["score"] == best:
            bleu = f"**{bleu}**"
        average = "-" if setting.average_last is None else setting.average_last
        lines.append(
            f"| {average} | {setting.beam_size} | {setting.alpha:g} | {bleu} "
            f"| {scores['chrF2']['score']:.2f} | {scores['chrF2++']['score']:.2f} "
            f"| {scores['TER']['score']:.2f} |"
        )
    return "\n".join(lines)
