"""A multilingual model's scores as a source-by-target grid, drawn as a heatmap.

Row i is the source language languages[i], column j the target language languages[j], as
the model lists them; a cell holds its direction's score (BLEU), a direction never trained is
hatched and marked "zero-shot" (its score too where there is one), the diagonal is blank.
"""

import math
from pathlib import Path

import numpy as np

from transformer_nmt.data.languages import Languages, direction_name

CMAP = "viridis"
# A fixed layout, so that cell (i, j) of an n-by-n grid is at a known pixel (`cell_center`).
CELL_INCHES = 0.9
MARGIN_INCHES = (0.8, 0.3, 0.7, 0.7)  # left, right, top, bottom: the axis labels
DPI = 100
BLANK = (0.93, 0.93, 0.93)  # the diagonal
ZERO_SHOT = (0.8, 0.8, 0.8)  # a zero-shot cell without a score


def direction_grid(languages: Languages, scores: dict[str, float]) -> np.ndarray:
    """(n, n) scores by source row and target column; NaN where `scores` has none."""
    n = len(languages.languages)
    grid = np.full((n, n), np.nan)
    for i, src in enumerate(languages.languages):
        for j, tgt in enumerate(languages.languages):
            value = scores.get(direction_name((src, tgt)))
            if src != tgt and value is not None:
                grid[i, j] = value
    return grid


def zero_shot_cells(languages: Languages) -> list[tuple[int, int]]:
    """(row, column) of each direction the model never trained."""
    langs = languages.languages
    return [
        (i, j)
        for i, src in enumerate(langs)
        for j, tgt in enumerate(langs)
        if src != tgt and (src, tgt) not in languages.directions
    ]


def figure_inches(n: int) -> tuple[float, float]:
    left, right, top, bottom = MARGIN_INCHES
    return left + right + n * CELL_INCHES, top + bottom + n * CELL_INCHES


def cell_center(i: int, j: int, n: int) -> tuple[float, float]:
    """(x, y) pixel of cell (row i, column j)'s centre in the PNG, y from the top."""
    left, _, top, _ = MARGIN_INCHES
    return ((left + (j + 0.5) * CELL_INCHES) * DPI, (top + (i + 0.5) * CELL_INCHES) * DPI)


def color_scale(grid: np.ndarray) -> tuple[float, float]:
    """The colour scale's range: 0 to the best score (at least 1)."""
    finite = grid[np.isfinite(grid)]
    return 0.0, max(1.0, float(finite.max()) if finite.size else 1.0)


def draw_direction_grid(
    languages: Languages, scores: dict[str, float], path: Path, title: str = "BLEU"
) -> np.ndarray:
    """Draw the grid of `scores` ("de-fr" -> BLEU) to the PNG `path`; the grid drawn."""
    import matplotlib

    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt

    grid, langs = direction_grid(languages, scores), languages.languages
    n = len(langs)
    width, height = figure_inches(n)
    left, right, top, bottom = MARGIN_INCHES
    fig = plt.figure(figsize=(width, height), dpi=DPI)
    ax = fig.add_axes(
        (left / width, bottom / height, n * CELL_INCHES / width, n * CELL_INCHES / height)
    )
    vmin, vmax = color_scale(grid)
    cmap = matplotlib.colormaps[CMAP].with_extremes(bad=ZERO_SHOT)
    ax.imshow(grid, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
    zero_shot = set(zero_shot_cells(languages))
    for i in range(n):
        for j in range(n):
            if i == j:
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, color=BLANK, lw=0))
                continue
            label = "" if math.isnan(grid[i, j]) else f"{grid[i, j]:.1f}"
            if (i, j) in zero_shot:
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="//", lw=0))
                label = "\n".join(filter(None, [label, "zero-shot"]))
            dark = not math.isnan(grid[i, j]) and grid[i, j] < (vmin + vmax) / 2
            ax.text(j, i, label, ha="center", va="center", fontsize=8,
                    color="white" if dark else "black")  # fmt: skip
    ax.set_xticks(range(n), langs)
    ax.set_yticks(range(n), langs)
    ax.set_xlabel("target")
    ax.set_ylabel("source")
    ax.xaxis.set_label_position("top")
    ax.xaxis.tick_top()
    ax.set_title(title, fontsize=9, y=-0.12)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return grid
