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
