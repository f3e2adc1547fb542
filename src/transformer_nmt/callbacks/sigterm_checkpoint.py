"""On SIGTERM, what clusters send before pre-emption, save a checkpoint to resume from."""

import logging
from pathlib import Path

import lightning as L
from lightning.pytorch.utilities.exceptions import SIGTERMException

log = logging.getLogger(__name__)


class SigtermCheckpoint(L.Callback):
    """Writes `<dirpath>/last.ckpt` when Lightning stops training on SIGTERM.

    Lightning 2.6 notes a SIGTERM, finishes the current batch (every rank, under DDP) and raises
    `SIGTERMException`; nothing is saved unless a callback does it, here before teardown.
    `train` then ends the process without a traceback.
    """

    def __init__(self, dirpath: str, filename: str = "last") -> None:
        self.path = Path(dirpath) / f"{filename}.ckpt"

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
