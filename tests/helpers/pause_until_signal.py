"""A callback that holds training at a known step until the scheduler signals the run: where a
requeued or pre-empted job stops depends on the step count alone, not on how fast it trains."""

import time
from pathlib import Path

import lightning as L

from transformer_nmt.atomic import write_atomically


class PauseUntilSignal(L.Callback):
    """As training step `step` starts, writes `<dirpath>/paused_at_<step>` (global rank 0), then
    waits until this rank has received SIGTERM; the step then runs and the run stops after it."""

    def __init__(self, step: int, dirpath: str) -> None:
        self.step = step
        self.marker = Path(dirpath) / f"paused_at_{step}"

    def on_train_batch_start(self, trainer: L.Trainer, *args: object) -> None:
        if trainer.global_step != self.step:
            return
        if trainer.is_global_zero:
            write_atomically(self.marker, str(self.step))
        while not trainer.received_sigterm:
            time.sleep(0.05)  # the signal handler runs between these sleeps


def pause_until_signal(name: str, step: int, dirpath: Path) -> list[str]:
    """Overrides that make a run pause at `step` until signalled (`name`: the callback's key)."""
    return [
        f"+callbacks.{name}._target_=helpers.pause_until_signal.PauseUntilSignal",
        f"+callbacks.{name}.step={step}",
        f"+callbacks.{name}.dirpath={dirpath}",
    ]
