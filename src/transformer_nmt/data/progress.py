"""Progress bars for the data's long passes: reading, BPE training, encoding."""

from collections.abc import Iterable

from tqdm import tqdm


def progress(iterable: Iterable | None = None, **kwargs) -> tqdm:
    """A tqdm bar on stderr with counts and rates, drawn only on a terminal.

    `disable=None` turns it off when stderr is no TTY: a log file or a scheduler's output would
    collect one line per refresh.
    """
    return tqdm(iterable, disable=None, dynamic_ncols=True, **kwargs)


def size_text(nbytes: int) -> str:
    """A byte count for people: "1.2 MB"."""
    if nbytes < 1000:
        return f"{nbytes} B"
    size = nbytes / 1000
    for unit in ("kB", "MB"):
        if size < 1000:
            return f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} GB"
