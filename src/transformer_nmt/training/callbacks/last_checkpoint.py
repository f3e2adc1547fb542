"""`last.ckpt` holds the state training stopped at: at its end, also after a signal's stop."""

import math
from pathlib import Path

import lightning as L


class LastCheckpoint(L.Callback):
    """Writes `<dirpath>/last.ckpt` when training stops, so that it can be resumed or averaged.

    - At the end of training (`max_steps`, `max_epochs`, `max_time`): Lightning 2.6's
      `ModelCheckpoint` refreshes `last.ckpt` only when it also saves a top-k checkpoint, so
      when the final validation does not improve the monitored metric the steps since the
      previous save would be lost.
    - When `max_steps` or `max_time` ends training mid-epoch, Lightning counts that epoch as
      finished, so a run extended from its final checkpoint (a higher `max_steps`) would start
      the next epoch, part-way through: the rest of the cut epoch and the start of the next
      would never be trained. Every checkpoint written at such an end records instead the loops'
      progress as it stood after the last batch, as a periodic checkpoint at that step does,
      and the extended run continues batch for batch as if never stopped.
    - After SIGTERM, SIGUSR1 or Ctrl-C: every rank stops after the same update
      (`training/stop.py`) and training ends as at `max_steps`, so the save is the one above.
    """

    def __init__(self, dirpath: str, filename: str = "last") -> None:
        self.path = Path(dirpath) / f"{filename}.ckpt"
        self.after_last_batch: dict | None = None  # the fit loop's state and epoch then

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch, batch_idx: int
    ) -> None:
        self.after_last_batch = {
            "fit_loop": trainer.fit_loop.state_dict(),
            "epoch": trainer.current_epoch,
        }

    def on_save_checkpoint(
        self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict
    ) -> None:
        if self.after_last_batch is not None and _ended_mid_epoch(trainer):
            checkpoint["loops"]["fit_loop"] = self.after_last_batch["fit_loop"]
            checkpoint["epoch"] = self.after_last_batch["epoch"]

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        trainer.save_checkpoint(self.path, weights_only=False)


def _ended_mid_epoch(trainer: L.Trainer) -> bool:
    """Whether the fit loop has closed an epoch whose batches did not all run."""
    epoch = trainer.fit_loop.epoch_progress.current
    batches = trainer.num_training_batches
    trained = trainer.fit_loop.epoch_loop.batch_progress.current.processed
    return epoch.processed == epoch.started and math.isfinite(batches) and trained < batches
