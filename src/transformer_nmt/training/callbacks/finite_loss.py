"""A NaN or infinite training loss stops the run before it reaches the weights, or is skipped."""

import logging

import lightning as L
import torch
from torch import Tensor
from torch.distributed import ReduceOp

from transformer_nmt.training.step.hot_path import all_reduce_

log = logging.getLogger(__name__)


class FiniteLoss(L.Callback):
    """Checks the training loss of every optimizer step before the optimizer applies it.

    By default a non-finite loss raises `FloatingPointError` before the optimizer step, so the
    weights stay finite and no checkpoint is written afterwards: the last one is the last good
    one. With `skip=True` the step's gradients are dropped instead (the optimizer leaves every
    weight as it was, while the step count and learning-rate schedule move on) and the number of
    skipped steps is logged as `train/skipped_steps`.

    Under DDP the ranks agree before acting, since a rank that stopped or skipped alone would
    leave the others waiting in a collective.

    The check costs one host sync per optimizer step: the host must know before it queues the
    optimizer step, and a check every N steps would let a NaN into the weights (Adam spreads it
    to every parameter) and into any checkpoint written before the check. The sync comes after
    backward is queued, so the device is idle only while the host queues the optimizer step and
    the next batch.
    """

    def __init__(self, skip: bool = False) -> None:
        self.skip = skip
        self.skipped = 0
        self._finite: Tensor | None = None  # on the device: all losses of this step finite
        self._loss: Tensor | None = None

    def on_before_backward(
        self, trainer: L.Trainer, pl_module: L.LightningModule, loss: Tensor
    ) -> None:
        # Accumulated micro-batches share one step: any bad one spoils it.
        self._loss = loss.detach()
        finite = torch.isfinite(self._loss)
        self._finite = finite if self._finite is None else self._finite & finite

    def on_before_optimizer_step(
        self, trainer: L.Trainer, pl_module: L.LightningModule, optimizer: torch.optim.Optimizer
    ) -> None:
        # The ranks' flags meet on the device (no barrier, no copy from the host), then one read:
        # Lightning's reduce_boolean_decision would cost three syncs and a barrier.
        finite = all_reduce_(self._finite.int(), ReduceOp.MIN)
        self._finite = None
        if finite.item():
            return
        if not self.skip:
            raise FloatingPointError(
                f"training diverged: train/loss={self._loss.item()} at step {trainer.global_step}. "
                "Stopped before the optimizer step: the last checkpoint holds the last finite "
                "weights. Lower module.lr_factor or raise module.warmup_steps, or set "
                "callbacks.finite_loss.skip=true to skip such steps"
            )
        # Optimizers leave parameters without a gradient untouched.
        for group in optimizer.param_groups:
            for param in group["params"]:
                param.grad = None
        self.skipped += 1
        log.warning(
            "non-finite train/loss at step %d: step skipped (%d so far)",
            trainer.global_step,
            self.skipped,
        )
        pl_module.log("train/skipped_steps", float(self.skipped))

    def state_dict(self) -> dict[str, int]:
        return {"skipped": self.skipped}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.skipped = state["skipped"]
