"""Bad pipeline inputs, refused before any stage runs, each named with what to do.

A monolingual file's language side is checked twice: by its name (`mono.de` where the
back-translation needs the target language, English, is refused) and by its words: the share of
its words found on each side of the parallel training data. A file whose words are more often on
the source side is the wrong side, whatever its name.
"""

import inspect
import re
import typing
from collections.abc import Iterable
from dataclasses import fields
from itertools import islice
from pathlib import Path
from types import UnionType
from typing import Any

from hydra.utils import get_method
from omegaconf import DictConfig, OmegaConf

from transformer_nmt.data.bitext import iter_lines
from transformer_nmt.data.tokenizer import SubwordTokenizer
from transformer_nmt.model.families import FAMILIES
from transformer_nmt.training.plan.config_checks import ConfigError

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


def type_problems(cfg: DictConfig) -> list[str]:
    """Settings of the wrong type for what their `_target_` (or the model family's config)
    takes: numbers, flags and text only, the ones an override most often mistypes (a value the
    run translates first, such as trainer.precision=auto, is typed by a Literal: left alone)."""
    problems = []
    for path, node in _targets(cfg):
        try:
            target = get_method(node["_target_"])
        except Exception as e:  # Hydra re-raises whatever the import raised
            problems.append(f"{path}._target_={node['_target_']} cannot be imported: {e}")
            continue
        takes = _annotations(target)
        if path == "model":
            family = {f.model: f for f in FAMILIES.values()}.get(target)
            if family is not None:
                takes |= {f.name: f.type for f in fields(family.config)}
        for key, value in node.items():
            expected = takes.get(key)
            if expected is not None and not _fits(value, expected):
                problems.append(
                    f"{path}.{key}={value!r} is not {_describe(expected)}, what "
                    f"{node['_target_'].rsplit('.', 1)[-1]} takes"
                )
    return problems


def _targets(cfg: DictConfig) -> list[tuple[str, dict]]:
    """(dotted path, resolved node) of every node with a `_target_`, outside Hydra's own."""
    plain = OmegaConf.to_container(cfg, resolve=False)
    plain.pop("hydra", None)
    found, todo = [], [("", plain)]
    while todo:
        path, node = todo.pop()
        if isinstance(node, dict):
            if "_target_" in node:
                resolved = OmegaConf.to_container(OmegaConf.select(cfg, path), resolve=True)
                found.append((path, resolved))
            todo += [(f"{path}.{k}".lstrip("."), v) for k, v in node.items()]
    return sorted(found)


def _annotations(target: Any) -> dict[str, Any]:
    try:
        parameters = inspect.signature(target).parameters
    except (TypeError, ValueError):
        return {}
    hints = {}
    for name, parameter in parameters.items():
        annotation = parameter.annotation
        if isinstance(annotation, str):  # postponed annotations: left unchecked
            continue
        if annotation is not inspect.Parameter.empty:
            hints[name] = annotation
    return hints


SCALARS = (bool, int, float, str, type(None))


def _fits(value: Any, expected: Any) -> bool:
    """Whether `value` is of `expected` where that is made of scalars; True for anything else."""
    options = _options(expected)
    if options is None:
        return True
    for option in options:
        if option is float and isinstance(value, int | float) and not isinstance(value, bool):
            return True
        elif option is int and isinstance(value, int) and not isinstance(value, bool):
            return True
        elif option in (bool, str, type(None)) and isinstance(value, option):
            return True
    return False


def _options(expected: Any) -> list | None:
    """The scalar types an annotation allows; None if it allows anything else."""
    args = typing.get_args(expected) if isinstance(expected, UnionType) else None
    if typing.get_origin(expected) is typing.Union:
        args = typing.get_args(expected)
    options = list(args) if args else [expected]
    flat = []
    for option in options:
        if option in SCALARS:
            flat.append(option)
        elif typing.get_origin(option) is typing.Union:
            inner = _options(option)
            if inner is None:
                return None
            flat += inner
        else:
            return None
    return flat


def _describe(expected: Any) -> str:
    names = {bool: "a flag (true/false)", int: "an integer", float: "a number", str: "text"}
    return " or ".join(names.get(option, "None") for option in _options(expected) or [])
