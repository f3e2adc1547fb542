"""A callback that writes down, per rank, the update training starts from."""

import json
from pathlib import Path

import lightning as L


class StartPerRank(L.Callback):
    """Writes `{"global_step": ...}` as training starts to `<dirpath>/rank<global rank>.json`."""

    def __init__(self, dirpath: str) -> None:
        self.dirpath = Path(dirpath)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.dirpath.mkdir(parents=True, exist_ok=True)
        record = {"global_step": trainer.global_step}
        (self.dirpath / f"rank{trainer.global_rank}.json").write_text(json.dumps(record))


def start_per_rank(dirpath: str) -> list[str]:
    """Overrides that make every rank write down the update it starts from under dirpath."""
    return [
        "+callbacks.start._target_=helpers.start_per_rank.StartPerRank",
        f"+callbacks.start.dirpath={dirpath}",
    ]
