"""A callback that pre-empts its own run at a fixed step: subprocess tests without timing races."""

import os

import lightning as L


class SignalAtStep(L.Callback):
    """Sends this process `signum` as training step `step` starts (signal.SIGKILL is 9, SIGTERM 15).

    Checkpoints written at earlier steps are on disk by then (Lightning saves in the previous
    step's `on_train_batch_end`), so where a run stops depends on the step count alone.
    """

    def __init__(self, step: int, signum: int) -> None:
        self.step = step
        self.signum = signum

    def on_train_batch_start(self, trainer: L.Trainer, *args: object) -> None:
        if trainer.global_step == self.step:
            os.kill(os.getpid(), self.signum)


def signal_at(step: int, signum: int) -> list[str]:
    """Overrides that make a run send itself `signum` as step `step` starts."""
    return [
        "+callbacks.signal_at._target_=helpers.signal_at_step.SignalAtStep",
        f"+callbacks.signal_at.step={step}",
        f"+callbacks.signal_at.signum={int(signum)}",
    ]
