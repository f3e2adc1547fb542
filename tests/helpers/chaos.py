"""Test-only: one run's faults, each at a fixed step and once, so that the same command line
restarted after each fault meets the next one.

The kill and the full disk leave a marker file in `dirpath` as they fire: a restart, which resumes
before that step, finds it and goes on; the SIGTERMs' stop saves `last.ckpt` after their step,
where a restart resumes. Every fault is in a step's hooks, so where it lands depends on the step
count alone, never on timing.
"""

import os
import shutil
import signal
from pathlib import Path

import lightning as L

from helpers.signal_at_step import SignalRanksApart

FILLER = "filler"  # the file that fills the checkpoint folder's disk, in that folder


class Chaos(SignalRanksApart):
    """At step `kill_at` global rank 1 SIGKILLs itself; at step `term_at` rank 1 is SIGTERMed
    between two steps and rank 0 inside the step's all_reduce (`SignalRanksApart`); as step
    `fill_at` starts, rank 0 fills the checkpoint folder's disk, leaving `room` bytes free, so
    that the next save's `last.ckpt` does not fit. None skips a fault.
    """

    def __init__(
        self,
        dirpath: str,
        kill_at: int | None = None,
        term_at: int | None = None,
        fill_at: int | None = None,
        room: int = 0,
    ) -> None:
        super().__init__(-1 if term_at is None else term_at, signal.SIGTERM, dirpath)
        self.kill_at, self.fill_at, self.room = kill_at, fill_at, room

    def _first_time(self, fault: str) -> bool:
        """Whether `fault` fires now: False once a start before this one has fired it."""
        try:
            open(self.dirpath / f"{fault}.fired", "x").close()
        except FileExistsError:
            return False
        return True

    def on_train_batch_start(self, trainer: L.Trainer, *args: object) -> None:
        step, rank = trainer.global_step, trainer.global_rank
        if step == self.kill_at and rank == 1 and self._first_time("kill"):
            os.kill(os.getpid(), signal.SIGKILL)
        super().on_train_batch_start(trainer, *args)  # the SIGTERMs at step `term_at`
        if step == self.fill_at and rank == 0 and self._first_time("fill"):
            fill(Path(trainer.checkpoint_callback.dirpath), self.room)


def fill(folder: Path, room: int) -> None:
    """Write a file into `folder` that leaves `room` bytes free on its disk."""
    size = shutil.disk_usage(folder).free - room
    with open(folder / FILLER, "wb") as f:
        f.write(b"\0" * size)  # written, not a sparse file: tmpfs counts the pages written


def chaos(dirpath: Path, **steps: int) -> list[str]:
    """Overrides that add `Chaos(dirpath, **steps)` to a run."""
    return [
        "+callbacks.chaos._target_=helpers.chaos.Chaos",
        f"+callbacks.chaos.dirpath={dirpath}",
        *(f"+callbacks.chaos.{name}={value}" for name, value in steps.items()),
    ]
