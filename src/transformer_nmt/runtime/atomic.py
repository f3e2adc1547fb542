"""Durable files and cache locks: what is written is whole or absent, and built by one process.

A file or a folder is written as a temporary beside its target, synced, then renamed into place:
readers, and a run resumed after a kill or a crash of the machine, see the previous version or
the whole new one, never a part. Processes that share a cache take turns under `exclusive`, so
that one of them builds what the others then read.
"""

import contextlib
import errno
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from transformer_nmt.runtime.lock_file import STALE, LockFile

DISK_FULL = (errno.ENOSPC, errno.EDQUOT)  # no space left; over the user's quota


@contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "wb", **kwargs) -> Iterator[IO]:
    """Open a temporary file that replaces `path`, synced, when the block ends without error.

    On an error the temporary file is removed and `path` is left as it was.

    Args:
        path: the file to write; its folder is created if missing.
        mode: "wb" or "w".
        kwargs: passed to `open`, e.g. `encoding`.
    """
    if mode not in ("wb", "w"):
        raise ValueError(f"mode must be 'wb' or 'w', not {mode!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Same folder, so the same filesystem: os.replace is then atomic. Not mkstemp, whose 0600
    # mode would hide the file from those the umask lets read it.
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    try:
        with open(tmp, mode.replace("w", "x"), **kwargs) as f:
            yield f
            sync(f)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    sync_folder(path.parent)


@contextmanager
def atomic_folder(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary folder that is renamed to `path` when the block ends without error.

    The block writes the folder's files and syncs them (`sync`); on an error the temporary
    folder is removed, and one left by a process killed mid-write is removed on the next call.
    `path` must not exist yet.
    """
    path = Path(path)
    for leftover in path.parent.glob(f".{path.name}.*.tmp"):
        shutil.rmtree(leftover)
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    tmp.mkdir(parents=True)
    try:
        yield tmp
        os.rename(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    sync_folder(path.parent)


def sync(f: IO) -> None:
    """Flush `f` and sync it to disk."""
    f.flush()
    os.fsync(f.fileno())


def sync_folder(folder: str | os.PathLike) -> None:
    """Sync a folder, so that a rename in it survives a crash of the machine."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def exclusive(
    lock_path: Path,
    stale_after: float = STALE,
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[None]:
    """Hold the lock file `lock_path`, waiting while a live process holds it; remove it after.

    A `LockFile`, made by a hard link, not `flock`, which cluster filesystems may refuse: a
    holder that is gone is taken over with a warning naming it, and a waiter says every minute
    whom it waits for. Removing the file keeps the cache folder to what is cached, and a folder
    left empty (nothing cached, the build failed) is removed too; a process about to take the
    lock just then makes the folder again.

    Args:
        lock_path: the lock file, beside the cache entry it guards.
        stale_after, clock, sleep: as `LockFile` takes them.
    """
    lock = LockFile(lock_path, stale_after, clock, sleep)
    lock.acquire_waiting()
    try:
        yield
    finally:
        lock.release()  # the next holder finds the cache written
        with contextlib.suppress(OSError):  # not empty: the usual case
            lock_path.parent.rmdir()


def write_atomically(path: str | os.PathLike, data: str | bytes) -> None:
    """Write `data` (text as UTF-8) to `path` through `atomic_open`; a full disk is named."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    try:
        with atomic_open(path) as f:
            f.write(data)
    except OSError as e:
        if not is_disk_full(e):
            raise
        raise disk_full_error(path, len(data)) from e


def remove_stale_temporaries(path: str | os.PathLike) -> None:
    """Delete the temporary files of `path` that a process killed mid-write left behind.

    Only for files that one process writes: another writer's temporary file would go too.
    """
    path = Path(path)
    for stale in path.parent.glob(f".{path.name}.*.tmp"):
        stale.unlink(missing_ok=True)


def is_disk_full(error: BaseException) -> bool:
    """Whether `error`, or one it was raised from, says the disk or the quota is full.

    torch.save turns its file's OSError into a RuntimeError that keeps the OSError as context.
    """
    while error is not None:
        if isinstance(error, OSError) and error.errno in DISK_FULL:
            return True
        error = error.__cause__ or error.__context__
    return False


class DiskFullError(OSError):
    """A write that found the disk or the quota full; the message names the file, the bytes it
    takes and those free, and says that the previous version is whole."""


def disk_full_error(path: str | os.PathLike, needed: int) -> DiskFullError:
    """An error naming `path`, the bytes writing it needs and the bytes free beside it."""
    path = Path(path)
    free = shutil.disk_usage(path.parent).free
    return DiskFullError(
        errno.ENOSPC,
        f"{path}: no space left to write it: it takes {needed:,} bytes and {free:,} are free in "
        f"{path.parent} (or the disk quota is reached); nothing was replaced, the previous "
        f"{path.name}, if any, is whole. Free some space or write elsewhere",
    )
