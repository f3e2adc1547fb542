"""Dropout raised, or R-Drop turned on, late in training, once a small corpus starts to be
overfitted."""

import logging
import math
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Timer

from transformer_nmt.model.interface import SettableDropout
from transformer_nmt.training.run.time_budget import budget_timer
from transformer_nmt.training.step.hot_path import is_logging_step

log = logging.getLogger(__name__)


class LateDropout(L.Callback):
    """From a point late in training on, every dropout of the model drops with probability `p`
    instead of the model's own `dropout`, and, with `rdrop_alpha`, each batch trains with R-Drop
    (`module.rdrop_alpha`) at that weight.

    Not the paper. "Late dropout" (Liu et al., 2023, "Dropout Reduces Underfitting") trains
    without dropout first and adds it for the rest of training, against overfitting. On
    Multi30k a fast CPU overfits the recipe late in the hour, while a higher rate from the
    start learns too slowly (experiments/multi30k_sweep/README.md): this keeps the recipe's
    rate while the validation loss still falls and raises it after. R-Drop regularizes at
    about twice the cost of an update there; late, the hour's first part keeps the plain pace.

    The point is one of:
    - `after_minutes` into `trainer.max_time`, on the `Timer`'s clock as for
      `callbacks.timed_cooldown`. Each rank reads its own clock, so ranks may switch a few
      updates apart, which no collective depends on. The same minute falls at a third of the
      updates on a machine a third as fast;
    - `patience` validations in a row without a new lowest `val/loss` (synchronised across
      ranks, so every rank switches alike), whatever the machine's pace.

    A resumed run that had switched switches again at once. A new rate needs a model that offers
    it (`model.interface.SettableDropout`, the Transformer); R-Drop alone trains any.
    """

    def __init__(
        self,
        p: float | None,
        after_minutes: float | None = None,
        patience: int | None = None,
        rdrop_alpha: float | None = None,
    ) -> None:
        if p is None and not rdrop_alpha:
            raise ValueError(
                "callbacks.late_dropout: set p (a dropout rate), rdrop_alpha (an R-Drop weight) "
                "or both; with neither it would change nothing"
            )
        if p is not None and not 0.0 <= p < 1.0:
            raise ValueError(f"callbacks.late_dropout.p={p}: give a rate in [0, 1), e.g. 0.3")
        if rdrop_alpha is not None and rdrop_alpha < 0:
            raise ValueError(f"callbacks.late_dropout.rdrop_alpha={rdrop_alpha}: give 0 or more")
        if (after_minutes is None) == (patience is None):
            raise ValueError(
                "callbacks.late_dropout: set one of after_minutes (a minute of "
                "trainer.max_time) and patience (validations without a new lowest val/loss), "
                f"not {'both' if patience is not None else 'neither'}"
            )
        if patience is not None and patience < 1:
            raise ValueError(f"callbacks.late_dropout.patience={patience}: give 1 or more")
        self.p = p
        self.after_minutes = after_minutes
        self.patience = patience
        self.rdrop_alpha = rdrop_alpha
        self.switched = False
        self.lowest_loss = math.inf
        self.stale_validations = 0
        self._timer: Timer | None = None

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        model = pl_module.model
        if self.p is not None and not isinstance(model, SettableDropout):
            raise ValueError(
                f"callbacks.late_dropout.p={self.p} changes the dropout rate during training, "
                f"which the {model.config.family} model does not offer: use it with the "
                "Transformer, or set callbacks.late_dropout.p=null to turn on R-Drop alone"
            )
        if self.rdrop_alpha is not None and pl_module.rdrop_alpha:
            raise ValueError(
                f"callbacks.late_dropout.rdrop_alpha={self.rdrop_alpha} turns R-Drop on late, but "
                f"module.rdrop_alpha={pl_module.rdrop_alpha} trains with it from the start: "
                "set module.rdrop_alpha=0 for late R-Drop"
            )
        if self.after_minutes is not None:
            self._timer = budget_timer(
                trainer,
                "callbacks.late_dropout.after_minutes",
                self.after_minutes,
                "callbacks.late_dropout.patience",
            )

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.switched:  # resumed after the switch: neither is part of the weights
            self._apply(pl_module)

    def on_train_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch, batch_idx: int
    ) -> None:
        if self._timer is None or self.switched:
            return
        if self._timer.time_elapsed() >= self.after_minutes * 60:
            self._switch(trainer, f"{self.after_minutes:g} minutes in")

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.patience is None or self.switched or trainer.sanity_checking:
            return
        loss = float(trainer.callback_metrics["val/loss"])
        if loss < self.lowest_loss:
            self.lowest_loss, self.stale_validations = loss, 0
            return
        self.stale_validations += 1
        if self.stale_validations >= self.patience:
            lowest = f"{self.lowest_loss:.4f}"
            self._switch(trainer, f"{self.patience} validations without val/loss below {lowest}")

    def _switch(self, trainer: L.Trainer, why: str) -> None:
        self.switched = True
        self._apply(trainer.lightning_module)
        now = ", ".join(
            f"{name} {value:g}"
            for name, value in (("dropout", self.p), ("R-Drop alpha", self.rdrop_alpha))
            if value is not None
        )
        log.info("%s, at update %d: %s from now on", why, trainer.global_step, now)

    def _apply(self, pl_module: L.LightningModule) -> None:
        if self.p is not None:
            pl_module.model.dropout_rate = self.p
        if self.rdrop_alpha is not None:
            pl_module.rdrop_alpha = self.rdrop_alpha

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch, batch_idx: int
    ) -> None:
        if is_logging_step(trainer):  # host tensors: no copy to the device, no sync
            if isinstance(pl_module.model, SettableDropout):
                rate = torch.tensor(pl_module.model.dropout_rate, device="cpu")
                pl_module.log("train/dropout", rate, on_step=True, on_epoch=False)
            if self.rdrop_alpha is not None:
                alpha = torch.tensor(float(pl_module.rdrop_alpha), device="cpu")
                pl_module.log("train/rdrop_alpha", alpha, on_step=True, on_epoch=False)

    def state_dict(self) -> dict[str, Any]:
        return {
            "switched": self.switched,
            "lowest_loss": self.lowest_loss,
            "stale_validations": self.stale_validations,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.switched = state_dict["switched"]
        self.lowest_loss = state_dict["lowest_loss"]
        self.stale_validations = state_dict["stale_validations"]
