"""A callback that holds training at a known step until the scheduler signals the run: where a
requeued or pre-empted job stops depends on the step count alone, not on how fast it trains."""

import time
from pathlib import Path

import lightning as L

from transformer_nmt.runtime.atomic import write_atomically
from transformer_nmt.training.run.stop import SIGNALS


class PauseUntilSignal(L.Callback):
    """As training step `step` starts, global rank 0 writes `<dirpath>/paused_at_<step>` and waits
    until it has received a stop signal; the other ranks go on into the step's collectives and
    wait there for rank 0, which is where the signal finds them. Every rank then stops after the
    step that rank 0 runs with the signal seen (`training/run/stop.py`)."""

    def __init__(self, step: int, dirpath: str) -> None:
        self.step = step
        self.marker = Path(dirpath) / f"paused_at_{step}"

    def on_train_batch_start(self, trainer: L.Trainer, *args: object) -> None:
        if trainer.global_step != self.step or not trainer.is_global_zero:
            return
        seen = len(SIGNALS.received)
        write_atomically(self.marker, str(self.step))
        while len(SIGNALS.received) == seen:
            time.sleep(0.05)  # the signal handler runs between these sleeps


def pause_until_signal(name: str, step: int, dirpath: Path) -> list[str]:
    """Overrides that make a run pause at `step` until signalled (`name`: the callback's key)."""
    return [
        f"+callbacks.{name}._target_=helpers.pause_until_signal.PauseUntilSignal",
        f"+callbacks.{name}.step={step}",
        f"+callbacks.{name}.dirpath={dirpath}",
    ]
