"""`data.max_tokens=auto` resolved on each device before the first batch, and agreed on."""

import copy
import logging
import math
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Protocol

import lightning as L
import torch
from torch.profiler import ProfilerActivity, profile

from transformer_nmt.data.padding import pad_multiple
from transformer_nmt.data.token_budget import (
    CPU_MAX_TOKENS,
    MEMORY_MARGIN,
    largest_budget,
    worst_batch,
)
from transformer_nmt.model import EncoderDecoder
from transformer_nmt.training.batch_size import per_rank_cap, plan_update
from transformer_nmt.training.loss import label_smoothed_nll
from transformer_nmt.training.module import real_target_logits

log = logging.getLogger(__name__)


class DeviceMemory(Protocol):
    """What the search reads of a device: its free bytes, and the peak bytes of a step."""

    def free(self) -> int:
        """Bytes free before the probe's model arrived."""

    def peak(self, step: Callable[[], None], resident: int) -> float:
        """Bytes in use at the step's peak, counted from before the probe's model arrived
        (`resident`: its weights and optimizer state); inf if the device ran out."""


class CudaMemory:
    """A GPU's memory through torch's allocator counters; `limit` caps what counts as free."""

    def __init__(self, device: torch.device, limit: int | None = None):
        # Both read before the probe's model arrives, which its peaks then count.
        self.device, self.base = device, torch.cuda.memory_allocated(device)
        free, _ = torch.cuda.mem_get_info(device)
        # Blocks torch holds but does not use are free to this process too.
        free += torch.cuda.memory_reserved(device) - self.base
        self.free_bytes = free if limit is None else min(free, limit)

    def free(self) -> int:
        return self.free_bytes

    def peak(self, step: Callable[[], None], resident: int) -> float:
        torch.cuda.reset_peak_memory_stats(self.device)
        try:
            step()
            torch.cuda.synchronize(self.device)
        except torch.OutOfMemoryError:
            torch.cuda.empty_cache()
            return math.inf
        return torch.cuda.max_memory_allocated(self.device) - self.base


class HostMemory:
    """Host memory with an injected limit, the step's allocations read from torch's profiler.

    For CPUs, where no allocator counts a peak: it checks the search with a real step.
    """

    def __init__(self, limit: int):
        self.limit = limit

    def free(self) -> int:
        return self.limit

    def peak(self, step: Callable[[], None], resident: int) -> float:
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as profiler:
            step()
        events = profiler.profiler.kineto_results.events()
        changes = sorted((e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]")
        live = most = 0
        for _, nbytes in changes:  # allocations positive, frees negative, in time order
            live += nbytes
            most = max(most, live)
        return resident + most


class StepProbe:
    """Training steps of a copy of the model on the worst batch of a budget, on the device.

    Forward in the training's precision context, the label-smoothed loss over full-vocabulary
    logits, backward and an Adam step: what a training step holds at its peak.

    Args:
        model: the model to train; a copy is probed, so its weights stay as they are.
        device: where the copy runs.
        precision: Lightning's name of the training precision, e.g. "bf16-mixed".
        context: its forward context (`trainer.precision_plugin.forward_context`).
        longest: tokens a side of the longest training pair, EOS included.
    """

    def __init__(
        self,
        model: EncoderDecoder,
        device: torch.device,
        precision: str,
        context: Callable[[], AbstractContextManager],
        longest: int,
    ):
        self.device, self.precision, self.context, self.longest = (
            device,
            precision,
            context,
            longest,
        )
        self.model = copy.deepcopy(model).to(device).train()
        fused = device.type == "cuda"
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-9, fused=fused)
        self.multiple = pad_multiple("auto", precision)

    def __call__(self, budget: int) -> None:
        config = self.model.config
        batch = worst_batch(budget // self.longest, self.longest, config.vocab_size, self.multiple)
        batch = {key: value.to(self.device) for key, value in batch.items()}
        with self.context():
            logits, target = real_target_logits(self.model, batch, self.precision)
            loss, _ = label_smoothed_nll(logits, target, 0.1)
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def resident(self) -> int:
        """Bytes of the weights and the optimizer state between steps."""
        tensors = list(self.model.parameters()) + [
            t for state in self.optimizer.state.values() for t in state.values()
        ]
        return sum(t.nbytes for t in tensors if isinstance(t, torch.Tensor))


def search_max_tokens(
    probe: StepProbe, memory: DeviceMemory, cap: int, margin: float = MEMORY_MARGIN
) -> int:
    """The largest budget whose worst batch's step peaks within (1 - margin) of free memory."""
    allowed = (1 - margin) * memory.free()

    def fits(budget: int) -> bool:
        peak = memory.peak(lambda: probe(budget), probe.resident())
        log.debug("max_tokens=%d: peak %.3g GB of %.3g allowed", budget, peak / 1e9, allowed / 1e9)
        return peak <= allowed

    return largest_budget(fits, probe.longest, cap)


class AutoMaxTokens(L.Callback):
    """Resolves `data.max_tokens=auto` when fit sets up, before any loader is built.

    On each device, the largest budget whose worst batch fits in free memory with `margin` of it
    left over; the ranks then take the smallest, so that all cut the same batches. At most
    `per_rank_cap`: the rank's share of `data.tokens_per_update`, rounded up, else
    `MAX_AUTO_TOKENS`. `trainer.accumulate_grad_batches` is then derived from
    `data.tokens_per_update` by `plan_update`, which may shrink the budget to land near it. On
    CPUs the budget is `CPU_MAX_TOKENS` unless `memory_limit` (bytes) is given, which caps free
    memory on any device and on CPUs measures the steps with torch's profiler.
    """

    def __init__(self, margin: float = MEMORY_MARGIN, memory_limit: int | None = None):
        self.margin, self.memory_limit = margin, memory_limit

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        datamodule = trainer.datamodule
        if stage != "fit" or datamodule is None or datamodule.max_tokens is not None:
            return  # a number given, or resolved already
        device = trainer.strategy.root_device
        tokens_per_update = datamodule.hparams.tokens_per_update
        if device.type == "cpu" and self.memory_limit is None:
            budget = CPU_MAX_TOKENS
            log.info("data.max_tokens=auto sizes batches to a GPU; on CPUs it is %d", budget)
        else:
            memory = (
                CudaMemory(device, self.memory_limit)
                if device.type == "cuda"
                else HostMemory(self.memory_limit)
            )
            longest = datamodule.longest_train_pair()
            cap = per_rank_cap(tokens_per_update, trainer.world_size, longest)
            probe = StepProbe(
                pl_module.model,
                device,
                trainer.precision,
                trainer.precision_plugin.forward_context,
                longest,
            )
            budget = search_max_tokens(probe, memory, cap, self.margin)
            del probe  # its copy of the model and optimizer state leave the device
            if device.type == "cuda":
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats(device)
        mine = budget
        budget = int(trainer.strategy.reduce(torch.tensor(budget, device=device), reduce_op="min"))
        datamodule.max_tokens = budget
        if tokens_per_update:  # may shrink the batches, and says so
            longest = datamodule.longest_train_pair()
            plan = plan_update(tokens_per_update, budget, trainer.world_size, longest)
            datamodule.max_tokens = plan.max_tokens
            trainer.accumulate_grad_batches = plan.accumulate_grad_batches
        log.info(
            "data.max_tokens=auto: %d tokens a side per batch (this device: %d, the least over "
            "%d ranks taken; %.0f%% of free memory kept spare); accumulate_grad_batches=%d",
            budget,
            mine,
            trainer.world_size,
            100 * self.margin,
            trainer.accumulate_grad_batches,
        )
