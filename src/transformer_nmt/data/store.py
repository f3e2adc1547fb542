"""The token store: a split encoded once into flat files that every rank memory-maps.

A store is a folder in the tokenizer cache, named by a digest of everything that shapes it:
the corpus fingerprint (which names the languages), the tokenizer, `max_len`, the split and
`STORE_VERSION`. Per side, `values` holds every kept sentence's token ids end to end (int32) and
`offsets` where each begins, plus the end of the last (int64): the layout of `TokenSequences`,
mapped with `np.memmap`, so processes on one machine share its pages instead of each holding a
copy. Splits scored by BLEU (all but train) keep their raw text too, as JSON lines.
`manifest.json` holds the counts and each file's size. It is written last, inside a temporary
folder that is then renamed into place: a store either is whole or does not exist. A store that
fails to read twice under the lock (once may be a shared filesystem's passing error) is logged,
set aside, not deleted (ranks on other nodes may have it mapped), and built again.
"""

import contextlib
import hashlib
import json
import logging
import os
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO

import numpy as np

from transformer_nmt.data.dataset import SIDES, TokenSequences, TranslationDataset, encode_chunks
from transformer_nmt.data.progress import size_text
from transformer_nmt.data.tokenizer import BPETokenizer
from transformer_nmt.runtime.atomic import atomic_folder, exclusive, sync

log = logging.getLogger(__name__)

# Bump when a change to the files, the encoding or the length filter makes older stores wrong.
STORE_VERSION = 1
ARRAYS = {"values": np.int32, "offsets": np.int64}
MANIFEST = "manifest.json"
TEXT = "text.jsonl"


class DamagedStoreError(ValueError):
    """A store's files do not match its manifest."""


def store_path(
    cache_dir: str | os.PathLike,
    split: str,
    fingerprint: str,
    tokenizer: BPETokenizer,
    max_len: int,
) -> Path:
    """The store folder for these settings; any change to any of them gives another folder."""
    settings = {
        "format_version": STORE_VERSION,
        "split": split,
        "fingerprint": fingerprint,
        "tokenizer": hashlib.sha256(tokenizer.to_str().encode()).hexdigest(),
        "max_len": max_len,
    }
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]
    return Path(cache_dir) / f"tokens-{split}-{digest}"


def open_or_build(
    path: Path,
    pairs_fn: Callable[[], Iterable[tuple[str, str]]],
    tokenizer: BPETokenizer,
    max_len: int,
    keep_text: bool,
) -> tuple[TranslationDataset, int]:
    """Open the store at `path`, building it first from `pairs_fn()` if it is missing or damaged.

    Processes that race here take turns under a file lock, so one of them builds.

    Args:
        path: from `store_path`.
        pairs_fn: called only to build; returns the split's (source, target) sentences, which
            are encoded as they are read.
        tokenizer: encodes both sides.
        max_len: pairs with more tokens on either side are dropped (special tokens not counted).
        keep_text: store the raw text of kept pairs (BLEU references).

    Returns:
        The dataset, memory-mapped, and the number of pairs dropped for their length.
    """
    with exclusive(path.parent / f".{path.name}.lock"):
        opened = _open(path)
        if opened is None:
            _build(path, pairs_fn(), tokenizer, max_len, keep_text)
            opened = _open(path)
            verb = "wrote"
        else:
            verb = "reusing"
    dataset, manifest = opened
    tokens = sum(manifest["tokens"].values())
    size = sum(manifest["bytes"].values())
    log.info(
        "Token store: %s %s (%s, %d pairs, %d tokens, %.2f bytes a token)",
        verb,
        path,
        size_text(size),
        manifest["pairs"],
        tokens,
        size / max(tokens, 1),
    )
    return dataset, manifest["dropped"]


READ_ERRORS = (OSError, ValueError, KeyError, TypeError)


def _open(path: Path) -> tuple[TranslationDataset, dict] | None:
    """The store at `path` and its manifest; None if there is none or it was damaged (set aside)."""
    if not path.exists():
        return None
    try:
        return _read(path)
    except READ_ERRORS as e:
        log.warning("Token store %s could not be read (%s): reading it again", path, e)
    try:
        return _read(path)
    except READ_ERRORS as e:
        aside = path.with_name(f".{path.name}.{uuid.uuid4().hex}.damaged")
        os.rename(path, aside)
        log.warning(
            "Token store %s is damaged (%s): set aside as %s (delete it once no run reads it), "
            "building it again",
            path,
            e,
            aside,
        )
        return None


def _read(path: Path) -> tuple[TranslationDataset, dict]:
    """Map a store's files, checking each against the manifest."""
    manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    if manifest["format_version"] != STORE_VERSION:
        raise DamagedStoreError(f"format {manifest['format_version']}, not {STORE_VERSION}")
    for name, size in manifest["bytes"].items():
        found = (path / name).stat().st_size
        if found != size:
            raise DamagedStoreError(f"{name} has {found} bytes, the manifest says {size}")
    sides = {side: _sequences(path, side, manifest) for side in SIDES}
    text = _read_text(path / TEXT, manifest["pairs"]) if TEXT in manifest["bytes"] else None
    src_text, tgt_text = (list(side) for side in zip(*text, strict=True)) if text else (None, None)
    dataset = TranslationDataset(sides["src"], sides["tgt"], src_text, tgt_text)
    return dataset, manifest


class MappedSequences(TokenSequences):
    """One side of a store, memory-mapped; pickled as its folder and side, not its tokens.

    A DataLoader whose workers start by spawn or forkserver pickles the dataset to each of them:
    numpy would copy a mapped array's contents, each worker then holding its own copy.
    """

    def __init__(self, folder: Path, side: str):
        self.folder, self.side = folder, side
        arrays = {name: _map(folder / f"{side}.{name}", dtype) for name, dtype in ARRAYS.items()}
        super().__init__(arrays["values"], arrays["offsets"])

    def __reduce__(self) -> tuple:
        return MappedSequences, (self.folder, self.side)


def _sequences(path: Path, side: str, manifest: dict) -> TokenSequences:
    """One side's sequences, memory-mapped, with their counts checked."""
    sequences = MappedSequences(path, side)
    if len(sequences) != manifest["pairs"] or sequences.offsets[-1] != manifest["tokens"][side]:
        raise DamagedStoreError(f"{side} does not hold the manifest's pairs and tokens")
    return sequences


def _map(file: Path, dtype: type) -> np.ndarray:
    """A read-only memory map of a flat array file (mmap refuses an empty file)."""
    if file.stat().st_size == 0:
        return np.zeros(0, dtype)
    return np.memmap(file, dtype=dtype, mode="r")


def _read_text(file: Path, pairs: int) -> list[list[str]]:
    """The stored (source, target) text of every kept pair."""
    with open(file, encoding="utf-8") as f:
        text = [json.loads(line) for line in f]
    if len(text) != pairs:
        raise DamagedStoreError(f"{file.name} holds {len(text)} pairs, the manifest says {pairs}")
    return text


def _build(
    path: Path,
    pairs: Iterable[tuple[str, str]],
    tokenizer: BPETokenizer,
    max_len: int,
    keep_text: bool,
) -> None:
    """Encode `pairs` into a temporary folder, then rename it to `path`."""
    with atomic_folder(path) as tmp:
        desc = f"encoding {path.name}"
        manifest = _write_files(tmp, pairs, tokenizer, max_len, keep_text, desc)
        with open(tmp / MANIFEST, "xb") as f:
            f.write(json.dumps(manifest, indent=1).encode())
            sync(f)


def _write_files(
    folder: Path,
    pairs: Iterable[tuple[str, str]],
    tokenizer: BPETokenizer,
    max_len: int,
    keep_text: bool,
    desc: str,
) -> dict:
    """Write the arrays (and text) a chunk at a time; return the manifest describing them."""
    names = [f"{side}.{name}" for side in SIDES for name in ARRAYS] + ([TEXT] * keep_text)
    tokens, kept, read = dict.fromkeys(SIDES, 0), 0, 0
    with contextlib.ExitStack() as stack:
        files: dict[str, IO] = {
            name: stack.enter_context(open(folder / name, "xb")) for name in names
        }
        for side in SIDES:
            files[f"{side}.offsets"].write(np.zeros(1, np.int64).tobytes())
        for chunk in encode_chunks(pairs, tokenizer, max_len, desc):
            for side, sequences in zip(SIDES, (chunk.src, chunk.tgt), strict=True):
                files[f"{side}.values"].write(sequences.values.tobytes())
                files[f"{side}.offsets"].write((sequences.offsets[1:] + tokens[side]).tobytes())
                tokens[side] += len(sequences.values)
            if keep_text:
                lines = (json.dumps(pair, ensure_ascii=False) + "\n" for pair in chunk.kept)
                files[TEXT].write("".join(lines).encode())
            kept += len(chunk.kept)
            read += chunk.read
        for f in files.values():
            sync(f)
    return {
        "format_version": STORE_VERSION,
        "pairs": kept,
        "dropped": read - kept,
        "tokens": tokens,
        "bytes": {name: (folder / name).stat().st_size for name in names},
    }
