"""Training's progress as log lines: a job's log file (SLURM's, `train.log`) shows where a run is.

The progress bar draws on a terminal only; a batch job's log would otherwise hold nothing from the
first update to the end. As fairseq's `--log-interval`, a line every N updates, and one a
validation.
"""

import logging
import math
import time
from typing import Any

import lightning as L
import torch

log = logging.getLogger(__name__)


class ProgressLog(L.Callback):
    """Logs, on global rank 0, every `every_n_steps` updates: the update and its share of
    `max_steps`, the epoch, the training loss and target tokens a second (the latest logged, on
    `trainer.log_every_n_steps`' steps: none before the first), the learning rate, minutes so far
    and the minutes left at this run's pace; and after every validation its `val/` metrics.

    Args:
        every_n_steps: updates between lines; 0 logs none (validations still log).
    """

    def __init__(self, every_n_steps: int = 100) -> None:
        if every_n_steps < 0:
            raise ValueError(f"every_n_steps={every_n_steps} must be >= 0 (0: no update lines)")
        self.every_n_steps = every_n_steps
        self._start = 0.0
        self._start_step = 0
        self._logged_step = -1

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._start = time.monotonic()
        self._start_step = self._logged_step = trainer.global_step

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any
    ) -> None:
        step = trainer.global_step
        if (
            not trainer.is_global_zero
            or self.every_n_steps == 0
            or step == self._logged_step
            or step % self.every_n_steps
        ):
            return
        self._logged_step = step
        minutes = (time.monotonic() - self._start) / 60
        parts = [f"update {step}"]
        if trainer.max_steps > 0:
            parts[0] += f"/{trainer.max_steps} ({100 * step / trainer.max_steps:.0f}%)"
        parts.append(f"epoch {trainer.current_epoch}")
        metrics = trainer.callback_metrics
        for key, name, form in (
            ("train/loss", "loss", "{:.3f}"),
            ("train/tokens_per_sec", "tokens/s", "{:,.0f}"),
        ):
            if key in metrics and math.isfinite(value := float(metrics[key])):
                parts.append(f"{name} {form.format(value)}")
        if trainer.optimizers:
            parts.append(f"lr {trainer.optimizers[0].param_groups[0]['lr']:.3g}")
        parts.append(f"{minutes:.1f} min")
        done = step - self._start_step
        if trainer.max_steps > 0 and done > 0:
            left = minutes / done * (trainer.max_steps - step)
            parts.append(f"~{left:.0f} min left at this pace")
        log.info("Training: %s", ", ".join(parts))

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or not trainer.is_global_zero:
            return
        scores = {
            key: float(value)
            for key, value in sorted(trainer.callback_metrics.items())
            if key.startswith("val/") and isinstance(value, torch.Tensor) and value.numel() == 1
        }
        shown = ", ".join(f"{key} {value:.4g}" for key, value in scores.items())
        log.info("Validation at update %d: %s", trainer.global_step, shown or "no metrics")
