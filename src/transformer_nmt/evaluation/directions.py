"""A multilingual model evaluated direction by direction: sacreBLEU's scores and the off-target
rate of each, their means, as a report and a TSV table.

A direction the model never trained (zero-shot) is evaluated like the others and marked, and
the means are also given over the trained and the zero-shot directions apart.
"""

import io
from collections.abc import Callable, Sequence
from typing import Any

from transformer_nmt.data.languages import Direction, Languages
from transformer_nmt.evaluation.off_target import off_target_rate

METRICS = ("BLEU", "chrF2", "chrF2++", "TER")  # the per-direction scores, as `score` names them
OFF_TARGET = "off_target"  # the share of outputs identified as another language than the target
TSV_COLUMNS = ["direction", "zero_shot", "sentences", *METRICS, OFF_TARGET]


def parse_directions(names: Sequence[str], languages: Languages) -> list[Direction]:
    """("de", "fr") of each "de-fr", both languages the model's, each direction once."""
    known = ", ".join(languages.languages)
    directions = []
    for name in names:
        parts = str(name).split("-")
        if len(parts) != 2 or parts[0] == parts[1]:
            raise ValueError(f"--directions: {name!r} is no direction; write src-tgt, e.g. de-fr")
        for lang in parts:
            if lang not in languages.languages:
                raise ValueError(f"--directions {name}: the model knows no language {lang!r}; "
                                 f"it knows {known}")  # fmt: skip
        if (parts[0], parts[1]) in directions:
            raise ValueError(f"--directions lists {name} twice: list each direction once")
        directions.append((parts[0], parts[1]))
    return directions


def all_directions(languages: Languages) -> list[Direction]:
    """Every ordered pair of the model's languages: its trained directions first, in order,
    then the zero-shot ones."""
    pairs = [(a, b) for a in languages.languages for b in languages.languages if a != b]
    return [*languages.directions, *(p for p in pairs if p not in languages.directions)]


def direction_report(
    hypotheses: list[str],
    references: list[str],
    direction: Direction,
    languages: Languages,
    score: Callable[[list[str], list[str], str], dict[str, Any]],
) -> dict[str, Any]:
    """One direction's scores (as `score` gives them, each with its signature), its off-target
    rate among the model's languages, whether it is zero-shot and its sentence count."""
    return {
        "zero_shot": direction not in languages.directions,
        "sentences": len(references),
        **score(hypotheses, references, direction[1]),
        OFF_TARGET: off_target_rate(hypotheses, direction[1], languages.languages),
    }


def means(reports: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    """The mean of each metric and of the off-target rate over all directions ("all"), and over
    the trained ("trained") and the zero-shot ones ("zero_shot") where there are both."""
    groups = {"all": list(reports.values())}
    trained = [r for r in reports.values() if not r["zero_shot"]]
    if 0 < len(trained) < len(reports):
        groups |= {"trained": trained, "zero_shot": [r for r in reports.values() if r["zero_shot"]]}
    return {group: _mean(rows) for group, rows in groups.items()}


def _mean(rows: list[dict[str, Any]]) -> dict[str, float]:
    values = {m: [row[m]["score"] for row in rows] for m in METRICS}
    values[OFF_TARGET] = [row[OFF_TARGET] for row in rows]
    return {name: sum(v) / len(v) for name, v in values.items()}


def tsv(reports: dict[str, dict[str, Any]], mean: dict[str, dict[str, float]]) -> str:
    """One row a direction, then one a mean ("mean", "mean_trained", ...): the TSV table."""
    out = io.StringIO()
    out.write("\t".join(TSV_COLUMNS) + "\n")
    for name, r in reports.items():
        cells = [name, str(r["zero_shot"]).lower(), str(r["sentences"])]
        cells += [f"{r[m]['score']:.2f}" for m in METRICS] + [f"{r[OFF_TARGET]:.4f}"]
        out.write("\t".join(cells) + "\n")
    for group, values in mean.items():
        name = "mean" if group == "all" else f"mean_{group}"
        cells = [name, "", ""] + [f"{values[m]:.2f}" for m in METRICS]
        out.write("\t".join([*cells, f"{values[OFF_TARGET]:.4f}"]) + "\n")
    return out.getvalue()


def table(reports: dict[str, dict[str, Any]], mean: dict[str, dict[str, float]]) -> str:
    """The TSV's rows aligned for a terminal, zero-shot directions starred."""
    rows = [["direction", *METRICS, "off-target"]]
    for name, r in reports.items():
        label = name + ("*" if r["zero_shot"] else "")
        rows.append([label, *(f"{r[m]['score']:.2f}" for m in METRICS), f"{r[OFF_TARGET]:.1%}"])
    for group, values in mean.items():
        label = "mean" if group == "all" else f"mean {group.replace('_', '-')}"
        rows.append([label, *(f"{values[m]:.2f}" for m in METRICS), f"{values[OFF_TARGET]:.1%}"])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in
                       enumerate(zip(row, widths, strict=True))) for row in rows]  # fmt: skip
    if any(r["zero_shot"] for r in reports.values()):
        lines.append("* zero-shot: a direction the model never trained")
    return "\n".join(lines) + "\n"
