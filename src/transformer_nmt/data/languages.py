"""What a multilingual model knows: its languages, the directions it trained, where the tag goes.

One special token a language (`<2fr>`, as Johnson et al., 2017) names the language to translate
into. By default it is the decoder's first token, in place of BOS (`framing.Frame`): fairseq's
decoder language token, and M2M-100's and NLLB's forced first token. `tag_side="source"` puts it
before the source tokens instead, as Johnson et al. did, and the decoder starts with BOS.
`tag_side="both"` is M2M-100's and NLLB's: the source starts with its own language's tag, and
the decoder with the target language's, so a direction needs both languages named.
Directions are written `src-tgt` ("de-fr") in configs, logs and metric names.
"""

import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from transformer_nmt.data.framing import Frame

TAG_SIDES = ("target", "source", "both")
LANGUAGES_KEY = "languages"  # where a checkpoint records `Languages.to_dict()`

Direction = tuple[str, str]


def language_tag(lang: str) -> str:
    """The special token that names `lang`: `<2fr>`."""
    return f"<2{lang}>"


def direction_name(direction: Direction) -> str:
    """ "de-fr": how configs, logs and metrics write a direction."""
    return "-".join(direction)


@dataclass(frozen=True)
class Languages:
    """A multilingual model's languages, its trained directions (in order) and its tag side."""

    languages: tuple[str, ...]
    directions: tuple[Direction, ...]
    tag_side: str = "target"

    @classmethod
    def from_config(
        cls,
        languages: Sequence[str],
        directions: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
        tag_side: str = "target",
    ) -> "Languages":
        """Check the data config's lists, each error naming its option.

        Args:
            languages: each once, e.g. ["de", "en", "fr", "cs"].
            directions: "src-tgt" names; None: every ordered pair of `languages`.
            exclude: directions left out of `directions` (zero-shot ones), e.g. ["fr-cs"].
            tag_side: "target", "source" or "both".
        """
        languages = [str(lang) for lang in languages]
        if len(languages) < 2:
            raise ValueError(f"data.languages={languages} must name at least two languages")
        if twice := _repeated(languages):
            raise ValueError(f"data.languages names {twice} twice: list each language once")
        if bad := [lang for lang in languages if not lang or "-" in lang or ">" in lang]:
            raise ValueError(f"data.languages: {bad} cannot name a language (no '-' or '>')")
        if tag_side not in TAG_SIDES:
            raise ValueError(f"data.tag_side={tag_side!r} must be one of {list(TAG_SIDES)}")
        if directions is None:
            pairs = list(itertools.permutations(languages, 2))
        else:
            pairs = [_parse(name, languages, "data.directions") for name in directions]
            if twice := _repeated([direction_name(p) for p in pairs]):
                raise ValueError(f"data.directions lists {twice} twice: list each direction once")
        excluded = [_parse(name, languages, "data.exclude") for name in exclude]
        if missing := [direction_name(p) for p in excluded if p not in pairs]:
            raise ValueError(f"data.exclude names {missing}, which data.directions does not train")
        pairs = [p for p in pairs if p not in excluded]
        if not pairs:
            raise ValueError("data.exclude leaves no direction to train")
        return cls(tuple(languages), tuple(pairs), tag_side)

    @property
    def names(self) -> list[str]:
        """The directions as "src-tgt" names, in order."""
        return [direction_name(d) for d in self.directions]

    @property
    def tags(self) -> list[str]:
        """One tag a language, in the languages' order: their token ids follow the specials."""
        return [language_tag(lang) for lang in self.languages]

    def frame(self, tgt_lang: str, tag_ids: dict[str, int], src_lang: str | None = None) -> Frame:
        """How pairs into `tgt_lang` are framed: its tag on the tag side; with "both", the
        source starts with `src_lang`'s tag (which it then needs)."""
        tag = tag_ids[tgt_lang]
        if self.tag_side == "source":
            return Frame(source_prefix=(tag,))
        if self.tag_side == "both":
            if src_lang is None:
                raise ValueError(
                    "this model reads the source language's tag before the source (tag_side="
                    "both, as M2M-100): name the source language with src_lang (--src-lang)"
                )
            return Frame(source_prefix=(tag_ids[src_lang],), bos_id=tag)
        return Frame(bos_id=tag)

    def to_dict(self) -> dict[str, Any]:
        """Plain lists and strings: what a checkpoint records (loadable with weights_only)."""
        return {
            "languages": list(self.languages),
            "directions": self.names,
            "tag_side": self.tag_side,
        }

    @classmethod
    def from_dict(cls, saved: dict[str, Any]) -> "Languages":
        """Rebuild from `to_dict`."""
        return cls.from_config(saved["languages"], saved["directions"], (), saved["tag_side"])


def tag_ids(tokens: Sequence[str], languages: Languages) -> dict[str, int]:
    """Each language's tag id in a vocabulary (`tokenizer.tokens()`)."""
    ids = {token: i for i, token in enumerate(tokens)}
    if missing := [tag for tag in languages.tags if tag not in ids]:
        raise ValueError(f"the vocabulary lacks the language tags {missing}")
    return {lang: ids[tag] for lang, tag in zip(languages.languages, languages.tags, strict=True)}


def _parse(name: Any, languages: list[str], option: str) -> Direction:
    """("de", "fr") from "de-fr", both known languages, and not one language twice."""
    parts = str(name).split("-")
    if len(parts) != 2 or parts[0] == parts[1]:
        raise ValueError(f"{option}: {name!r} is no direction; write src-tgt, e.g. de-fr")
    if unknown := [lang for lang in parts if lang not in languages]:
        raise ValueError(f"{option}: {name} names {unknown}, not in data.languages={languages}")
    return parts[0], parts[1]


def _repeated(items: list[str]) -> list[str]:
    # Counted once: M2M-100's 100 languages make 9900 directions.
    return sorted(item for item, n in Counter(items).items() if n > 1)
