"""A lock file that keeps two runs from writing one run folder at once."""

import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from transformer_nmt.runtime.lock_file import STALE, LockContendedError, LockFile
from transformer_nmt.runtime.run_names import launcher_rank

LOCK_NAME = ".lock"


class RunLockedError(RuntimeError):
    """Another run holds the run folder's lock."""


class RunLock:
    """Holds `<run_dir>/.lock`, which names this process, while a run writes to `run_dir`.

    A second holder is refused with an error naming the first: its pid, host and start time. A
    lock whose holder is gone (its process on this host, or its refreshes on any host) is taken
    over with a warning; see `lock_file.LockFile`, which also says why no `flock` is used.

    Under DDP only global rank 0 takes the lock, since all ranks write the same folder: pass
    `enabled=is_global_rank_zero()`, which reads the variables the launchers set.

    Args:
        run_dir: the run folder, created if missing.
        enabled: False makes the lock do nothing (every rank but global rank 0).
    """

    def __init__(self, run_dir: str | os.PathLike, enabled: bool = True) -> None:
        self.path = Path(run_dir) / LOCK_NAME
        self.enabled = enabled
        self._lock = LockFile(self.path)

    def __enter__(self) -> "RunLock":
        if self.enabled:
            self.acquire()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def acquire(self) -> None:
        """Take the lock, or raise `RunLockedError` naming its live holder."""
        try:
            holder = self._lock.try_acquire()
        except LockContendedError as e:
            raise RunLockedError(str(e)) from e
        if holder is not None:
            raise RunLockedError(self._refusal(holder))

    def release(self) -> None:
        """Remove the lock file if this process holds it."""
        self._lock.release()

    def _refusal(self, holder: dict[str, Any]) -> str:
        if not holder:
            return (
                f"{self.path.parent} is locked by {self.path}, which is unreadable: if no run "
                f"writes to this folder, delete {self.path}"
            )
        message = (
            f"{self.path.parent} is in use by another run: process {holder.get('pid')} on "
            f"{holder.get('host')}, since {holder.get('since')} (lock file {self.path}). Two runs "
            "writing one folder overwrite each other's checkpoints and logs: give this run "
            "another hydra.run.dir, or wait for that one to end"
        )
        if holder.get("host") != socket.gethostname():
            message += (
                f"; if it is gone (its machine crashed), delete {self.path}, or start again after "
                f"{STALE / 60:.0f} minutes: a lock its holder no longer refreshes is taken over"
            )
        return message


def is_global_rank_zero(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether this process is, or will start as, global rank 0, from the launchers' variables."""
    return launcher_rank(environ) == "0"
