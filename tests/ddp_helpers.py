"""Test-only callback, loaded into `python train.py` subprocesses through PYTHONPATH=tests."""

from pathlib import Path

import lightning as L
import torch


class SaveWeightsPerRank(L.Callback):
    """Writes every rank's final weights to `<dirpath>/rank<global rank>.pt`.

    Lightning saves checkpoints on rank zero only, so this is how a test sees the other ranks.
    """

    def __init__(self, dirpath: str) -> None:
        self.dirpath = Path(dirpath)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.dirpath.mkdir(parents=True, exist_ok=True)
        torch.save(pl_module.state_dict(), self.dirpath / f"rank{trainer.global_rank}.pt")


class SaveGradients(L.Callback):
    """Writes the gradients each rank hands the optimizer (after DDP's all-reduce) to a file."""

    def __init__(self, dirpath: str) -> None:
        self.dirpath = Path(dirpath)

    def on_before_optimizer_step(
        self, trainer: L.Trainer, pl_module: L.LightningModule, optimizer: torch.optim.Optimizer
    ) -> None:
        self.dirpath.mkdir(parents=True, exist_ok=True)
        grads = {name: p.grad.clone() for name, p in pl_module.named_parameters()}
        torch.save(grads, self.dirpath / f"rank{trainer.global_rank}.pt")


class BatchesPerRank:
    """A training loader that serves the batches `batches[rank]` to each rank, in order."""

    def __init__(self, batches: list[list[dict]]) -> None:
        self.batches = batches

    def __len__(self) -> int:
        return len(self.batches[0])

    def __iter__(self):
        rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
        yield from self.batches[rank]
