"""`last.ckpt` holds the state training stopped at: after SIGTERM, and when training ends."""

import logging
from pathlib import Path

import lightning as L
from lightning.pytorch.utilities.exceptions import SIGTERMException

log = logging.getLogger(__name__)


class LastCheckpoint(L.Callback):
    """Writes `<dirpath>/last.ckpt` when training stops, so that it can be resumed or averaged.

    - At the end of training (`max_steps`, `max_epochs`, `max_time`): Lightning 2.6's
      `ModelCheckpoint` refreshes `last.ckpt` only when it also saves a top-k checkpoint, so
      when the final validation does not improve the monitored metric the steps since the
      previous save would be lost.
    - On SIGTERM, what clusters send before pre-emption: Lightning notes it, finishes the current
      batch (every rank, under DDP) and raises `SIGTERMException`; nothing is saved unless a
      callback does it, here before teardown. `train` then ends the process without a traceback.
    """

    def __init__(self, dirpath: str, filename: str = "last") -> None:
        self.path = Path(dirpath) / f"{filename}.ckpt"

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        trainer.save_checkpoint(self.path, weights_only=False)

    def on_exception(
        self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException
    ) -> None:
        if isinstance(exception, SIGTERMException):
            trainer.save_checkpoint(self.path, weights_only=False)  # all it takes to resume
            log.warning(
                "SIGTERM at step %d: saved %s; resume with ckpt_path=%s",
                trainer.global_step,
                self.path,
                self.path,
            )
