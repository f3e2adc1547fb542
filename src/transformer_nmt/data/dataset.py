"""Encoded sentence pairs held as flat token arrays, compact enough for WMT-sized corpora."""

import itertools
from collections.abc import Iterable, Iterator, Sequence, Sized
from typing import NamedTuple

import numpy as np
from torch.utils.data import Dataset

from transformer_nmt.data.framing import ADDED_TOKENS, source_ids
from transformer_nmt.data.progress import progress
from transformer_nmt.data.tokenizer import BPETokenizer

# Sentences encoded per call: bounds the memory held in Python int lists while encoding.
ENCODE_CHUNK = 50_000
# A pair's two sides, as `TranslationDataset` names them.
SIDES = ("src", "tgt")


class TokenSequences:
    """Variable-length token sequences in one flat int32 array plus offsets.

    About 4 bytes a token instead of about 40 for Python lists, and DataLoader workers share it
    without the copy-on-write growth that touching millions of Python objects causes.
    """

    def __init__(self, values: np.ndarray, offsets: np.ndarray):
        self.values = values
        self.offsets = offsets

    @classmethod
    def from_lists(cls, sequences: Sequence[Sequence[int]]) -> "TokenSequences":
        """Pack a list of id lists."""
        lengths = np.fromiter(map(len, sequences), dtype=np.int64, count=len(sequences))
        values = np.fromiter(
            itertools.chain.from_iterable(sequences), dtype=np.int32, count=int(lengths.sum())
        )
        return cls(values, _offsets(lengths))

    @classmethod
    def concat(cls, parts: Sequence["TokenSequences"]) -> "TokenSequences":
        """Join packed sequences end to end."""
        values = np.concatenate([np.zeros(0, np.int32), *(p.values for p in parts)])
        lengths = np.concatenate([np.zeros(0, np.int64), *(p.lengths() for p in parts)])
        return cls(values, _offsets(lengths))

    def lengths(self) -> np.ndarray:
        """Length of each sequence."""
        return np.diff(self.offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, index: int) -> np.ndarray:
        return self.values[self.offsets[index] : self.offsets[index + 1]]


def _offsets(lengths: np.ndarray) -> np.ndarray:
    """Start of each sequence in the flat array, plus the end of the last."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


class TranslationDataset(Dataset):
    """Pairs of token-id sequences, with their raw text when kept (references for BLEU)."""

    def __init__(
        self,
        src: TokenSequences,
        tgt: TokenSequences,
        src_text: list[str] | None = None,
        tgt_text: list[str] | None = None,
    ):
        self.src = src
        self.tgt = tgt
        self.src_text = src_text
        self.tgt_text = tgt_text

    @property
    def src_lengths(self) -> np.ndarray:
        """Source lengths as the model sees them, EOS included."""
        return self.src.lengths() + ADDED_TOKENS

    @property
    def tgt_lengths(self) -> np.ndarray:
        """Target lengths as the model sees them, BOS (input) or EOS (output) included."""
        return self.tgt.lengths() + ADDED_TOKENS

    def __len__(self) -> int:
        return len(self.src)

    def __getitem__(self, index: int) -> dict:
        example = {"src": source_ids(self.src[index].tolist()), "tgt": self.tgt[index].tolist()}
        if self.src_text is not None and self.tgt_text is not None:
            example["src_text"] = self.src_text[index]
            example["tgt_text"] = self.tgt_text[index]
        return example


def encode_pairs(
    pairs: list[tuple[str, str]],
    tokenizer: BPETokenizer,
    max_len: int,
    keep_text: bool,
    desc: str = "encoding",
) -> tuple[TranslationDataset, int]:
    """Encode pairs, dropping those with more than `max_len` tokens on either side.

    Args:
        pairs: (source, target) sentences.
        tokenizer: encodes both sides.
        max_len: most tokens a side may have, special tokens not counted.
        keep_text: keep the raw text of kept pairs (needed for BLEU, wasted on training data).
        desc: names the pass on its progress bar.

    Returns:
        The dataset and the number of pairs dropped.
    """
    chunks = list(encode_chunks(pairs, tokenizer, max_len, desc))
    kept = [pair for chunk in chunks for pair in chunk.kept]
    dataset = TranslationDataset(
        TokenSequences.concat([chunk.src for chunk in chunks]),
        TokenSequences.concat([chunk.tgt for chunk in chunks]),
        src_text=[src for src, _ in kept] if keep_text else None,
        tgt_text=[tgt for _, tgt in kept] if keep_text else None,
    )
    return dataset, len(pairs) - len(kept)


class EncodedChunk(NamedTuple):
    """The pairs of a chunk that fit `max_len`: their tokens and text; how many pairs were read."""

    src: TokenSequences
    tgt: TokenSequences
    kept: list[tuple[str, str]]
    read: int


def encode_chunks(
    pairs: Iterable[tuple[str, str]], tokenizer: BPETokenizer, max_len: int, desc: str
) -> Iterator[EncodedChunk]:
    """Encode pairs a chunk at a time, as they are read: a stream is never held whole.

    The one encoding both the in-memory dataset and the token store are made of.
    """
    total = len(pairs) if isinstance(pairs, Sized) else None
    pairs = iter(pairs)
    # A context, so that off a terminal a line comes every LOG_EVERY seconds even mid-chunk.
    with progress(desc=desc, total=total, unit=" pairs") as bar:
        while chunk := list(itertools.islice(pairs, ENCODE_CHUNK)):
            src_ids = tokenizer.encode_batch([src for src, _ in chunk])
            tgt_ids = tokenizer.encode_batch([tgt for _, tgt in chunk], side="target")
            keep = [
                i
                for i, (s, t) in enumerate(zip(src_ids, tgt_ids, strict=True))
                if max(len(s), len(t)) <= max_len
            ]
            yield EncodedChunk(
                TokenSequences.from_lists([src_ids[i] for i in keep]),
                TokenSequences.from_lists([tgt_ids[i] for i in keep]),
                [chunk[i] for i in keep],
                len(chunk),
            )
            bar.update(len(chunk))
