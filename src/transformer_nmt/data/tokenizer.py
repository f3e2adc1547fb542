"""What a tokenizer offers; joint source+target byte-level BPE (paper section 3.4), fixed
special-token ids, a cache. The other kind, Marian's SentencePiece: sentencepiece_tokenizer.py;
either rebuilt from its saved string: tokenizer_kinds.py."""

import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterable, Sequence, Sized
from pathlib import Path
from typing import Protocol

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from transformer_nmt.data.progress import LoggedProgress, on_terminal, size_text
from transformer_nmt.runtime.atomic import exclusive, write_atomically

log = logging.getLogger(__name__)

PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
SPECIAL_TOKENS = ["<pad>", "<s>", "</s>", "<unk>"]  # list position = id
# Bump when a change here makes earlier cached tokenizers wrong to reuse.
FORMAT_VERSION = 1


class SubwordTokenizer(Protocol):
    """What training, translation and export need from a tokenizer; SPECIAL_TOKENS come first."""

    @property
    def vocab_size(self) -> int: ...

    def encode_batch(self, texts: list[str], side: str = "source") -> list[list[int]]: ...

    def decode_batch(self, ids: list[list[int]]) -> list[str]: ...

    def tokens(self) -> list[str]: ...

    def continues_word(self) -> list[bool]: ...

    def to_str(self) -> str: ...


class Pieces:
    """A vocabulary of SentencePiece pieces in id order (`pieces`), where ▁ starts a word: the
    tokenizers read from Marian, M2M-100 and NLLB folders."""

    pieces: list[str]

    def tokens(self) -> list[str]:
        """The piece of each id."""
        return list(self.pieces)

    def continues_word(self) -> list[bool]:
        """Whether each id's text goes on the word before it: no ▁ (a word start) before a
        letter or digit."""
        return [p[:1].isalnum() for p in self.pieces]


def tagged_pieces(folder_vocab: list[str], tags: dict[str, str], kind: str) -> list[str]:
    """Our pieces of a multilingual folder's vocabulary: the special tokens first, then its other
    tokens in order, each language token (a key of `tags`) renamed to our tag.

    Raises:
        ValueError: the vocabulary lacks a special or language token, or repeats a piece.
    """
    missing = [t for t in [*SPECIAL_TOKENS, *tags] if t not in folder_vocab]
    repeats = len(set(folder_vocab)) != len(folder_vocab)
    if missing or repeats:
        raise ValueError(
            f"an {kind} vocabulary holds {', '.join(SPECIAL_TOKENS)} and a token per language "
            f"once each; this one lacks {missing or 'none'}, repeats pieces: {repeats}"
        )
    specials = set(SPECIAL_TOKENS)
    return SPECIAL_TOKENS + [tags.get(t, t) for t in folder_vocab if t not in specials]


def inverse(ids: Sequence[int]) -> list[int]:
    """The map back of a permutation of 0..n-1: out[ids[i]] = i."""
    out = [0] * len(ids)
    for i, mapped in enumerate(ids):
        out[mapped] = i
    return out


class BPETokenizer:
    """Byte-level BPE: every string encodes without <unk> and decodes back to itself exactly."""

    def __init__(self, tokenizer: Tokenizer):
        added = tokenizer.get_added_tokens_decoder()
        for expected_id, token in enumerate(SPECIAL_TOKENS):
            found = added.get(expected_id)
            if found is None or found.content != token or not found.special:
                raise ValueError(f"special token {token} must have id {expected_id}")
        # Text that happens to contain "</s>" must stay text, not become EOS.
        # The flag is not serialized, so every constructor path sets it here.
        tokenizer.encode_special_tokens = True
        self._tokenizer = tokenizer

    @classmethod
    def train(
        cls,
        sentences: Iterable[str],
        vocab_size: int,
        min_frequency: int,
        language_tokens: Sequence[str] = (),
    ) -> "BPETokenizer":
        """Learn merges from `sentences` until the vocabulary holds `vocab_size` entries.

        Args:
            sentences: source and target text together (a joint vocabulary).
            vocab_size: upper bound on the vocabulary, special tokens and the 256 bytes included,
                so it must exceed 260.
            min_frequency: a pair seen fewer times is never merged.
            language_tokens: special tokens after SPECIAL_TOKENS (ids 4, 5, ...), one a language
                of a multilingual model (`data/multilingual.py`): never split, skipped in decoding.
        """
        alphabet = pre_tokenizers.ByteLevel.alphabet()
        specials = [*SPECIAL_TOKENS, *language_tokens]
        # Below this the trainer silently returns bytes only: sequences ~5x longer, no BPE at all.
        reserved = len(alphabet) + len(specials)
        if vocab_size <= reserved:
            raise ValueError(
                f"vocab_size={vocab_size} leaves no room for merges: the {len(alphabet)} bytes and "
                f"{len(specials)} special tokens already take {reserved}"
            )
        tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=specials,
            # All 256 bytes, seen or not, so no character is ever unknown.
            initial_alphabet=alphabet,
            # Off the terminal its bars are hidden but still print blank lines into the logs.
            show_progress=on_terminal(),
        )
        # With a length its bar shows counts, a rate and the time left.
        length = len(sentences) if isinstance(sentences, Sized) else None
        if on_terminal():
            tokenizer.train_from_iterator(sentences, trainer, length=length)
        else:  # the trainer reports nothing itself: count what it reads, and beat while it merges
            with LoggedProgress(desc="BPE training", total=length, unit=" sentences") as bar:
                tokenizer.train_from_iterator(bar.count(sentences), trainer, length=length)
        return cls(tokenizer)

    @property
    def vocab_size(self) -> int:
        """Number of token ids, special tokens included."""
        return self._tokenizer.get_vocab_size()

    def encode_batch(self, texts: list[str], side: str = "source") -> list[list[int]]:
        """Token ids of each text, without special tokens; both sides share the vocabulary."""
        return [e.ids for e in self._tokenizer.encode_batch(texts, add_special_tokens=False)]

    def decode_batch(self, ids: list[list[int]]) -> list[str]:
        """Text of each id sequence, special tokens skipped wherever they are."""
        return self._tokenizer.decode_batch(ids, skip_special_tokens=True)

    def tokens(self) -> list[str]:
        """The token of each id."""
        return [self._tokenizer.id_to_token(i) for i in range(self.vocab_size)]

    def continues_word(self) -> list[bool]:
        """Whether each id's text goes on the word before it: it starts with a letter or digit.

        Byte-level BPE spells a byte as itself up to U+00FF, but spaces and control bytes (as
        the Ġ of a word start) as letters from U+0100 on: those start no word's continuation.
        """
        return [t[:1].isalnum() and ord(t[0]) < 0x100 for t in self.tokens()]

    def extended(self, other: "BPETokenizer") -> "BPETokenizer":
        """This vocabulary with the tokens of `other` that it lacks appended: old ids unchanged.

        Each new token comes with `other`'s merge that forms it, ranked after all of this
        tokenizer's merges (in `other`'s order). BPE applies the lowest-ranked merge first, so a
        word is segmented exactly as before and only then merged further: every token of the
        result is a run of this tokenizer's tokens, and text no new merge applies to encodes as
        before.
        """
        mine, theirs = json.loads(self.to_str()), json.loads(other.to_str())
        vocab, merges = mine["model"]["vocab"], mine["model"]["merges"]
        for left, right in theirs["model"]["merges"]:
            # A token this vocabulary has, whatever merge `other` formed it by, keeps its merges.
            if left + right not in vocab:
                vocab[left + right] = len(vocab)
                merges.append([left, right])
        return BPETokenizer.from_str(json.dumps(mine))

    def with_dropout(self, p: float) -> "BPETokenizer":
        """A copy that skips each merge with probability `p` (BPE-dropout)."""
        tokenizer = Tokenizer.from_str(self.to_str())
        tokenizer.model.dropout = p
        return BPETokenizer(tokenizer)

    def to_str(self) -> str:
        """Serialize to a JSON string, e.g. to carry inside a checkpoint."""
        return self._tokenizer.to_str()

    @classmethod
    def from_str(cls, s: str) -> "BPETokenizer":
        """Rebuild from a `to_str` string."""
        return cls(Tokenizer.from_str(s))

    def save(self, path: str | os.PathLike) -> None:
        """Write to `path` atomically: readers see the old file or the whole new one."""
        write_atomically(path, self.to_str())

    @classmethod
    def load(cls, path: str | os.PathLike) -> "BPETokenizer":
        """Read a file written by `save`."""
        return cls.from_str(Path(path).read_text(encoding="utf-8"))


def cache_path(
    cache_dir: str | os.PathLike,
    vocab_size: int,
    min_frequency: int,
    fingerprint: str,
    language_tokens: Sequence[str] = (),
) -> Path:
    """The cache file for these settings; any change to any of them gives another file."""
    settings = {
        "format_version": FORMAT_VERSION,
        "vocab_size": vocab_size,
        "min_frequency": min_frequency,
        "fingerprint": fingerprint,
    }
    if language_tokens:  # absent otherwise, so the one-direction caches keep their names
        settings["language_tokens"] = list(language_tokens)
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]
    return Path(cache_dir) / f"bpe-{digest}.json"


def load_or_train(
    cache_dir: str | os.PathLike,
    sentences_fn: Callable[[], Iterable[str]],
    vocab_size: int,
    min_frequency: int,
    fingerprint: str,
    language_tokens: Sequence[str] = (),
) -> BPETokenizer:
    """Load the tokenizer cached for these settings, or train it on `sentences_fn()` and cache it.

    Processes that race here, as the ranks of a torchrun or SLURM job do since each loads the
    tokenizer before any barrier, take turns under a file lock: the first trains and saves, the
    others wait and then load its file. One training per cache folder, so per node at most.

    Args:
        cache_dir: folder of cached tokenizers.
        sentences_fn: called only on a cache miss; yields the training text.
        vocab_size: upper bound on the vocabulary size.
        min_frequency: a pair seen fewer times is never merged.
        fingerprint: identifies the training text (corpus, files, languages, split).
        language_tokens: special tokens, one a language (`BPETokenizer.train`).
    """
    path = cache_path(cache_dir, vocab_size, min_frequency, fingerprint, language_tokens)
    with exclusive(path.parent / f".{path.stem}.lock"):
        if path.is_file():
            try:
                tokenizer = BPETokenizer.load(path)
                log.info("Tokenizer: reusing %s (%s)", path, size_text(path.stat().st_size))
                return tokenizer
            except Exception as e:  # `tokenizers` raises plain Exceptions for malformed JSON
                log.warning("%s is unreadable (%s): training the tokenizer again", path, e)
        log.info("training the BPE tokenizer on %s (vocab_size=%d)", fingerprint, vocab_size)
        tokenizer = BPETokenizer.train(sentences_fn(), vocab_size, min_frequency, language_tokens)
        tokenizer.save(path)
        log.info("Tokenizer: cached at %s (%s)", path, size_text(path.stat().st_size))
        return tokenizer
