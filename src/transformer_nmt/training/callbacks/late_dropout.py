"""Dropout raised late in a time budget, once a small corpus starts to be overfitted."""

import logging
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Timer

from transformer_nmt.model.dropout import Dropout

log = logging.getLogger(__name__)


class LateDropout(L.Callback):
    """From `after_minutes` into `trainer.max_time` on, every Transformer dropout drops with
    probability `p` instead of the model's own `dropout`.

    Not the paper. "Late dropout" (Liu et al., 2023, "Dropout Reduces Underfitting") trains
    without dropout first and adds it for the rest of training, against overfitting. On
    Multi30k a fast CPU overfits the recipe from minute 22 of the hour, while a higher rate
    from the start learns too slowly (experiments/multi30k_sweep/): this keeps the recipe's
    rate while the validation loss still falls and raises it after. The clock is the `Timer`'s,
    as for `module.cooldown_minutes`; a resumed run that had switched switches again at once.
    Each rank reads its own clock: ranks may switch a few updates apart, which no collective
    depends on.
    """

    def __init__(self, after_minutes: float, p: float) -> None:
        if not 0.0 <= p < 1.0:
            raise ValueError(f"callbacks.late_dropout.p={p}: give a rate in [0, 1), e.g. 0.3")
        self.after_minutes = after_minutes
        self.p = p
        self.switched = False
        self._timer: Timer | None = None
        self._dropouts: list[Dropout] = []

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        timers = [c for c in trainer.callbacks if isinstance(c, Timer)]
        if not timers:
            raise ValueError(
                f"callbacks.late_dropout.after_minutes={self.after_minutes} needs a time budget: "
                "set trainer.max_time (e.g. 00:01:00:00), or leave callbacks.late_dropout out"
            )
        self._timer = timers[0]
        budget = (self._timer.time_remaining() + self._timer.time_elapsed()) / 60
        if not 0 <= self.after_minutes < budget:
            raise ValueError(
                f"callbacks.late_dropout.after_minutes={self.after_minutes} must lie between 0 "
                f"and the {budget:g} minutes of trainer.max_time"
            )
        self._dropouts = [m for m in pl_module.modules() if isinstance(m, Dropout)]
        if not self._dropouts:
            raise ValueError(
                "callbacks.late_dropout raises the Transformer's dropout; this model has none"
            )

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.switched:  # resumed after the switch: the rate is not part of the weights
            self._raise()

    def on_train_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch, batch_idx: int
    ) -> None:
        if self.switched or self._timer.time_elapsed() < self.after_minutes * 60:
            return
        self.switched = True
        self._raise()
        log.info(
            "%g minutes in, at update %d: dropout %g from now on",
            self.after_minutes,
            trainer.global_step,
            self.p,
        )

    def _raise(self) -> None:
        for module in self._dropouts:
            module.p = self.p

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch, batch_idx: int
    ) -> None:
        pl_module.log("train/dropout", self._dropouts[0].p, on_step=True, on_epoch=False)

    def state_dict(self) -> dict[str, Any]:
        return {"switched": self.switched}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.switched = state_dict["switched"]
