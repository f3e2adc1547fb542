"""Greedy and beam search wait for the device once per step, and copy no index to it per step.

On a GPU every device-to-host read (`.item()`, `.tolist()`, `bool()`, `nonzero()`...) stalls
the host until the queued kernels have run, and every host-built index is a copy the other way.
Here the Python entry points to both are counted on any device; on CUDA, torch's sync debug
mode counts the synchronizations the driver really makes as well.
"""

import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
import torch
from torch.overrides import TorchFunctionMode

from transformer_nmt.decoding import beam_search, greedy_search
from transformer_nmt.model import Transformer

BOS = 1  # as in conftest's tiny models
NEVER = -1  # an EOS id the model cannot emit

# Tensor methods that hand a device value to the host, so wait for the device (nonzero: its size).
DEVICE_TO_HOST = ("item", "tolist", "__bool__", "__int__", "__float__", "__index__", "nonzero")
# torch functions that build a tensor from host data: on a GPU, a copy to the device.
HOST_TO_DEVICE = ("tensor", "as_tensor", "from_numpy")


class Transfers(TorchFunctionMode):
    """Counts the torch calls that read a device value on the host or build a host index.

    A mode, not patched `torch.Tensor` methods: assigning `Tensor.__getitem__` leaves torch.Tensor
    a sequence type after it is undone, and a later `torch.tensor([0-d tensors])` fails.
    """

    def __init__(self, counts: Counter):
        super().__init__()
        self.counts = counts

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in DEVICE_TO_HOST:
            self.counts["device_to_host"] += 1
        if name in ("__getitem__", "__setitem__"):
            # A Python list in the index: torch builds a host index tensor to copy.
            parts = args[1] if isinstance(args[1], tuple) else (args[1],)
            if any(isinstance(part, list) for part in parts):
                self.counts["host_to_device"] += 1
        return func(*args, **(kwargs or {}))


def counting(function: Callable, counts: Counter, key: str) -> Callable:
    def counted(*args, **kwargs):
        counts[key] += 1
        return function(*args, **kwargs)

    return counted


@contextmanager
def transfers(model: Transformer) -> Iterator[tuple[Counter, list[int]]]:
    """Counts "device_to_host" reads and "host_to_device" tensors inside; lists the rows (batch
    size) of each decoder step."""
    counts: Counter = Counter()
    rows: list[int] = []

    def decode(tgt_in, *args, **kwargs):
        rows.append(tgt_in.size(0))
        return model_decode(tgt_in, *args, **kwargs)

    model_decode = model.decode
    with pytest.MonkeyPatch.context() as patch, Transfers(counts):
        for name in HOST_TO_DEVICE:
            patch.setattr(torch, name, counting(getattr(torch, name), counts, "host_to_device"))
        patch.setattr(model, "decode", decode)
        yield counts, rows


@contextmanager
def cuda_syncs(device: torch.device) -> Iterator[list[warnings.WarningMessage]]:
    """The synchronizing CUDA calls made inside, as warnings; nothing on other devices."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if device.type == "cuda":
            torch.cuda.set_sync_debug_mode("warn")
        try:
            yield caught
        finally:
            if device.type == "cuda":
                torch.cuda.set_sync_debug_mode("default")
    caught[:] = [w for w in caught if "synchroniz" in str(w.message)]


def searches(make_model, make_tokens, device):
    """A tiny model on the device, a batch whose rows finish at different steps, and an EOS."""
    model = make_model().to(device)
    src = make_tokens([7, 2, 5, 4], device=device)
    eos_id = greedy_search(model, src, BOS, NEVER, max_len_b=4)[1, 1].item()
    return model, src, eos_id


def test_greedy_search_reads_the_device_once_per_step(make_model, make_tokens, device):
    model, src, eos_id = searches(make_model, make_tokens, device)
    with cuda_syncs(device) as syncs, transfers(model) as (counts, rows):
        greedy_search(model, src, BOS, eos_id, max_len_b=4)
    # One read for the number of steps, then one per step: has every row finished?
    assert len(rows) > 1
    assert counts["device_to_host"] == len(rows) + 1
    assert counts["host_to_device"] == 1  # the PAD and BOS ids to mask, once
    assert len(syncs) <= len(rows) + 2  # CUDA also waits for that copy


@pytest.mark.parametrize("use_cache", [True, False])
def test_beam_search_reads_the_device_once_per_step(make_model, make_tokens, device, use_cache):
    model, src, eos_id = searches(make_model, make_tokens, device)
    with cuda_syncs(device) as syncs, transfers(model) as (counts, rows):
        beam_search(
            model, src, BOS, eos_id, beam_size=3, n_best=3, max_len_b=4, use_cache=use_cache
        )
    # Sentences finished on different steps, so the batch shrank: every path was taken.
    assert len(set(rows)) > 2, rows
    # The number of steps, one read a step, and the hypotheses at the end.
    assert counts["device_to_host"] == len(rows) + 2
    assert counts["host_to_device"] == 1
    assert len(syncs) <= len(rows) + 3


def test_one_beam_reads_the_device_once_per_step_as_well(make_model, make_tokens, device):
    model, src, eos_id = searches(make_model, make_tokens, device)
    with cuda_syncs(device) as syncs, transfers(model) as (counts, rows):
        beam_search(model, src, BOS, eos_id, beam_size=1, max_len_b=4)
    assert len(set(rows)) > 2, rows  # rows left the batch on different steps
    assert counts["device_to_host"] == len(rows) + 2
    assert counts["host_to_device"] == 1
    assert len(syncs) <= len(rows) + 3
