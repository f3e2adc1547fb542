"""Local WMT-style parallel text: one sentence per line, `{split}.{lang}` or `{split}.{lang}.gz`."""

import codecs
import gzip
import itertools
import logging
import zlib
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from transformer_nmt.data.corpus import (
    DataFormatError,
    DataNotFoundError,
    clean_pairs,
    source_split,
)

log = logging.getLogger(__name__)

DEFAULT_SPLITS = {"train": "train", "val": "val", "test": "test"}
GZIP_MAGIC = b"\x1f\x8b"  # the first two bytes of every gzip file


class TextCorpus:
    """Line-aligned UTF-8 files in one folder: line N of each language is the same sentence."""

    def __init__(self, path: str, splits: Mapping[str, str] = DEFAULT_SPLITS):
        self.path = Path(path)
        self.splits = dict(splits)

    def stream(self, split: str, src_lang: str, tgt_lang: str) -> Iterator[tuple[str, str]]:
        """Yield the cleaned (source, target) pairs of `split`, reading both files line by line."""
        files = self.file(split, src_lang), self.file(split, tgt_lang)
        where = f"{files[0]} and {files[1]}"
        return clean_pairs(_aligned(*files), where)

    def read(self, split: str, src_lang: str, tgt_lang: str) -> list[tuple[str, str]]:
        """Return the cleaned (source, target) pairs of `split`."""
        return list(self.stream(split, src_lang, tgt_lang))

    def fingerprint(self, split: str, src_lang: str, tgt_lang: str) -> str:
        """Identify the two files by path, size and modification time."""
        stats = []
        for lang in (src_lang, tgt_lang):
            file = self.file(split, lang)
            stat = file.stat()
            stats.append(f"{file.resolve()}:{stat.st_size}:{stat.st_mtime_ns}")
        return f"TextCorpus({';'.join(stats)})"

    def file(self, split: str, lang: str) -> Path:
        """Return the one file holding `lang` for `split`, plain or gzipped."""
        name = f"{source_split(self.splits, split)}.{lang}"
        found = [self.path / n for n in (name, f"{name}.gz") if (self.path / n).is_file()]
        if len(found) == 1:
            return found[0]
        if found:
            # Two candidates usually mean a stale decompressed copy: refuse to guess.
            raise DataFormatError(f"both {found[0]} and {found[1]} exist; keep only one")
        raise DataNotFoundError(
            f"no {name} or {name}.gz for split {split!r} in {self.path}; {_listing(self.path)}"
        )


def _aligned(src_file: Path, tgt_file: Path) -> Iterator[tuple[str, str]]:
    """Line N of one file with line N of the other; an error once one of them ends first."""
    ended = object()
    lines = itertools.zip_longest(iter_lines(src_file), iter_lines(tgt_file), fillvalue=ended)
    for number, (src, tgt) in enumerate(lines, start=1):
        if src is ended or tgt is ended:
            longer = number + sum(1 for _ in lines)  # reads the rest of the longer file
            counts = (number - 1, longer) if src is ended else (longer, number - 1)
            raise DataFormatError(
                f"{src_file} has {counts[0]} lines but {tgt_file} has {counts[1]}: parallel "
                "files must have one line per sentence pair"
            )
        yield src, tgt


def read_lines(file: Path, replace_invalid: bool = False) -> list[str]:
    """Read a UTF-8 text file (gzipped if named *.gz), one string per line, line ends kept."""
    return list(iter_lines(file, replace_invalid))


def iter_lines(file: Path, replace_invalid: bool = False) -> Iterator[str]:
    """Yield the lines of a UTF-8 text file (gzipped if named *.gz) as they are read."""
    with open(file, "rb") as f:
        if file.suffix != ".gz":
            yield from decode_lines(f, str(file), replace_invalid)
            return
        if f.read(2) not in (b"", GZIP_MAGIC):
            raise DataFormatError(
                f"{file}: not gzip data, although the name ends in .gz: if it holds plain text, "
                "rename it without .gz, or compress it with gzip"
            )
        f.seek(0)
        try:
            with gzip.open(f, "rb") as unzipped:
                yield from decode_lines(unzipped, str(file), replace_invalid)
        except (gzip.BadGzipFile, EOFError, zlib.error) as e:
            raise DataFormatError(
                f"{file}: damaged gzip data ({type(e).__name__}: {e}); copy or compress it again"
            ) from e


def decode_lines(
    raw_lines: Iterable[bytes], where: str, replace_invalid: bool = False
) -> Iterator[str]:
    """Decode each line as UTF-8, so that an error can name the line.

    Invalid bytes raise `DataFormatError`: training data with them is better fixed than guessed.
    With `replace_invalid` they become U+FFFD instead and a warning names the line, so that a
    translation stays one output line per input line. A byte order mark opening the first line
    is dropped (as "utf-8-sig" does): it would otherwise start the first sentence.
    """
    for number, raw in enumerate(raw_lines, start=1):
        if number == 1:
            raw = raw.removeprefix(codecs.BOM_UTF8)
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as e:
            problem = f"{where}, line {number}: not valid UTF-8 ({e.reason})"
            if not replace_invalid:
                raise DataFormatError(problem) from e
            log.warning("%s; invalid bytes replaced by U+FFFD", problem)
            yield raw.decode("utf-8", errors="replace")


def _listing(folder: Path) -> str:
    """Describe what a folder holds, for error messages."""
    if not folder.is_dir():
        return "that folder does not exist"
    names = sorted(p.name for p in folder.iterdir())
    return f"it holds: {', '.join(names)}" if names else "it is empty"
