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

from transformer_nmt.model import Transformer, beam_search, greedy_search

BOS = 1  # as in conftest's tiny models
NEVER = -1  # an EOS id the model cannot emit

# Tensor methods that hand a device value to the host, so wait for the device (nonzero: its size).
DEVICE_TO_HOST = ("item", "tolist", "__bool__", "__int__", "__float__", "__index__", "nonzero")
# torch functions that build a tensor from host data: on a GPU, a copy to the device.
HOST_TO_DEVICE = ("tensor", "as_tensor", "from_numpy")


def counting(function: Callable, counts: Counter, key: str) -> Callable:
    def counted(*args, **kwargs):
        counts[key] += 1
        return function(*args, **kwargs)

    return counted


def counting_index(function: Callable, counts: Counter) -> Callable:
    """tensor[...] with a Python list in the index: torch builds a host index tensor to copy."""

    def indexed(self, index, *args):
        parts = index if isinstance(index, tuple) else (index,)
        if any(isinstance(part, list) for part in parts):
            counts["host_to_device"] += 1
        return function(self, index, *args)

    return indexed


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
    with pytest.MonkeyPatch.context() as patch:
        for name in DEVICE_TO_HOST:
            method = getattr(torch.Tensor, name)
            patch.setattr(torch.Tensor, name, counting(method, counts, "device_to_host"))
        patch.setattr(torch, "nonzero", counting(torch.nonzero, counts, "device_to_host"))
        for name in HOST_TO_DEVICE:
            patch.setattr(torch, name, counting(getattr(torch, name), counts, "host_to_device"))
        for name in ("__getitem__", "__setitem__"):
            patch.setattr(torch.Tensor, name, counting_index(getattr(torch.Tensor, name), counts))
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
    assert counts["device_to_host"] == len(rows) + 1
    assert counts["host_to_device"] == 1
    assert len(syncs) <= len(rows) + 2
