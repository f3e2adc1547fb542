"""Training telemetry at logging steps: target tokens per second, padding, resident memory."""

import os
import time
from pathlib import Path
from typing import Any

import lightning as L
import torch
from torch import Tensor

from transformer_nmt.data.tokenizer import PAD_ID
from transformer_nmt.training.step.hot_path import is_logging_step


class BatchTelemetry(L.Callback):
    """Logs `train/tokens_per_sec[_global]`, `train/{src,tgt}_pad_share` and `train/rss_gb`.

    Tokens per second are the non-pad target tokens of the batches since the last logging step
    over the wall time they took, from batch end to batch end, which covers data loading, forward,
    backward and the optimizer step: what a user waits for, not a kernel timing. `tokens_per_sec`
    is this rank's (rank zero's is logged), `tokens_per_sec_global` the sum over the ranks. The
    pad shares are what length bucketing is meant to save, on this rank's batch of the logging
    step. `rss_gb` is this process's resident memory (rank zero's is logged), so that its growth
    over a run shows as a curve. Only logging steps log: a Python number logged costs a
    host-to-device copy, and under DDP the global figure a collective.
    """

    def __init__(self) -> None:
        self._start: float | None = None  # end of the batch that opened the window
        self._tokens = 0  # since then

    def on_train_batch_end(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        now = time.perf_counter()
        if self._start is None:
            self._start = now  # after a pause the first batch only opens the window
        else:
            self._tokens += batch["tgt_index"].numel()  # a shape, known on the host
        if not is_logging_step(trainer):
            return
        if self._tokens:  # the same on every rank: they log, and so reduce, together
            rate = self._tokens / (now - self._start)
            # On the host, where the progress bar reads it after every batch for free.
            pl_module.log("train/tokens_per_sec", torch.tensor(rate, device="cpu"), prog_bar=True)
            # On the device, which NCCL needs: one copy and one reduction per logging step.
            global_rate = torch.tensor(rate, device=pl_module.device)
            pl_module.log(
                "train/tokens_per_sec_global", global_rate, reduce_fx="sum", sync_dist=True
            )
        self._start, self._tokens = now, 0
        rss = rss_gb()
        if rss is not None:  # read on the host, logged from the host: no device sync
            pl_module.log("train/rss_gb", torch.tensor(rss, device="cpu"))
        pl_module.log("train/src_pad_share", pad_share(batch["src"]))
        pl_module.log("train/tgt_pad_share", pad_share(batch["tgt_out"]))

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._start, self._tokens = None, 0

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._start, self._tokens = None, 0  # validation time is not training time


def pad_share(ids: Tensor) -> Tensor:
    """Share of a padded (B, L) id tensor that is padding, as a 0-d tensor."""
    return (ids == PAD_ID).float().mean()


def rss_gb(statm: Path = Path("/proc/self/statm")) -> float | None:
    """This process's resident set size in GiB; None where the kernel has no `statm` (not Linux)."""
    try:
        resident_pages = int(statm.read_text().split()[1])
    except OSError:
        return None
    return resident_pages * os.sysconf("SC_PAGE_SIZE") / 2**30
