"""Counts host-device syncs: on a CPU those the same training would make on a GPU, on a GPU all."""

import collections
import json
import traceback
import warnings
from pathlib import Path
from typing import Any

import lightning as L
import torch
from torch.utils._python_dispatch import TorchDispatchMode

HOST = "_sync_counting_host"  # attribute marking a tensor that would live in host memory


class SyncCounter(TorchDispatchMode):
    """Counts reads of device values on the host and copies of host values to the device.

    On a CPU every tensor is a host tensor, so the counter tells them apart as a GPU run would:
    host tensors are those built by `torch.tensor` without a device or with `device="cpu"` (code
    that says so keeps them on the host on purpose), by `.cpu()`, and by ops on host tensors only;
    everything else (parameters, batches, what is computed from them, tensors built on the
    module's `torch.device`) would be on the GPU. Counted as syncs:

    - host reads of a device tensor: `.item()`, `bool()`, `float()` (all dispatch
      `_local_scalar_dense`), `.tolist()`, `.cpu()`;
    - `torch.tensor(value, device=<a torch.device>)`: CUDA copies pageable memory synchronously.
    """

    def __init__(self) -> None:
        super().__init__()
        self.count = 0
        self.where: collections.Counter[str] = collections.Counter()
        self._originals = (torch.tensor, torch.Tensor.tolist, torch.Tensor.cpu)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.ops.aten._local_scalar_dense.default:
            self._read(args[0])
        out = func(*args, **kwargs)
        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
        if tensors and all(is_host(t) for t in tensors):
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(t, torch.Tensor):
                    setattr(t, HOST, True)
        return out

    def _read(self, tensor: torch.Tensor) -> None:
        if not is_host(tensor):
            self._record()

    def _record(self) -> None:
        self.count += 1
        stack = [f for f in traceback.extract_stack()[:-3] if f.filename != __file__]
        self.where[" <- ".join(f"{f.filename}:{f.lineno}" for f in stack[-3:][::-1])] += 1

    def __enter__(self):
        tensor, tolist, cpu = self._originals

        def counted_tensor(data: Any, *args: Any, device: Any = None, **kwargs: Any):
            out = tensor(data, *args, device=device, **kwargs)
            if isinstance(device, torch.device):
                self._record()
            else:
                setattr(out, HOST, True)
            return out

        def counted_tolist(t: torch.Tensor):
            self._read(t)
            return tolist(t)

        def counted_cpu(t: torch.Tensor, *args: Any, **kwargs: Any):
            self._read(t)
            out = cpu(t, *args, **kwargs).clone()  # on a CPU `.cpu()` returns `t` itself
            setattr(out, HOST, True)
            return out

        torch.tensor, torch.Tensor.tolist, torch.Tensor.cpu = (
            counted_tensor,
            counted_tolist,
            counted_cpu,
        )
        return super().__enter__()

    def __exit__(self, *exc):
        torch.tensor, torch.Tensor.tolist, torch.Tensor.cpu = self._originals
        return super().__exit__(*exc)


def is_host(tensor: torch.Tensor) -> bool:
    return getattr(tensor, HOST, False)


class CudaSyncCounter:
    """On a GPU, the syncs themselves: `torch.cuda.set_sync_debug_mode` warns at each one."""

    def __init__(self) -> None:
        self.extra = 0
        self.where: collections.Counter[str] = collections.Counter()
        self._warnings = warnings.catch_warnings(record=True)
        self._caught: list[warnings.WarningMessage] = []

    @property
    def count(self) -> int:
        return self.extra + sum("synchroniz" in str(w.message) for w in self._caught)

    def _record(self) -> None:
        self.extra += 1

    def __enter__(self):
        self._caught = self._warnings.__enter__()
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        return self

    def __exit__(self, *exc):
        torch.cuda.set_sync_debug_mode("default")
        self.where.update(f"{w.filename}:{w.lineno}" for w in self._caught)
        return self._warnings.__exit__(*exc)


class SyncsPerBatch(L.Callback):
    """Writes [steps done before the batch, its syncs] of each training batch to `path` as JSON
    (rank r > 0 of DDP to `<stem>.rank<r>.json` beside it).

    A batch's syncs are those from its start to the next batch's start in the same epoch.

    `strategy.broadcast` counts too: on one device it returns at once, but under DDP it is a
    collective of a pickled object through a device tensor.
    """

    def __init__(self, path: str, device: str = "cpu") -> None:
        self.path = Path(path)
        self.counter = SyncCounter() if device == "cpu" else CudaSyncCounter()
        self.per_batch: list[tuple[int, int]] = []
        self._start = 0

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        broadcast = trainer.strategy.broadcast

        def counted_broadcast(*args: Any, **kwargs: Any) -> Any:
            self.counter._record()
            return broadcast(*args, **kwargs)

        trainer.strategy.broadcast = counted_broadcast
        self.counter.__enter__()

    def on_train_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        if batch_idx:  # not across an epoch's end
            self.per_batch.append((trainer.global_step - 1, self.counter.count - self._start))
        self._start = self.counter.count

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.counter.__exit__(None, None, None)
        del trainer.strategy.broadcast
        where = dict(self.counter.where.most_common())
        rank = trainer.global_rank
        path = self.path.with_name(f"{self.path.stem}.rank{rank}.json") if rank else self.path
        path.write_text(json.dumps({"per_batch": self.per_batch, "where": where}))
