"""Training speed in the unit that matters for translation: target tokens per second."""

import time
from typing import Any

import lightning as L

from transformer_nmt.data.tokenizer import PAD_ID


class TokensPerSecond(L.Callback):
    """Logs `train/tokens_per_sec`: non-pad target tokens over the wall time between steps.

    Wall time between consecutive batch ends covers data loading, forward, backward and the
    optimizer step, so the figure is what a user waits for, not a kernel timing.
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
            tokens = (batch["tgt_out"] != PAD_ID).sum().item()
            pl_module.log("train/tokens_per_sec", tokens / (now - self._last), prog_bar=True)
        self._last = now

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._last = None

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._last = None  # validation time is not training time
