"""The interface every bitext source implements, its errors, and the cleaning all sources share."""

import logging
from collections.abc import Iterable, Mapping
from typing import Protocol

log = logging.getLogger(__name__)


class DataError(Exception):
    """A corpus is missing, malformed, or does not hold the requested languages."""


class DataNotFoundError(DataError, FileNotFoundError):
    """A split or language that a corpus should hold is absent."""


class DataFormatError(DataError, ValueError):
    """A corpus exists but its content cannot be read as parallel text."""


class Corpus(Protocol):
    """A source of sentence pairs, built by Hydra from numbers and strings."""

    def read(self, split: str, src_lang: str, tgt_lang: str) -> list[tuple[str, str]]:
        """Return the (source, target) sentence pairs of `split` ("train", "val" or "test")."""
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
    src_lines: Iterable[str | None], tgt_lines: Iterable[str | None], where: str
) -> list[tuple[str, str]]:
    """Strip surrounding whitespace and drop pairs with an empty side, logging how many.

    Dropping whole pairs keeps the sides aligned. A missing value (None, as Hub tables may hold)
    counts as empty. No pair left at all is an error: nothing could be trained or scored.
    """
    pairs = []
    dropped = 0
    for src, tgt in zip(src_lines, tgt_lines, strict=True):
        src, tgt = (src or "").strip(), (tgt or "").strip()
        if src and tgt:
            pairs.append((src, tgt))
        else:
            dropped += 1
    if not pairs:
        detail = f": all {dropped} have an empty side" if dropped else ": it is empty"
        raise DataFormatError(f"{where} holds no sentence pairs{detail}")
    if dropped:
        log.warning(
            "%s: dropped %d of %d pairs with an empty side", where, dropped, len(pairs) + dropped
        )
    return pairs
