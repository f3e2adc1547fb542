"""An exponential moving average (EMA) of the weights, validated and saved in their place."""

from typing import Any

import lightning as L
from lightning.pytorch.callbacks import WeightAveraging
from torch.optim.swa_utils import get_ema_multi_avg_fn


class WeightEMA(WeightAveraging):
    """After every update past `start_step`: ema = decay * ema + (1 - decay) * weights.

    Lightning's callback does the bookkeeping: validation runs on the average, a checkpoint's
    `state_dict` holds the average (what `nmt-translate`, `nmt-evaluate`, `nmt-average` and the
    exporters read) and `current_model_state` the trained weights, from which a resumed run goes
    on. This adds the update as one `torch._foreach_lerp_` over all weights (Lightning's
    `EMAWeightAveraging` loops over the tensors in Python) and a start step: the average begins
    as a copy of the weights after the first update past `start_step`, so it never mixes in the
    untrained start.

    An update `age` updates back weighs decay ** age: half the average lies on the last
    ln(2) / (1 - decay) updates, 1,386 at 0.9995 (7 minutes of the Multi30k hour). Averaging
    checkpoints still applies on top and reaches further back: `nmt-evaluate --average-last N`
    averages the saved averages.
    """

    def __init__(self, decay: float, start_step: int = 0) -> None:
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"callbacks.ema.decay={decay}: give a decay in [0, 1), e.g. 0.9995")
        if start_step < 0:
            raise ValueError(f"callbacks.ema.start_step={start_step}: give a step >= 0")
        super().__init__()
        self.decay = decay
        self.start_step = start_step

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        # Made here, not in __init__: ddp_spawn pickles the callbacks into its processes, and
        # torch's update is a closure that pickle cannot carry.
        self._kwargs["multi_avg_fn"] = get_ema_multi_avg_fn(self.decay)
        super().setup(trainer, pl_module, stage)

    def should_update(self, step_idx: int | None = None, epoch_idx: int | None = None) -> bool:
        return step_idx is not None and step_idx >= self.start_step

    def started(self) -> bool:
        """Whether the average exists yet: until `start_step`, the model's own weights stand in
        for it (Lightning's callback would validate and save the untrained start)."""
        return self._average_model is not None and self._average_model.n_averaged > 0

    def on_validation_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.started():
            super().on_validation_epoch_start(trainer, pl_module)

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.started():
            super().on_validation_epoch_end(trainer, pl_module)

    def on_save_checkpoint(
        self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        if self.started():
            super().on_save_checkpoint(trainer, pl_module, checkpoint)

    def on_load_checkpoint(
        self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        if "current_model_state" in checkpoint:  # saved once the average had started
            super().on_load_checkpoint(trainer, pl_module, checkpoint)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Lightning puts the average into the model here, but the checkpoint policy's
        `on_train_end` runs after it and writes `last.ckpt`, whose trained weights would then be
        the average: a run resumed from it would go on from the average. So that waits for
        `on_fit_end`."""

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.started():
            super().on_train_end(trainer, pl_module)  # from here on, the model holds the average
