"""A lock file that names its holder, made without `flock`, which Lustre or NFS may refuse.

The holder (pid, host, since, a token, its process as `processes.this_process` names it) is
written to a draft beside the lock, then hard-linked to the lock's path: `os.link` fails if the
path exists, an atomic test-and-set on local filesystems, NFS and Lustre alike, and no reader
ever sees the file half-written. NFS may retry a `link` whose reply was lost and report "exists"
for the link it made: the draft's link count (2 once linked) tells. While it holds, a thread
refreshes the file's mtime every `HEARTBEAT` seconds, retrying a failed refresh sooner.

A lock whose holder is gone is taken over, with a warning naming it:

- in this boot and PID namespace (not merely this hostname), its process gone: at once;
- an earlier start of this SLURM job (same `SLURM_JOB_ID`, a lower `SLURM_RESTART_COUNT`), on
  any node: at once, since a requeued job runs only once its earlier start has ended;
- on any host, not refreshed for `STALE` seconds by the filesystem's clock (a file made now,
  not this host's clock): its machine crashed or its job was killed, so a job requeued on
  another node is not blocked for ever.

`training.run_lock.RunLock` refuses a live holder; `atomic.exclusive` waits for it.
"""

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from transformer_nmt.runtime.processes import filesystem_now, is_gone, this_process

log = logging.getLogger(__name__)

HEARTBEAT = 30.0  # seconds between refreshes of a held lock's mtime
RETRY_FIRST = 1.0  # seconds before a failed refresh is tried again, doubled at each failure
# Ten missed refreshes: a busy filesystem or a paused process is not taken for dead, and hosts'
# clocks that differ by seconds do not matter.
STALE = 10 * HEARTBEAT
ATTEMPTS = 10  # each lost only to a lock released or taken over meanwhile
# Seconds between a waiter's looks: soon after a short build, few on a shared filesystem during a
# long one.
FIRST_POLL, MAX_POLL = 0.05, 2.0
SAY_EVERY = 60.0  # seconds between a waiter's lines naming whom it waits for


class LockContendedError(RuntimeError):
    """The lock changed hands at every attempt to take it."""


class LockFile:
    """The lock file `path`, held by at most one process at a time.

    Args:
        path: the lock file; its folder is created if missing.
        stale_after: seconds without a refresh after which a lock is taken over.
        clock: the time, as the lock's filesystem stamps files (default: `filesystem_now` of
            its folder; tests drive it).
        sleep: how a waiter waits (tests drive it).
    """

    def __init__(
        self,
        path: str | os.PathLike,
        stale_after: float = STALE,
        clock: Callable[[], float] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.path = Path(path)
        self.stale_after, self.sleep = stale_after, sleep
        self.clock = clock or self._filesystem_clock
        self.holder: dict[str, Any] | None = None  # what this process wrote, while it holds
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None

    def try_acquire(self) -> dict[str, Any] | None:
        """Take the lock, taking over a gone holder's: None, or the live holder that has it.

        The holder is {} if its file is unreadable. Raises `LockContendedError` if the lock changed
        hands at each of `ATTEMPTS` tries.
        """
        me = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": datetime.now().astimezone().isoformat(timespec="seconds"),
            "token": uuid.uuid4().hex,  # tells this holding from any other of the same pid
            "process": this_process(),
            **_slurm_start(),
        }
        # Not ".tmp": `atomic.atomic_folder` removes a cache entry's leftover temporaries.
        draft = self.path.with_name(f"{self.path.name}.{me['token']}.draft")
        self._write_draft(draft, me)
        try:
            for _ in range(ATTEMPTS):
                try:
                    os.link(draft, self.path)  # fails if the lock exists: the atomic test-and-set
                except FileExistsError:
                    if _linked(draft):  # NFS's retried link: this one made it
                        self.holder = me
                        self._start_heartbeat()
                        return None
                    found = self._inspect(self.path)
                    if found is None:  # released meanwhile
                        continue
                    holder, why_gone = found
                    if why_gone is None:
                        return holder
                    self._take_over(holder, why_gone)
                    continue
                self.holder = me
                self._start_heartbeat()
                return None
        finally:
            draft.unlink(missing_ok=True)
        raise LockContendedError(f"{self.path}: could not take the lock in {ATTEMPTS} attempts")

    def acquire_waiting(self) -> None:
        """Take the lock, waiting while a live holder has it, and saying whom it waits for."""
        delay, said = FIRST_POLL, None
        while True:
            try:
                holder = self.try_acquire()
            except LockContendedError:  # it changes hands: look again after a while
                pass
            else:
                if holder is None:
                    return
                now = self.clock()
                if said is None or now - said >= SAY_EVERY:
                    log.info("%s: waiting for %s to release it", self.path, describe(holder))
                    said = now
            self.sleep(delay)
            delay = min(2 * delay, MAX_POLL)

    def release(self) -> None:
        """Remove the lock file if this process holds it."""
        if self._heartbeat is not None:
            self._stop.set()
            self._heartbeat.join()
            self._heartbeat = None
        if self.holder is not None and read_holder(self.path) == self.holder:
            self.path.unlink(missing_ok=True)
        self.holder = None

    def _filesystem_clock(self) -> float:
        self.path.parent.mkdir(parents=True, exist_ok=True)  # a released cache's folder goes
        return filesystem_now(self.path.parent)

    def _write_draft(self, draft: Path, holder: dict[str, Any]) -> None:
        while True:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                draft.write_text(json.dumps(holder) + "\n")
                return
            except FileNotFoundError:  # the folder was removed since: a cache build failed
                continue

    def _start_heartbeat(self) -> None:
        self._stop.clear()
        self._heartbeat = threading.Thread(target=self._refresh, daemon=True)
        self._heartbeat.start()

    def _refresh(self) -> None:
        """Refresh the lock's mtime every `HEARTBEAT` seconds while it is this process's.

        A refresh that fails (a file server's hiccup: EIO, ESTALE, a timeout) is retried sooner,
        doubling the wait up to `HEARTBEAT`, with a warning each time: the lock is taken over only
        after `STALE` seconds without one. It ends, saying so, only once the lock is lost: its
        file gone, or naming another holder.
        """
        wait, failures = HEARTBEAT, 0
        while not self._stop.wait(wait):
            try:
                if (lost := self._lost()) is not None:
                    log.error(
                        "%s was %s: this process no longer holds it, so what it guards may be "
                        "written by another process beside this one",
                        self.path,
                        lost,
                    )
                    return
                os.utime(self.path)
            except OSError as error:
                failures += 1
                wait = min(RETRY_FIRST * 2 ** (failures - 1), HEARTBEAT)
                log.warning(
                    "%s: refresh failed (%s), retrying in %.0f s; the lock is taken over after "
                    "%.0f s without one",
                    self.path,
                    error,
                    wait,
                    self.stale_after,
                )
                continue
            if failures:
                log.info("%s: refreshed again after %d failed attempt(s)", self.path, failures)
            wait, failures = HEARTBEAT, 0

    def _lost(self) -> str | None:
        """How this process lost the lock, or None while it holds it; OSError if it cannot
        tell."""
        try:
            holder = parse_holder(self.path.read_bytes())
        except FileNotFoundError:
            return "removed"
        return None if holder == self.holder else f"taken by {describe(holder)}"

    def _inspect(self, path: Path) -> tuple[dict[str, Any], str | None] | None:
        """The holder `path` names and why it is gone (None if live); None if there is no file."""
        try:
            with open(path, "rb") as f:
                mtime = os.fstat(f.fileno()).st_mtime
                holder = parse_holder(f.read())
        except FileNotFoundError:
            return None
        if is_gone(holder.get("process") or {}):
            return holder, "which is gone"
        mine = _slurm_start()
        if mine and holder.get("slurm_job") == mine["slurm_job"]:
            if holder.get("slurm_restart", 0) < mine["slurm_restart"]:
                return holder, f"an earlier start of SLURM job {mine['slurm_job']}, requeued since"
        unrefreshed = self.clock() - mtime
        if unrefreshed > self.stale_after:
            return holder, f"and not refreshed for {unrefreshed:.0f} s"
        return holder, None

    def _take_over(self, holder: dict[str, Any], why_gone: str) -> None:
        """Remove the lock of a gone holder, with a warning naming it."""
        log.warning("%s was left by %s, %s: taking it over", self.path, describe(holder), why_gone)
        # Moved aside, not deleted: another process may have replaced it with its own since it was
        # read, or its holder refreshed it, and then it must be put back.
        aside = self.path.with_name(f"{self.path.name}.{uuid.uuid4().hex}.stale")
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return
        found = self._inspect(aside)
        if found is None or found[0] != holder or found[1] is None:
            try:
                os.link(aside, self.path)
            except FileExistsError:
                pass  # a third process took it meanwhile; the next attempt names it
        aside.unlink()


def describe(holder: dict[str, Any]) -> str:
    """A holder for people: "process 42 on node-3, since 2025-01-01T00:00:00+00:00"."""
    if not holder:
        return "a holder that the lock file does not name (it is unreadable)"
    return f"process {holder.get('pid')} on {holder.get('host')}, since {holder.get('since')}"


def read_holder(path: Path) -> dict[str, Any] | None:
    """The holder a lock file names; None if there is no file, {} if it is unreadable."""
    try:
        return parse_holder(path.read_bytes())
    except FileNotFoundError:
        return None
    except OSError:
        return {}


def parse_holder(data: bytes) -> dict[str, Any]:
    """The holder in a lock file's bytes; {} if they name none."""
    try:
        holder = json.loads(data)
    except ValueError:
        return {}
    return holder if isinstance(holder, dict) else {}


def _slurm_start() -> dict[str, Any]:
    """This process's SLURM job and how often it was requeued; {} outside SLURM."""
    job = os.environ.get("SLURM_JOB_ID")
    if job is None:
        return {}
    return {"slurm_job": job, "slurm_restart": int(os.environ.get("SLURM_RESTART_COUNT", 0))}


def _linked(draft: Path) -> bool:
    """Whether the draft is linked to the lock's path: two names, the standard NFS check."""
    try:
        return os.stat(draft).st_nlink == 2
    except FileNotFoundError:
        return False
