"""`data.max_tokens=auto` resolved on each device before the first batch, and agreed on."""

import logging

import lightning as L
import torch

from transformer_nmt.data.token_budget import MEMORY_MARGIN, BudgetError
from transformer_nmt.training.callbacks.late_dropout import LateDropout
from transformer_nmt.training.callbacks.plan_record import PlanRecord, plan_record
from transformer_nmt.training.plan.batch_size import per_rank_cap, plan_update
from transformer_nmt.training.plan.budget_probe import Measurement, measure_max_tokens
from transformer_nmt.training.plan.refusals import on_every_rank

log = logging.getLogger(__name__)

MEASURING = "measuring data.max_tokens=auto"


class AutoMaxTokens(L.Callback):
    """Resolves `data.max_tokens=auto` when fit sets up, before any loader is built.

    On each device, the largest budget whose worst batches (the longest and the shortest pairs,
    padded as training pads them, doubled where R-Drop may run) fit in free memory with `margin`
    of it left over (`budget_probe.measure_max_tokens`); the ranks then take the smallest, so
    that all cut the same batches. At most `per_rank_cap`: the rank's share of
    `data.tokens_per_update`, rounded up, else `MAX_AUTO_TOKENS`. The accumulation is then
    derived from `data.tokens_per_update` by `plan_update`, which may shrink the budget to land
    near it; the run plan takes both (`PlanRecord.take_measured`), and the trainer and the
    datamodule batch by it. On CPUs the budget is `CPU_MAX_TOKENS` unless `memory_limit` (bytes) is
    given, which caps free memory on any device and on CPUs measures the steps with torch's
    profiler. A resumed run keeps the budget its plan saved, once the same search capped at it
    confirms that it still fits. A probe that fails on one rank stops every rank, naming it
    (`refusals.on_every_rank`). `measured` holds this device's `Measurement`.
    """

    def __init__(self, margin: float = MEMORY_MARGIN, memory_limit: int | None = None):
        self.margin, self.memory_limit = margin, memory_limit
        self.measured: Measurement | None = None

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        record = plan_record(trainer)
        if stage != "fit" or trainer.datamodule is None or record is None:
            return
        plan = record.plan
        if plan.max_tokens is None:
            self.resolve(trainer, pl_module, record)
        elif plan.auto_budget and plan.resume_from:
            self.confirm(trainer, pl_module, plan.max_tokens, plan.resume_from)

    def resolve(self, trainer: L.Trainer, pl_module: L.LightningModule, record: PlanRecord) -> None:
        """Measure the budget, take the least over the ranks, derive the accumulation from the
        plan's `tokens_per_update` target, and complete the plan with them."""
        tokens_per_update = record.plan.tokens_per_update
        longest = max(trainer.datamodule.train_pair_lengths())
        cap = per_rank_cap(tokens_per_update, trainer.world_size, longest)
        self.measured = on_every_rank(MEASURING, lambda: self.measure(trainer, pl_module, cap))
        mine = self.measured.max_tokens
        budget = least_over_ranks(trainer, mine)
        max_tokens, accumulate = budget, record.plan.accumulate_grad_batches
        if tokens_per_update:  # may shrink the batches, and says so
            update = plan_update(tokens_per_update, budget, trainer.world_size, longest)
            max_tokens, accumulate = update.max_tokens, update.accumulate_grad_batches
        record.take_measured(trainer, max_tokens, accumulate)
        log.info(
            "data.max_tokens=auto: %d tokens a side per batch (this device: %d, the least over "
            "%d ranks taken; %.0f%% of free memory kept spare; %s); accumulate_grad_batches=%d",
            budget,
            mine,
            trainer.world_size,
            100 * self.margin,
            describe(self.measured),
            accumulate,
        )

    def confirm(
        self, trainer: L.Trainer, pl_module: L.LightningModule, saved: int, checkpoint: str
    ) -> None:
        """A resumed run keeps the budget it started with, so that its interrupted epoch goes on
        with the batches the checkpoint counted: refused where that budget no longer fits (a
        node with less free memory), on every rank, before the first batch."""
        self.measured = on_every_rank(MEASURING, lambda: self.measure(trainer, pl_module, saved))
        if self.measured.free_bytes is None:
            return  # a CPU without a limit: batches are not sized to memory
        fits = least_over_ranks(trainer, self.measured.max_tokens)
        if fits < saved:
            raise BudgetError(
                f"data.max_tokens=auto: {checkpoint} trains batches of {saved} tokens a side, "
                f"measured when the run started; on this node's memory {fits} fit at most "
                f"({describe(self.measured)}). Resume where more memory is free, or go on as a "
                f"new run from its state: init=continue init.from={checkpoint} (its optimizer, "
                "schedule and step), which measures the budget anew"
            )
        log.info("data.max_tokens=auto: %d, as measured when the run started, still fits", saved)

    def measure(self, trainer: L.Trainer, pl_module: L.LightningModule, cap: int) -> Measurement:
        """This device's budget, at most `cap` (`budget_probe.measure_max_tokens`)."""
        datamodule = trainer.datamodule
        return measure_max_tokens(
            pl_module.model,
            trainer.strategy.root_device,
            trainer.precision,
            trainer.precision_plugin.forward_context,
            datamodule.train_pair_lengths(),
            cap,
            datamodule.hparams.pad_to_multiple_of,
            rdrop=may_train_with_rdrop(trainer, pl_module),
            margin=self.margin,
            memory_limit=self.memory_limit,
        )


def least_over_ranks(trainer: L.Trainer, budget: int) -> int:
    """The smallest of every rank's `budget`: what all of them can train."""
    device = trainer.strategy.root_device
    return int(trainer.strategy.reduce(torch.tensor(budget, device=device), reduce_op="min"))


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
