"""A multilingual run's scores by direction at every validation: a W&B table and a heatmap."""

from pathlib import Path

import lightning as L
from lightning.pytorch.loggers import WandbLogger

from transformer_nmt.evaluation.direction_grid import draw_direction_grid

COLUMNS = ["step", "direction", "source", "target", "bleu", "chrf", "off_target"]
KINDS = ("bleu", "chrf", "off_target")  # validation logs val/<kind>/<direction>


class DirectionScores(L.Callback):
    """Each direction's validation scores side by side, for a module with `languages`.

    After each validation, rank zero draws the source-by-target BLEU grid
    (`evaluation/direction_grid.py`: rows source, columns target, zero-shot cells marked) to
    `<dirpath>/step<step>.png` and, with a W&B logger, logs it as the image `val/bleu_grid` and
    the rows (COLUMNS, one a trained direction) as the table `val/directions`. A module of one
    direction, and Lightning's sanity check, draw nothing.

    Args:
        dirpath: folder of the PNGs; `<trainer.default_root_dir>/directions` if None.
    """

    def __init__(self, dirpath: str | None = None) -> None:
        self.dirpath = dirpath

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        languages = getattr(pl_module, "languages", None)
        if languages is None or trainer.sanity_checking or not trainer.is_global_zero:
            return
        step, metrics = trainer.global_step, trainer.callback_metrics
        rows = []
        for name, (src, tgt) in zip(languages.names, languages.directions, strict=True):
            found = {k: metrics.get(f"val/{k}/{name}") for k in KINDS}
            values = [None if v is None else round(float(v), 4) for v in found.values()]
            rows.append([step, name, src, tgt, *values])
        bleu = {row[1]: row[4] for row in rows if row[4] is not None}
        folder = Path(self.dirpath or Path(trainer.default_root_dir) / "directions")
        png = folder / f"step{step:07d}.png"
        draw_direction_grid(languages, bleu, png, title=f"val/bleu at step {step}")
        for logger in trainer.loggers:
            if isinstance(logger, WandbLogger):
                logger.log_table("val/directions", columns=COLUMNS, data=rows, step=step)
                logger.log_image("val/bleu_grid", [str(png)], step=step)
