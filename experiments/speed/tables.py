"""The benchmark's Markdown tables, and the summary of ours against the fastest peer."""

import numpy as np

HEADERS = {
    "training": ["size", "round", "implementation", "params", "precision", "steps", "s/step",
                 "target tokens/s", "GFLOP/s", "share of peak"],
    "decoding": ["size", "implementation", "search", "sentences", "s", "sentences/s",
                 "output tokens/sentence", "output tokens/s"],
    "memory": ["size", "implementation", "batches (B x S+T)", "RSS before the model, GB",
               "peak RSS, GB"],
    "summary": ["size", "measure", "ours", "tokens or sentences/s", "fastest reference",
                "reference", "ours / reference"],
}  # fmt: skip


class Tables:
    """The rows of each markdown table; a row is also printed as soon as it is measured."""

    def __init__(self):
        self.rows: dict[str, list[list]] = {name: [] for name in HEADERS}

    def add(self, name: str, row: list) -> None:
        self.rows[name].append(row)
        print(self.format_row(row), flush=True)

    @staticmethod
    def format_row(row: list) -> str:
        return "| " + " | ".join(str(cell) for cell in row) + " |"

    def markdown(self, name: str) -> str:
        lines = [self.format_row(HEADERS[name]), "|" + "---|" * len(HEADERS[name])]
        return "\n".join(lines + [self.format_row(row) for row in self.rows[name]])


def summarize(speeds: dict[tuple, list[float]], tables: Tables) -> None:
    """Ours (and ours-compiled) against the fastest reference, per size and measure.

    With several rounds, each round's ratio is to that round's fastest reference, and the
    summary gives the median ratio with its range; the speeds are the rounds' medians.
    """
    for (size_name, name, measure), ours in speeds.items():
        others = {
            n: s
            for (z, n, m), s in speeds.items()
            if (z, m) == (size_name, measure) and not n.startswith("ours")
        }
        if not name.startswith("ours") or not others:
            continue
        best = max(others, key=lambda n: np.median(others[n]))
        ratios = [o / max(s[r] for s in others.values()) for r, o in enumerate(ours)]
        ratio = f"{np.median(ratios):.2f}x"
        if len(ratios) > 1:
            ratio += f" ({min(ratios):.2f}-{max(ratios):.2f}x over {len(ratios)} rounds)"
        tables.rows["summary"].append([
            size_name, measure, name, f"{np.median(ours):,.2f}", best,
            f"{np.median(others[best]):,.2f}", ratio,
        ])  # fmt: skip
