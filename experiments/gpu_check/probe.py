"""Measurements inside `train.py`, as a callback, and the sync counter the check shares.

end_to_end.py adds the callback with `+callbacks.probe._target_=experiments.gpu_check.probe.
SmokeProbe`: train.py's folder, the repository root, is on its path, and on DDP's extra ranks'.
"""

import json
import resource
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable
from typing import Any

import lightning as L
import torch

# Tensor methods that hand a value to the host: each one waits for the device on a GPU.
HOST_READS = ("item", "tolist", "__bool__", "__int__", "__float__", "nonzero")
# Callers whose tensors stay on the host on a GPU too, so whose reads cost no sync there: the
# optimizers' step counters (Adam keeps them on the CPU), collate and the data loader.
HOST_SIDE_CALLERS = ("torch/optim/", "torch/utils/data/", "transformer_nmt/data/")


class SyncCounter:
    """Host-device synchronizations while started, by the Python line that asked.

    On CUDA those that torch's sync debug mode reports; on a CPU the host reads of tensor
    values (`.item()`, `.tolist()`, `bool()`...) outside HOST_SIDE_CALLERS, each of which would
    be one on a GPU.
    """

    def __init__(self) -> None:
        self.syncs: Counter[str] = Counter()
        self._undo: list[Callable[[], None]] = []

    def start(self, device: torch.device) -> None:
        if device.type == "cuda":
            self._count_cuda_syncs()
        else:
            self._count_host_reads()

    def stop(self) -> None:
        for undo in self._undo:
            undo()
        self._undo = []

    def _count_cuda_syncs(self) -> None:
        show = warnings.showwarning

        def counted(message, category, filename, lineno, file=None, line=None):
            if "synchroniz" in str(message):
                self.syncs[f"{filename}:{lineno}"] += 1
            else:
                show(message, category, filename, lineno, file, line)

        warnings.showwarning = counted
        warnings.filterwarnings("always", message=".*synchroniz")
        torch.cuda.set_sync_debug_mode("warn")
        self._undo = [
            lambda: torch.cuda.set_sync_debug_mode("default"),
            lambda: setattr(warnings, "showwarning", show),
        ]

    def _count_host_reads(self) -> None:
        originals = {name: getattr(torch.Tensor, name) for name in HOST_READS}
        for name, method in originals.items():
            setattr(torch.Tensor, name, self._counting(method))
        self._undo = [
            lambda name=name, method=method: setattr(torch.Tensor, name, method)
            for name, method in originals.items()
        ]

    def _counting(self, method: Callable) -> Callable:
        def counted(*args, **kwargs):
            caller = sys._getframe(1)
            where = caller.f_code.co_filename
            if not any(host_side in where for host_side in HOST_SIDE_CALLERS):
                self.syncs[f"{where}:{caller.f_lineno}"] += 1
            return method(*args, **kwargs)

        return counted


class SmokeProbe(L.Callback):
    """Training tokens/s (all ranks), peak memory, syncs per training step, precision, val BLEU.

    Syncs are counted over the training steps only, validation excluded (`SyncCounter`).
    Tokens per second are non-pad target tokens over
    training wall time, after `skip_steps` warm-up steps.
    """

    def __init__(self, path: str, skip_steps: int = 5) -> None:
        self.path = path
        self.skip_steps = skip_steps
        self.tokens = 0
        self.seconds = 0.0
        self.counter = SyncCounter()
        self._last: float | None = None

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if pl_module.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(pl_module.device)
        self.counter.start(pl_module.device)

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any, _: int
    ) -> None:
        now = time.perf_counter()
        if self._last is not None and trainer.global_step > self.skip_steps:
            self.tokens += batch["tgt_index"].numel()
            self.seconds += now - self._last
        self._last = now

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.counter.stop()

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._last = None  # validation time is not training time
        if not trainer.sanity_checking:
            self.counter.start(pl_module.device)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.counter.stop()
        rate = torch.tensor(self.tokens / max(self.seconds, 1e-9), device=pl_module.device)
        total = float(trainer.strategy.reduce(rate, reduce_op="sum"))
        if not trainer.is_global_zero:
            return
        if pl_module.device.type == "cuda":
            peak, memory = torch.cuda.max_memory_allocated(pl_module.device), "GPU"
        else:
            peak, memory = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "RSS"
        bleu = trainer.callback_metrics.get("val/bleu")
        result = {
            "devices": trainer.world_size,
            "precision": trainer.precision,
            "steps": trainer.global_step,
            "tokens_per_sec": total,
            "peak_memory_gb": peak / 2**30,
            "memory": memory,
            "syncs_per_step": self.counter.syncs.total() / max(trainer.global_step, 1),
            "sync_sources": dict(self.counter.syncs.most_common(10)),
            "val_bleu": None if bleu is None else float(bleu),
        }
        with open(self.path, "w") as f:
            json.dump(result, f, indent=2)
