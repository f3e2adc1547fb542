"""`data.max_tokens=auto` measured: training steps on a budget's worst batches, on the device.

`measure_max_tokens` is the one call: it returns the budget and what it was measured against
(`Measurement`), for the caller to agree on over the ranks and to keep for an exact resume.
"""

import copy
import functools
import logging
import math
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol

import torch
from torch.profiler import ProfilerActivity, profile

from transformer_nmt.data.padding import pad_multiple, rounding_budget
from transformer_nmt.data.token_budget import (
    CPU_MAX_TOKENS,
    MEMORY_MARGIN,
    largest_budget,
    worst_batch,
)
from transformer_nmt.model import EncoderDecoder
from transformer_nmt.training.step.module import training_loss

log = logging.getLogger(__name__)

# What torch, cuBLAS, cuDNN and the CUDA runtime say when memory runs out outside torch's
# allocator, which raises torch.OutOfMemoryError: creating a cuBLAS handle or workspace, a cuDNN
# workspace, a kernel's own allocation; and torch's CPU allocator.
OUT_OF_MEMORY_MESSAGES = (
    "CUDA out of memory",
    "CUDA error: out of memory",
    "CUBLAS_STATUS_ALLOC_FAILED",
    "CUDNN_STATUS_ALLOC_FAILED",
    "DefaultCPUAllocator: can't allocate memory",
)


def is_out_of_memory(error: BaseException) -> bool:
    """Whether `error` says the device (or the host) ran out of memory, whichever library."""
    if isinstance(error, torch.OutOfMemoryError):
        return True
    return isinstance(error, RuntimeError) and any(m in str(error) for m in OUT_OF_MEMORY_MESSAGES)


def ran_out_of_memory(step: Callable[[], None]) -> bool:
    """Run `step`: True if it ran out of memory, which any other error is not."""
    try:
        step()
    except RuntimeError as error:  # torch.OutOfMemoryError is one
        if not is_out_of_memory(error):
            raise
        return True  # the step's tensors, held by the traceback, are freed on return
    return False


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
        if ran_out_of_memory(lambda: (step(), torch.cuda.synchronize(self.device))):
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
            if ran_out_of_memory(step):
                return math.inf
        events = profiler.profiler.kineto_results.events()
        changes = sorted((e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]")
        live = most = 0
        for _, nbytes in changes:  # allocations positive, frees negative, in time order
            live += nbytes
            most = max(most, live)
        return resident + most


class StepProbe:
    """Training steps of a copy of the model on a budget's worst batches, on the device.

    Forward in the training's precision context, the label-smoothed loss over full-vocabulary
    logits (R-Drop's doubled batch and divergence with `rdrop`), backward and an Adam step: what
    a training step holds at its peak.

    Args:
        model: the model to train; a copy is probed, so its weights stay as they are.
        device: where the copy runs.
        precision: Lightning's name of the training precision, e.g. "bf16-mixed".
        context: its forward context (`trainer.precision_plugin.forward_context`).
        lengths: tokens a side, EOS included, of the buckets to probe: the longest and the
            shortest training pair.
        pad_to_multiple_of: `data.pad_to_multiple_of`, so that batches pad as training's do.
        rdrop: whether any batch of the run may train with R-Drop.
    """

    def __init__(
        self,
        model: EncoderDecoder,
        device: torch.device,
        precision: str,
        context: Callable[[], AbstractContextManager],
        lengths: Sequence[int],
        pad_to_multiple_of: int | str = "auto",
        rdrop: bool = False,
    ):
        self.device, self.precision, self.context = device, precision, context
        self.lengths = sorted(set(lengths), reverse=True)  # the longest first
        self.longest = self.lengths[0]
        self.pad_to_multiple_of, self.rdrop = pad_to_multiple_of, rdrop
        self.model = copy.deepcopy(model).to(device).train()
        fused = device.type == "cuda"
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-9, fused=fused)

    def __call__(self, budget: int, length: int | None = None) -> None:
        """One step on the worst batch of `budget` in the bucket of `length` (the longest)."""
        length = length or self.longest
        batch = worst_batch(
            max(budget // length, 1),
            length,
            self.model.config.vocab_size,
            pad_multiple(self.pad_to_multiple_of, self.precision),
            rounding_budget(self.pad_to_multiple_of, budget),
        )
        batch = {key: value.to(self.device) for key, value in batch.items()}
        try:
            with self.context():
                loss, _, _ = training_loss(self.model, batch, self.precision, 0.1, self.rdrop)
            loss.backward()
            self.optimizer.step()
        finally:  # a step that ran out of memory leaves no gradients behind
            self.optimizer.zero_grad(set_to_none=True)

    def resident(self) -> int:
        """Bytes of the weights and the optimizer state between steps."""
        tensors = list(self.model.parameters()) + [
            t for state in self.optimizer.state.values() for t in state.values()
        ]
        return sum(t.nbytes for t in tensors if isinstance(t, torch.Tensor))


@dataclass(frozen=True)
class Measurement:
    """The budget one device measured, and what it measured it against; plain types.

    Attributes:
        max_tokens: the largest budget whose worst batches fit, at most `cap`.
        cap: the most it could be (`batch_size.per_rank_cap`).
        lengths: tokens a side of the buckets probed, the longest first.
        rdrop: whether the steps ran R-Drop's doubled batch.
        free_bytes: the device's free memory (or the injected limit); None where not measured
            (a CPU without a limit takes `CPU_MAX_TOKENS`).
        allowed_bytes: the share of it a step's peak may reach, `margin` left spare.
        peak_bytes: each bucket's peak at `max_tokens`, by length.
        binding: the length of the bucket that did not fit at the next budget tried; None where
            the cap bound, or nothing was measured.
    """

    max_tokens: int
    cap: int
    lengths: tuple[int, ...]
    rdrop: bool
    free_bytes: int | None = None
    allowed_bytes: int | None = None
    peak_bytes: dict[int, int] = field(default_factory=dict)
    binding: int | None = None


def measure_budget(
    probe: StepProbe, memory: DeviceMemory, cap: int, margin: float = MEMORY_MARGIN
) -> Measurement:
    """The largest budget whose worst batches' steps peak within (1 - margin) of free memory."""
    allowed = (1 - margin) * memory.free()
    peaks: dict[int, dict[int, float]] = {}  # budget -> length -> peak
    too_large: dict[int, int] = {}  # budget -> the length that did not fit

    def fits(budget: int) -> bool:
        peaks[budget] = {}
        for length in probe.lengths:
            peak = memory.peak(functools.partial(probe, budget, length), probe.resident())
            peaks[budget][length] = peak
            log.debug(
                "max_tokens=%d, pairs of %d: peak %.3g GB of %.3g allowed",
                budget,
                length,
                peak / 1e9,
                allowed / 1e9,
            )
            if peak > allowed:
                too_large[budget] = length
                return False
        return True

    budget = largest_budget(fits, probe.longest, cap)
    above = [b for b in too_large if b > budget]
    return Measurement(
        max_tokens=budget,
        cap=cap,
        lengths=tuple(probe.lengths),
        rdrop=probe.rdrop,
        free_bytes=int(memory.free()),
        allowed_bytes=int(allowed),
        peak_bytes={length: int(peak) for length, peak in peaks[budget].items()},
        binding=too_large[min(above)] if above else None,
    )


def measure_max_tokens(
    model: EncoderDecoder,
    device: torch.device,
    precision: str,
    context: Callable[[], AbstractContextManager],
    lengths: Sequence[int],
    cap: int,
    pad_to_multiple_of: int | str = "auto",
    rdrop: bool = False,
    margin: float = MEMORY_MARGIN,
    memory_limit: int | None = None,
) -> Measurement:
    """`data.max_tokens=auto` on this device: what `measure_budget` finds, the probe's copy of
    the model gone from the device afterwards; `CPU_MAX_TOKENS` on a CPU without
    `memory_limit`, where batches are not sized to memory.

    Args are `StepProbe`'s, then `cap` (`batch_size.per_rank_cap`), `margin` (the share of free
    memory left spare) and `memory_limit` (bytes: caps free memory; on a CPU, the limit the
    steps are measured against with torch's profiler).
    """
    longest = max(lengths)
    if device.type == "cpu" and memory_limit is None:
        budget = max(CPU_MAX_TOKENS, longest)
        return Measurement(budget, cap, tuple(sorted(set(lengths), reverse=True)), rdrop)
    # Read before the probe's copy of the model arrives, which the peaks then count.
    memory = CudaMemory(device, memory_limit) if device.type == "cuda" else HostMemory(memory_limit)
    probe = StepProbe(model, device, precision, context, lengths, pad_to_multiple_of, rdrop)
    try:
        return measure_budget(probe, memory, cap, margin)
    finally:
        del probe  # its copy of the model and optimizer state leave the device
        if device.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
