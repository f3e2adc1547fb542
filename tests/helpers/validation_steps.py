"""A callback that writes down the update at which each validation of a run came."""

import json
from pathlib import Path

import lightning as L


class ValidationSteps(L.Callback):
    """Appends `[update, batches into the epoch]` to the JSON list at `path` at every validation
    of fit (the sanity check aside)."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        seen = json.loads(self.path.read_text()) if self.path.exists() else []
        batches = trainer.fit_loop.epoch_loop.batch_progress.current.processed
        seen.append([trainer.global_step, batches])
        self.path.write_text(json.dumps(seen))


def record_validations(path: Path) -> list[str]:
    """Overrides that make a run write down the update of each validation to `path`."""
    return [
        "+callbacks.validations._target_=helpers.validation_steps.ValidationSteps",
        f"+callbacks.validations.path={path}",
    ]
