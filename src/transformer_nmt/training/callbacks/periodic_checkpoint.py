"""Checkpoints every so many minutes of training, with the clock read every N steps only."""

from datetime import timedelta
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import ModelCheckpoint


class PeriodicCheckpoint(ModelCheckpoint):
    """A `ModelCheckpoint` whose `train_time_interval` is checked every `check_every_n_steps`.

    Lightning 2.6's ModelCheckpoint reads the clock after every training batch and, so that the
    ranks agree, broadcasts rank zero's decision with `broadcast_object_list`: a pickle through a
    device tensor, one collective and host-device copies every batch. Checking every N steps
    saves a checkpoint up to N steps late and costs the broadcast once per N steps; with N equal
    to `trainer.log_every_n_steps` it falls on a step that waits for the device anyway. Other
    triggers (`every_n_train_steps`, `every_n_epochs`) work as in ModelCheckpoint.

    Args:
        check_every_n_steps: optimizer steps between two looks at the clock.
        train_time_interval, **kwargs: as ModelCheckpoint's.
    """

    def __init__(
        self,
        check_every_n_steps: int = 50,
        train_time_interval: timedelta | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(train_time_interval=train_time_interval, **kwargs)
        self.check_every_n_steps = check_every_n_steps
        self._timed = train_time_interval is not None

    def on_train_batch_end(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        if self._timed and trainer.global_step % self.check_every_n_steps:
            return
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
