"""Atomic file writes: a temporary file beside the target, synced, then renamed over it.

Readers, and a run resumed after a kill or a crash of the machine, see the previous file or the
whole new one, never a part.
"""

import errno
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

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
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    # The rename itself survives a crash of the machine only once the folder is synced.
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


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


def disk_full_error(path: str | os.PathLike, needed: int) -> OSError:
    """An error naming `path`, the bytes writing it needs and the bytes free beside it."""
    path = Path(path)
    free = shutil.disk_usage(path.parent).free
    return OSError(
        errno.ENOSPC,
        f"{path}: no space left to write it: it takes {needed:,} bytes and {free:,} are free in "
        f"{path.parent} (or the disk quota is reached); nothing was replaced, the previous "
        f"{path.name}, if any, is whole. Free some space or write elsewhere",
    )
