"""A lock file that keeps two runs from writing one run folder at once."""

import json
import logging
import os
import socket
import uuid
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

LOCK_NAME = ".lock"
ATTEMPTS = 10  # each lost only to a lock released or broken meanwhile


class RunLockedError(RuntimeError):
    """Another run holds the run folder's lock."""


class RunLock:
    """Holds `<run_dir>/.lock`, which names this process, while a run writes to `run_dir`.

    A second holder is refused with an error naming the first: its pid, host and start time. A
    lock left by a process that died on this host is free: it is taken over with a warning. One
    left on another host cannot be checked, so the error says to delete it if that run is gone.
    The lock file is created by a hard link, atomic on local filesystems and NFS alike, so no
    reader ever sees it half-written.

    Under DDP only global rank 0 takes the lock, since all ranks write the same folder: pass
    `enabled=is_global_rank_zero()`, which reads the variables the launchers set.

    Args:
        run_dir: the run folder, created if missing.
        enabled: False makes the lock do nothing (every rank but global rank 0).
    """

    def __init__(self, run_dir: str | os.PathLike, enabled: bool = True) -> None:
        self.path = Path(run_dir) / LOCK_NAME
        self.enabled = enabled
        self._holder: dict[str, Any] | None = None  # what this process wrote, while it holds

    def __enter__(self) -> "RunLock":
        if self.enabled:
            self.acquire()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def acquire(self) -> None:
        """Take the lock, or raise `RunLockedError` naming its live holder."""
        me = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": datetime.now().astimezone().isoformat(timespec="seconds"),
            "token": uuid.uuid4().hex,  # tells this holding from any other of the same pid
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        draft = self.path.with_name(f"{LOCK_NAME}.{me['token']}.tmp")
        draft.write_text(json.dumps(me) + "\n")
        try:
            for _ in range(ATTEMPTS):
                try:
                    os.link(draft, self.path)  # fails if the lock exists: the atomic test-and-set
                except FileExistsError:
                    holder = _read(self.path)
                    if holder is not None:  # None: released meanwhile, so try again
                        self._free_if_stale(holder)
                    continue
                self._holder = me
                return
        finally:
            draft.unlink(missing_ok=True)
        raise RunLockedError(f"{self.path}: could not take the lock in {ATTEMPTS} attempts")

    def release(self) -> None:
        """Remove the lock file if this process holds it."""
        if self._holder is not None and _read(self.path) == self._holder:
            self.path.unlink(missing_ok=True)
        self._holder = None

    def _free_if_stale(self, holder: dict[str, Any]) -> None:
        """Remove the lock of a process that died on this host; refuse any other."""
        if holder.get("host") != socket.gethostname() or _alive(holder.get("pid")):
            raise RunLockedError(self._refusal(holder))
        log.warning(
            "%s was left by process %s on %s, since %s, which is gone: taking it over",
            self.path,
            holder.get("pid"),
            holder.get("host"),
            holder.get("since"),
        )
        # Moved aside, not deleted: another process may have replaced the stale lock with its own
        # since it was read, and that one must be put back.
        aside = self.path.with_name(f"{LOCK_NAME}.{uuid.uuid4().hex}.stale")
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return
        if _read(aside) != holder:
            try:
                os.link(aside, self.path)
            except FileExistsError:
                pass  # a third process took it meanwhile; the next attempt names it
        aside.unlink()

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
            message += f"; if it is gone (its machine crashed), delete {self.path}"
        return message


def is_global_rank_zero(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether this process is, or will start as, global rank 0, from the launchers' variables.

    torchrun sets RANK on every rank; Lightning starts the other ranks of a node with LOCAL_RANK
    and NODE_RANK set; SLURM sets SLURM_PROCID on every task. A plain `python train.py` has none.
    """
    if "RANK" in environ:
        return int(environ["RANK"]) == 0
    if int(environ.get("LOCAL_RANK", 0)) or int(environ.get("NODE_RANK", 0)):
        return False
    return int(environ.get("SLURM_PROCID", 0)) == 0


def _read(path: Path) -> dict[str, Any] | None:
    """The holder a lock file names; None if there is no file, {} if it is unreadable."""
    try:
        holder = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}


def _alive(pid: Any) -> bool:
    """Whether a process of this pid exists on this host; True when it cannot be told."""
    if not isinstance(pid, int) or pid <= 0:
        return True
    try:
        os.kill(pid, 0)  # signal 0: only the existence check
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, owned by another user
        return True
    return True
