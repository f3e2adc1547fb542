"""A callback that pre-empts its own run at a fixed step: subprocess tests without timing races."""

import os
import signal
from pathlib import Path

import lightning as L
import torch

from helpers.sweep_runs import wait_for
from transformer_nmt.runtime.atomic import write_atomically


class SignalAtStep(L.Callback):
    """Raises `signum` in this process as training step `step` starts (SIGKILL is 9, SIGTERM 15):
    its handler has run when the step goes on, between two steps' collectives.

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
        signal.raise_signal(self.signum)


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


class SignalRanksApart(L.Callback):
    """Two DDP ranks signalled at different points of update `step`, deterministically.

    Rank 1 raises `signum` in itself as the step starts (between two steps), then, inside the
    step, sends `signum` to rank 0 while rank 0 waits for it in the step's first all_reduce: rank
    0's handler runs when that collective returns, mid-step. Each rank writes the updates it made
    to `<dirpath>/rank<r>.stopped_at` as fit ends.
    """

    def __init__(self, step: int, signum: int, dirpath: str) -> None:
        self.step = step
        self.signum = signum
        self.dirpath = Path(dirpath)
        self._all_reduce = torch.distributed.all_reduce
        self._signalled = False

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        inside = self.dirpath / "rank0_in_all_reduce"

        def all_reduce(tensor: torch.Tensor, *args: object, **kwargs: object) -> object:
            if trainer.global_step == self.step and not self._signalled:
                self._signalled = True
                if trainer.global_rank == 0:
                    write_atomically(inside, str(os.getpid()))  # then waits below for rank 1
                else:
                    (found,) = wait_for(inside, timeout=120)
                    os.kill(int(Path(found).read_text()), self.signum)
            return self._all_reduce(tensor, *args, **kwargs)

        torch.distributed.all_reduce = all_reduce

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        torch.distributed.all_reduce = self._all_reduce

    def on_train_batch_start(self, trainer: L.Trainer, *args: object) -> None:
        if trainer.global_step == self.step and trainer.global_rank == 1:
            signal.raise_signal(self.signum)

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        path = self.dirpath / f"rank{trainer.global_rank}.stopped_at"
        write_atomically(path, str(trainer.global_step))


def signal_ranks_apart(step: int, signum: int, dirpath: Path) -> list[str]:
    """Overrides that signal ranks 0 and 1 at different points of update `step` (see above)."""
    return [
        "+callbacks.signal_apart._target_=helpers.signal_at_step.SignalRanksApart",
        f"+callbacks.signal_apart.step={step}",
        f"+callbacks.signal_apart.signum={int(signum)}",
        f"+callbacks.signal_apart.dirpath={dirpath}",
    ]
