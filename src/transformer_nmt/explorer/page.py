"""The explorer page: its script, style and data inlined into one HTML file."""

import html
import json
import re
from importlib.resources import files
from pathlib import Path
from typing import Any

from transformer_nmt.runtime.atomic import write_atomically

ASSETS = files("transformer_nmt.explorer")


def explorer_html(validations: list[dict[str, Any]], title: str) -> str:
    """The page for one or more validations, each {"step": int | None, "sentences": [...]}.

    Sentences are `explore_sentence`'s; several validations of the same sentences get a slider.
    """
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
