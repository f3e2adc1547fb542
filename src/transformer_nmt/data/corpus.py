"""The interface every bitext source implements, its errors, and the cleaning all sources share."""

import logging
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import Protocol

from transformer_nmt.data.progress import progress

log = logging.getLogger(__name__)


class DataError(Exception):
    """A corpus is missing, malformed, or does not hold the requested languages."""


class DataNotFoundError(DataError, FileNotFoundError):
    """A split or language that a corpus should hold is absent."""


class DataFormatError(DataError, ValueError):
    """A corpus exists but its content cannot be read as parallel text."""


class Corpus(Protocol):
    """A source of sentence pairs, built by Hydra from numbers and strings."""

    def stream(self, split: str, src_lang: str, tgt_lang: str) -> Iterator[tuple[str, str]]:
        """Yield the (source, target) sentence pairs of `split` ("train", "val" or "test").

        They are read as they are yielded, a chunk at a time: WMT14's train split is 1.3 GB of
        text, which Python strings would make several GB.
        """
        ...

    def read(self, split: str, src_lang: str, tgt_lang: str) -> list[tuple[str, str]]:
        """Return the pairs of `split` as a list: `list(self.stream(...))`."""
        ...

    def fingerprint(self, split: str, src_lang: str, tgt_lang: str) -> str:
        """Return a string that changes whenever `read` with these arguments could change."""
        ...


def source_split(splits: Mapping[str, str], split: str) -> str:
    """Map a project split name ("train", "val", "test") to the source's own name for it."""
    if split not in splits:
        raise DataError(f"unknown split {split!r}: this corpus maps {sorted(splits)}")
    return splits[split]


def clean_pairs(
    lines: Iterable[tuple[str | None, str | None]], where: str, total: int | None = None
) -> Iterator[tuple[str, str]]:
    """Strip whitespace and drop pairs with an empty side or a NUL byte, logging how many of each.

    Dropping whole pairs keeps the sides aligned. A missing value (None, as Hub tables may hold)
    counts as empty. A NUL byte is no text: binary data, or UTF-16 read as UTF-8, which puts one in
    every line. No pair left at all is an error: nothing could be trained or scored. The counts
    are logged once the last line has been read. `total`, the number of pairs when known, sizes
    the progress bar.
    """
    kept = 0
    dropped: Counter[str] = Counter()  # reason -> pairs
    for src, tgt in progress(lines, desc=f"reading {where}", unit=" pairs", total=total):
        src, tgt = (src or "").strip(), (tgt or "").strip()
        if not (src and tgt):
            dropped["an empty side"] += 1
        elif "\0" in src or "\0" in tgt:
            dropped["a NUL byte"] += 1
        else:
            kept += 1
            yield src, tgt
    total = kept + dropped.total()
    if not kept:
        detail = f": all {total} have {' or '.join(dropped)}" if dropped else ": it is empty"
        if "a NUL byte" in dropped:
            detail += " (a UTF-16 file? convert it: iconv -f utf-16 -t utf-8)"
        raise DataFormatError(f"{where} holds no sentence pairs{detail}")
    for reason, count in dropped.items():
        log.warning("%s: dropped %d of %d pairs with %s", where, count, total, reason)
