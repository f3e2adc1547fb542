"""Scores by direction: the grid's cells where their directions are, and the W&B table and image
logged (real wandb, offline) at a validation, not at the sanity check."""

import json

import lightning as L
import matplotlib
import matplotlib.image
import numpy as np
import pytest
import torch
from lightning.pytorch.loggers import WandbLogger

from helpers import wandb_records
from transformer_nmt.data.languages import Languages
from transformer_nmt.evaluation.direction_grid import (
    BLANK,
    CELL_INCHES,
    CMAP,
    DPI,
    cell_center,
    color_scale,
    draw_direction_grid,
    figure_inches,
)
from transformer_nmt.training.callbacks.direction_scores import COLUMNS, DirectionScores

LANGUAGES = Languages.from_config(["de", "en", "fr"], exclude=["fr-de", "en-fr"])
BLEU = {"de-en": 30.0, "de-fr": 5.0, "en-de": 12.0, "fr-en": 21.0}  # one each, none alike


def pixel(image: np.ndarray, i: int, j: int) -> np.ndarray:
    """RGB of cell (i, j) off its centre, towards its top-left corner: beside the number."""
    x, y = cell_center(i, j, len(LANGUAGES.languages))
    off = 0.35 * CELL_INCHES * DPI
    return image[int(y - off), int(x - off), :3]


def test_each_direction_s_bleu_colours_its_source_row_and_target_column(tmp_path):
    path = tmp_path / "grid.png"
    grid = draw_direction_grid(LANGUAGES, BLEU, path)
    image = matplotlib.image.imread(path)
    n = len(LANGUAGES.languages)
    width, height = figure_inches(n)
    assert image.shape[:2] == (round(height * DPI), round(width * DPI))
    vmin, vmax = color_scale(grid)
    cmap = matplotlib.colormaps[CMAP]
    langs = LANGUAGES.languages
    for name, bleu in BLEU.items():
        src, tgt = name.split("-")
        i, j = langs.index(src), langs.index(tgt)
        assert grid[i, j] == bleu
        expected = np.array(cmap((bleu - vmin) / (vmax - vmin))[:3])
        assert pixel(image, i, j) == pytest.approx(expected, abs=0.02), name
    for i in range(n):
        assert pixel(image, i, i) == pytest.approx(np.array(BLANK), abs=0.02)
    for name in ("fr-de", "en-fr"):  # zero-shot: no score, hatched grey
        i, j = langs.index(name[:2]), langs.index(name[3:])
        assert np.isnan(grid[i, j])
        x, y = cell_center(i, j, n)
        half = int(0.45 * CELL_INCHES * DPI)
        cell = image[int(y) - half : int(y) + half, int(x) - half : int(x) + half, :3]
        colours = {tuple(round(float(v), 2) for v in c) for c in cell.reshape(-1, 3)}
        assert (0.8, 0.8, 0.8) in colours and (0.0, 0.0, 0.0) in colours  # grey and hatch


class Scored(L.LightningModule):
    """Logs fixed scores per direction at each validation, as TranslationModule names them."""

    def __init__(self):
        super().__init__()
        self.languages = LANGUAGES
        self.weight = torch.nn.Parameter(torch.zeros(1))

    def val_dataloader(self):
        return torch.utils.data.DataLoader(torch.zeros(2, 1), batch_size=1)

    def validation_step(self, batch, batch_idx):
        pass

    def on_validation_epoch_end(self):
        for name in LANGUAGES.names:
            self.log(f"val/bleu/{name}", BLEU[name])
            self.log(f"val/chrf/{name}", BLEU[name] + 10)
            self.log(f"val/off_target/{name}", 0.25)


@pytest.mark.slow  # a real (offline) W&B run
def test_wandb_holds_the_table_and_the_grid_of_each_validation(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")  # never the network
    monkeypatch.setenv("WANDB_SILENT", "true")
    logger = WandbLogger(project="p", save_dir=str(tmp_path), offline=True)
    trainer = L.Trainer(
        accelerator="cpu", logger=logger, callbacks=[DirectionScores()],
        default_root_dir=str(tmp_path), enable_progress_bar=False, enable_model_summary=False,
    )  # fmt: skip
    trainer.validate(Scored())
    logger.experiment.finish()
    (folder,) = (tmp_path / "wandb").glob("offline-run-*")
    (records,) = folder.glob("run-*.wandb")
    rows = wandb_records.history(records)
    (table_row,) = [r for r in rows if "val/directions/path" in r]
    table = json.loads((folder / "files" / table_row["val/directions/path"]).read_text())
    assert table["columns"] == COLUMNS
    assert [row[1:] for row in table["data"]] == [
        [name, name[:2], name[3:], BLEU[name], BLEU[name] + 10, 0.25] for name in LANGUAGES.names
    ]
    (image_row,) = [r for r in rows if "val/bleu_grid/filenames" in r]
    (name,) = image_row["val/bleu_grid/filenames"]
    logged = matplotlib.image.imread(folder / "files" / name)
    drawn = matplotlib.image.imread(tmp_path / "directions" / "step0000000.png")
    assert np.array_equal(logged, drawn)
