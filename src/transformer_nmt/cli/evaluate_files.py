"""What `nmt-evaluate` reads and reports in every mode: pair files, ensembles, paths."""

import argparse
from pathlib import Path
from typing import Any

from transformer_nmt.data.bitext import read_lines
from transformer_nmt.data.corpus import DataError


def read_pair_files(src: Path, ref: Path) -> tuple[list[str], list[str]]:
    """Sources and references of two line-aligned files."""
    # Invalid UTF-8 is an error here, not replaced: it would change the score silently.
    sources = [line.strip() for line in read_lines(src)]
    references = [line.strip() for line in read_lines(ref)]
    if len(sources) != len(references):
        raise DataError(f"{src} has {len(sources)} lines but {ref} has {len(references)}")
    return sources, references


def ensemble_report(args: argparse.Namespace) -> dict[str, Any]:
    """The report's further ensemble members and weights, when there are any."""
    if not args.ensemble:
        return {}
    return {"ensemble": [str(p) for p in args.ensemble], "weights": args.weights}


def path_text(path: Path | None) -> str | None:
    """A report's path, as text, or None."""
    return None if path is None else str(path)
