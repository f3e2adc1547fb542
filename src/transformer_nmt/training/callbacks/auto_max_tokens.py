"""`data.max_tokens=auto` resolved on each device before the first batch, and agreed on."""

import logging

import lightning as L
import torch

from transformer_nmt.data.token_budget import MEMORY_MARGIN
from transformer_nmt.training.batch_size import per_rank_cap, plan_update
from transformer_nmt.training.budget_probe import Measurement, measure_max_tokens
from transformer_nmt.training.callbacks.late_dropout import LateDropout

log = logging.getLogger(__name__)


class AutoMaxTokens(L.Callback):
    """Resolves `data.max_tokens=auto` when fit sets up, before any loader is built.

    On each device, the largest budget whose worst batches (the longest and the shortest pairs,
    padded as training pads them, doubled where R-Drop may run) fit in free memory with `margin`
    of it left over (`budget_probe.measure_max_tokens`); the ranks then take the smallest, so
    that all cut the same batches. At most `per_rank_cap`: the rank's share of
    `data.tokens_per_update`, rounded up, else `MAX_AUTO_TOKENS`. `trainer.accumulate_grad_batches`
    is then derived from `data.tokens_per_update` by `plan_update`, which may shrink the budget
    to land near it. On CPUs the budget is `CPU_MAX_TOKENS` unless `memory_limit` (bytes) is
    given, which caps free memory on any device and on CPUs measures the steps with torch's
    profiler. `measured` holds this device's `Measurement`.
    """

    def __init__(self, margin: float = MEMORY_MARGIN, memory_limit: int | None = None):
        self.margin, self.memory_limit = margin, memory_limit
        self.measured: Measurement | None = None

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        datamodule = trainer.datamodule
        if stage != "fit" or datamodule is None or datamodule.max_tokens is not None:
            return  # a number given, or resolved already
        device = trainer.strategy.root_device
        tokens_per_update = datamodule.hparams.tokens_per_update
        lengths = datamodule.train_pair_lengths()
        longest = max(lengths)
        self.measured = measure_max_tokens(
            pl_module.model,
            device,
            trainer.precision,
            trainer.precision_plugin.forward_context,
            lengths,
            per_rank_cap(tokens_per_update, trainer.world_size, longest),
            datamodule.hparams.pad_to_multiple_of,
            rdrop=may_train_with_rdrop(trainer, pl_module),
            margin=self.margin,
            memory_limit=self.memory_limit,
        )
        mine = self.measured.max_tokens
        budget = int(trainer.strategy.reduce(torch.tensor(mine, device=device), reduce_op="min"))
        datamodule.max_tokens = budget
        if tokens_per_update:  # may shrink the batches, and says so
            plan = plan_update(tokens_per_update, budget, trainer.world_size, longest)
            datamodule.max_tokens = plan.max_tokens
            trainer.accumulate_grad_batches = plan.accumulate_grad_batches
        log.info(
            "data.max_tokens=auto: %d tokens a side per batch (this device: %d, the least over "
            "%d ranks taken; %.0f%% of free memory kept spare; %s); accumulate_grad_batches=%d",
            budget,
            mine,
            trainer.world_size,
            100 * self.margin,
            describe(self.measured),
            trainer.accumulate_grad_batches,
        )


def may_train_with_rdrop(trainer: L.Trainer, pl_module: L.LightningModule) -> bool:
    """Whether any batch of this fit may run R-Drop: from the start, or once a callback turns
    it on (`callbacks=late_dropout` with its `rdrop_alpha`)."""
    late = any(isinstance(c, LateDropout) and c.rdrop_alpha for c in trainer.callbacks)
    return bool(getattr(pl_module, "rdrop_alpha", 0)) or late


def describe(measured: Measurement) -> str:
    """Which batch bound the budget, in words, for the log."""
    rdrop = ", R-Drop's doubled batch" if measured.rdrop else ""
    if measured.free_bytes is None:
        return "not measured on a CPU"
    if measured.binding is None:
        return f"the cap bound it{rdrop}"
    return f"pairs of {measured.binding} tokens bound it{rdrop}"
