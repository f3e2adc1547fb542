"""A callback that pre-empts its own run at a fixed step: subprocess tests without timing races."""

import os

import lightning as L


class SignalAtStep(L.Callback):
    """Sends this process `signum` as training step `step` starts (signal.SIGKILL is 9, SIGTERM 15).

    Checkpoints written at earlier steps are on disk by then (Lightning saves in the previous
    step's `on_train_batch_end`), so where a run stops depends on the step count alone.

    With `once`, a file it creates before signalling: a run restarted with the same command,
    which resumes at that very step, goes on. With `rank`, only that DDP rank signals itself.
    """

    def __init__(
        self, step: int, signum: int, once: str | None = None, rank: int | None = None
    ) -> None:
        self.step = step
        self.signum = signum
        self.once = once
        self.rank = rank

    def on_train_batch_start(self, trainer: L.Trainer, *args: object) -> None:
        if trainer.global_step != self.step or self.rank not in (None, trainer.global_rank):
            return
        if self.once is not None:
            try:
                open(self.once, "x").close()
            except FileExistsError:
                return  # signalled before this restart
        os.kill(os.getpid(), self.signum)


def signal_at(
    step: int, signum: int, once: str | None = None, rank: int | None = None
) -> list[str]:
    """Overrides that make a run send itself `signum` as step `step` starts (see above)."""
    return [
        "+callbacks.signal_at._target_=helpers.signal_at_step.SignalAtStep",
        f"+callbacks.signal_at.step={step}",
        f"+callbacks.signal_at.signum={int(signum)}",
        *([f"+callbacks.signal_at.once={once}"] if once else []),
        *([f"+callbacks.signal_at.rank={rank}"] if rank is not None else []),
    ]
