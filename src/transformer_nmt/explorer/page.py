"""The explorer page: its script, style and data inlined into one HTML file."""

import html
import json
import re
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np

from transformer_nmt.explorer.sentence import CODING, decode_weights, encode_weights
from transformer_nmt.runtime.atomic import write_atomically

ASSETS = files("transformer_nmt.explorer")
# The run page's slider: at most RUN_VALIDATIONS validations (the first, the last and evenly
# spaced between) of at most RUN_SENTENCES sentences each, so that its size is bounded by
# RUN_VALIDATIONS * RUN_SENTENCES sentences however long the run.
RUN_VALIDATIONS = 12
RUN_SENTENCES = 4
WEIGHTS = ("encoder_self", "decoder_self", "decoder_src")


def explorer_html(validations: list[dict[str, Any]], title: str) -> str:
    """The page for one or more validations, each {"step": int | None, "sentences": [...]}.

    Sentences are `explore_sentence`'s; several validations get a slider.
    """
    validations = [_current_coding(v) for v in validations]
    data = json.dumps(
        {"title": title, "validations": validations}, separators=(",", ":"), allow_nan=False
    )
    # "</" inside the JSON would end its <script> element early.
    data = data.replace("</", "<\\/")
    parts = {
        "STYLE": (ASSETS / "explorer.css").read_text(encoding="utf-8"),
        "SCRIPT": (ASSETS / "explorer.js").read_text(encoding="utf-8"),
        "TITLE": html.escape(title),
        "DATA": data,
    }
    page = (ASSETS / "page.html").read_text(encoding="utf-8")
    # One pass: what is inserted is never searched for placeholders itself.
    return re.sub(r"/\*(STYLE|SCRIPT|TITLE|DATA)\*/", lambda m: parts[m[1]], page)


def write_page(path: str | Path, validations: list[dict[str, Any]], title: str) -> Path:
    """Write `explorer_html` to `path`, whole or not at all."""
    write_atomically(path, explorer_html(validations, title))
    return Path(path)


def run_validations(
    validations: list[dict[str, Any]],
    max_validations: int = RUN_VALIDATIONS,
    max_sentences: int = RUN_SENTENCES,
) -> list[dict[str, Any]]:
    """The validations a run's slider page keeps: the first and last and evenly spaced ones
    between, `max_validations` at most, each with its first `max_sentences` sentences."""
    if len(validations) > max_validations:
        picked = np.linspace(0, len(validations) - 1, max_validations).round().astype(int)
        validations = [validations[i] for i in sorted(set(picked.tolist()))]
    return [{**v, "sentences": v["sentences"][:max_sentences]} for v in validations]


def _current_coding(validation: dict[str, Any]) -> dict[str, Any]:
    """The validation with every weight in the page's coding: an older run's are re-encoded."""
    if all(
        _encoded(s, r, kind).get("coding") == CODING
        for s in validation["sentences"]
        for r in s["readings"]
        for kind in WEIGHTS
    ):
        return validation

    def recoded(encoded: dict[str, Any]) -> dict[str, Any]:
        return encode_weights(decode_weights(encoded)) if encoded["data"] else encode_weights([])

    sentences = [
        {
            **s,
            "encoder_self": recoded(s["encoder_self"]),
            "readings": [
                {**r, **{kind: recoded(r[kind]) for kind in WEIGHTS[1:]}} for r in s["readings"]
            ],
        }
        for s in validation["sentences"]
    ]
    return {**validation, "sentences": sentences}


def _encoded(sentence: dict[str, Any], reading: dict[str, Any], kind: str) -> dict[str, Any]:
    return sentence[kind] if kind == "encoder_self" else reading[kind]
