"""The off-target rate: outputs written in another language than the one asked for.

Zero-shot directions of a multilingual model often answer in a language seen in training with
that source instead (Zhang et al., 2020). Each output is identified by py3langid (langid.py's
model, shipped in its wheel), its choice closed to the model's own languages, as a model can
only drift into one of those.
"""

from collections.abc import Iterable, Sequence
from functools import cache

from py3langid.langid import MODEL_FILE, LanguageIdentifier


@cache
def _identifier(languages: tuple[str, ...]) -> LanguageIdentifier:
    identifier = LanguageIdentifier.from_model_file(MODEL_FILE)
    known = set(identifier.nb_classes)
    unknown = sorted(set(languages) - known)
    if unknown:
        raise ValueError(
            f"language identification knows no {', '.join(unknown)}: give ISO 639-1 codes of "
            f"the {len(known)} it knows (e.g. de, en, fr, cs)"
        )
    identifier.set_languages(list(languages))
    return identifier


def identify(texts: Iterable[str], languages: Sequence[str]) -> list[str | None]:
    """The language of each text among `languages`; None for a text with no letters to read."""
    identifier = _identifier(tuple(sorted(set(languages))))
    return [identifier.classify(t)[0] if any(c.isalpha() for c in t) else None for t in texts]


def off_target_rate(texts: Sequence[str], target: str, languages: Sequence[str]) -> float:
    """The share of outputs with letters identified as a language other than `target`.

    Args:
        texts: one direction's outputs.
        target: the language they were asked in.
        languages: the languages to tell apart (the model's); `target` is one of them.
    """
    found = [lang for lang in identify(texts, [*languages, target]) if lang is not None]
    return sum(lang != target for lang in found) / len(found) if found else 0.0


def identifiable(languages: Sequence[str]) -> bool:
    """Whether language identification knows every one of `languages` (ISO 639-1 codes)."""
    try:
        _identifier(tuple(sorted(set(languages))))
    except ValueError:
        return False
    return True
