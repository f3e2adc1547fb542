"""The training step without host-device syncs: device-side collectives, logging steps.

On a GPU the host queues kernels ahead of the device; anything that reads a device value on the
host (`.item()`, `bool()`, logging a metric to the progress bar) or copies a Python number to the
device waits for the queue to drain. At a few thousand tokens per GPU a step is short, so each
such wait costs a visible share of it.
"""

import lightning as L
import torch
from torch import Tensor
from torch.distributed import ReduceOp

from transformer_nmt.training.lightning_internals import is_logging_batch


def all_reduce_(tensor: Tensor, op: ReduceOp = ReduceOp.SUM) -> Tensor:
    """Reduce `tensor` over all ranks in place and return it; outside DDP, `tensor` itself.

    Unlike Lightning's `strategy.reduce`, no barrier first: with NCCL that barrier blocks the
    host until the device is idle, every call. A plain `all_reduce` is queued on the device like
    any kernel, so the step goes on without a host sync.
    """
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.all_reduce(tensor, op=op)
    return tensor


def is_logging_step(trainer: L.Trainer) -> bool:
    """Whether the loggers write this training batch's metrics (every `log_every_n_steps`).

    Metrics logged on other steps are overwritten unseen, yet each costs a host sync if it is a
    Python number (copied to the device) or shown in the progress bar (Lightning reads those with
    `.item()` after every batch). The same on every rank, so collectives may depend on it.
    """
    return bool(trainer.fast_dev_run) or is_logging_batch(trainer)
