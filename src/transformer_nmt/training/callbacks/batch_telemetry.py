"""Per-step training telemetry: target tokens per second and the padding in each batch."""

import time
from typing import Any

import lightning as L
from torch import Tensor

from transformer_nmt.data.tokenizer import PAD_ID


class BatchTelemetry(L.Callback):
    """Logs `train/tokens_per_sec`, `train/src_pad_share` and `train/tgt_pad_share`.

    Tokens per second are the batch's non-pad target tokens over the wall time between
    consecutive batch ends, which covers data loading, forward, backward and the optimizer step:
    what a user waits for, not a kernel timing. The pad shares are what length bucketing is meant
    to save, computed on this rank's batch (rank zero's is logged), as tensors: nothing here
    waits for the device, `log` syncs only when it writes.
    """

    def __init__(self) -> None:
        self._last: float | None = None

    def on_train_batch_end(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        now = time.perf_counter()
        if self._last is not None:
            tokens = batch["tgt_index"].numel()  # a shape, known on the host
            pl_module.log("train/tokens_per_sec", tokens / (now - self._last), prog_bar=True)
        self._last = now
        pl_module.log("train/src_pad_share", pad_share(batch["src"]))
        pl_module.log("train/tgt_pad_share", pad_share(batch["tgt_out"]))

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._last = None

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._last = None  # validation time is not training time


def pad_share(ids: Tensor) -> Tensor:
    """Share of a padded (B, L) id tensor that is padding, as a 0-d tensor."""
    return (ids == PAD_ID).float().mean()
