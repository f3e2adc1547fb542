"""A callback that fails its run once, at a fixed step: an in-process crash at a known point."""

from pathlib import Path

import lightning as L


class Interrupted(RuntimeError):
    """What `FailAtStep` raises."""


class FailAtStep(L.Callback):
    """Raises `Interrupted` as training step `step` starts, unless `once` (a file it creates
    first) exists: the same command started again resumes from last.ckpt and goes on."""

    def __init__(self, step: int, once: str) -> None:
        self.step, self.once = step, Path(once)

    def on_train_batch_start(self, trainer: L.Trainer, *args: object) -> None:
        if trainer.global_step == self.step and not self.once.exists():
            self.once.touch()
            raise Interrupted(f"failed on purpose at step {self.step}")


def fail_at(step: int) -> list[str]:
    """Overrides that fail each run once at `step`, in its own run folder."""
    return [
        "+callbacks.fail_at._target_=helpers.fail_at_step.FailAtStep",
        f"+callbacks.fail_at.step={step}",
        "+callbacks.fail_at.once=${paths.output_dir}/failed_once",
    ]
