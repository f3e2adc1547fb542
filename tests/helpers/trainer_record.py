"""A callback that writes down what the trainer really uses, for tests to hold the logs to."""

import json

import lightning as L


class TrainerRecord(L.Callback):
    """As training starts, writes the accumulation, batch budget and world size to `path`."""

    def __init__(self, path: str) -> None:
        self.path = path

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        record = {
            "accumulate_grad_batches": trainer.accumulate_grad_batches,
            "max_tokens": trainer.datamodule.max_tokens,
            "world_size": trainer.world_size,
        }
        with open(self.path, "w") as f:
            json.dump(record, f)


def record_trainer(path: str) -> list[str]:
    """Overrides that make a run write down its trainer's batch settings to `path`."""
    return [
        "+callbacks.record._target_=helpers.trainer_record.TrainerRecord",
        f"+callbacks.record.path={path}",
    ]
