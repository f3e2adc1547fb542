"""Bad pipeline inputs, refused before any stage runs, each named with what to do.

A monolingual file's language side is checked twice: by its name (`mono.de` where the
back-translation needs the target language, English, is refused) and by its words: the share of
its words found on each side of the parallel training data. A file whose words are more often on
the source side is the wrong side, whatever its name.
"""

import re
from collections.abc import Iterable
from itertools import islice
from pathlib import Path

from transformer_nmt.data.bitext import iter_lines
from transformer_nmt.data.tokenizer import SubwordTokenizer
from transformer_nmt.training.config_checks import ConfigError

SAMPLE_LINES = 2000  # of each file: enough to tell languages apart, cheap on any corpus
WORD = re.compile(r"\w+")


def positive_factor(name: str, value: float) -> float:
    """An upsampling factor, which must be > 0."""
    if value <= 0:
        raise ConfigError(
            f"{name}={value} must be > 0: it is how many times a corpus's pairs are seen per epoch"
        )
    return value


def check_monolingual(path: Path, lang: str, other: str, pairs: Iterable[tuple[str, str]]) -> None:
    """Refuse `path` unless it reads as `lang`, the target side of `pairs` (source `other`).

    Raises:
        ConfigError: a missing file, a name ending in the other language, or words more often
            found on the source side of the parallel data than on its target side.
    """
    if not path.is_file():
        raise ConfigError(f"--monolingual {path}: no such file")
    suffixes = [s.lstrip(".") for s in path.suffixes if s != ".gz"]
    if suffixes and suffixes[-1] == other:
        raise ConfigError(
            f"--monolingual {path} is named as {other} text, but back-translation needs {lang} "
            f"text (the target side, translated back into {other}): give a .{lang} file"
        )
    source, target = set(), set()
    for src, tgt in islice(pairs, SAMPLE_LINES):
        source.update(_words(src))
        target.update(_words(tgt))
    words = [w for line in islice(iter_lines(path), SAMPLE_LINES) for w in _words(line)]
    if not words:
        raise ConfigError(f"--monolingual {path} holds no words")
    on_target = sum(w in target for w in words) / len(words)
    on_source = sum(w in source for w in words) / len(words)
    if on_source > on_target:
        raise ConfigError(
            f"--monolingual {path} reads as {other}: {on_source:.0%} of its words are on the "
            f"{other} side of the parallel data, {on_target:.0%} on the {lang} side; "
            f"back-translation needs {lang} text"
        )


def _words(line: str) -> list[str]:
    return WORD.findall(line.lower())


def check_teacher_vocabulary(
    teacher: str, tokenizer: SubwordTokenizer, sources: Iterable[str], least: float = 0.5
) -> None:
    """Refuse a teacher whose vocabulary does not hold the student's source words.

    A word counts as held when the teacher's tokenizer encodes it (after a space, as inside a
    sentence) as one token: a teacher trained on the student's data holds most running words,
    one trained on another language or corpus splits them into pieces.

    Raises:
        ConfigError: fewer than `least` of the sampled running words held, with the share.
    """
    counts: dict[str, int] = {}
    for line in islice(sources, SAMPLE_LINES):
        for word in line.split():
            counts[word] = counts.get(word, 0) + 1
    if not counts:
        raise ConfigError("the student's training data has no source words to distil")
    distinct = list(counts)
    pieces = tokenizer.encode_batch([f" {w}" for w in distinct])
    held = sum(counts[w] for w, ids in zip(distinct, pieces, strict=True) if len(ids) == 1)
    share = held / sum(counts.values())
    if share < least:
        raise ConfigError(
            f"--teacher {teacher}: its vocabulary holds {share:.0%} of the student's source "
            f"words as whole tokens (at least {least:.0%} expected): it was trained on other data "
            "or another language; distil with a teacher trained on the student's data"
        )
