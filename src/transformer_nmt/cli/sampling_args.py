"""`nmt-translate`'s sampling, prefix and constraint options: --sample N, --temperature,
--top-k, --top-p, --seed, --prefix FILE or --prefix-column, --constraints FILE."""

import argparse
from collections.abc import Iterable, Iterator
from itertools import tee
from pathlib import Path

from transformer_nmt.cli.search_args import (
    non_negative_int,
    positive_float,
    positive_int,
    probability,
)
from transformer_nmt.data.bitext import read_lines
from transformer_nmt.data.corpus import DataError
from transformer_nmt.decoding.sampling import Sampling

SHAPING = ("temperature", "top_k", "top_p", "seed")  # what means nothing without --sample


def add_sampling_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("sampling (instead of beam search)")
    group.add_argument(
        "--sample",
        type=positive_int,
        metavar="N",
        help="draw N translations a sentence from the model (back-translation, diversity), "
        "printed as 'line<TAB>score<TAB>text' when N > 1; reproducible for a --seed whatever "
        "the batches (N >= 1; default: beam search)",
    )
    group.add_argument(
        "--temperature",
        type=positive_float,
        metavar="T",
        help="T > 0; > 1 flattens, < 1 sharpens (default: 1)",
    )
    group.add_argument(
        "--top-k",
        type=positive_int,
        metavar="K",
        help="draw among the K most likely ids, K >= 1 (default: all)",
    )
    group.add_argument(
        "--top-p",
        type=probability,
        metavar="P",
        help="draw among the fewest ids whose mass reaches P, P in (0, 1] (default: 1, all)",
    )
    group.add_argument("--seed", type=non_negative_int, help="an integer >= 0 (default: 0)")
    prefix = parser.add_mutually_exclusive_group()
    prefix.add_argument(
        "--prefix",
        type=Path,
        metavar="FILE",
        help="one prefix a line (.gz allowed; a blank line: none): each translation starts with "
        "its line's prefix, forced before the search goes on",
    )
    prefix.add_argument(
        "--prefix-column",
        action="store_true",
        help="the input's lines are 'source<TAB>prefix' (nothing after the tab: no prefix), "
        "each translation starting with its prefix; a line without exactly one tab is refused",
    )
    parser.add_argument(
        "--constraints",
        type=Path,
        metavar="FILE",
        help="'LINE<TAB>phrase[<TAB>phrase...]' lines (LINE from 1): terminology each of those "
        "lines' translations must contain, by beam search with dynamic beam allocation (Post "
        "and Vilar, 2018); one that cannot be met within the length limit is reported by line",
    )


def check_sampling_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse, before loading, options that cannot work together."""
    given = [f"--{name.replace('_', '-')}" for name in SHAPING if getattr(args, name) is not None]
    if given and args.sample is None:
        parser.error(f"{' '.join(given)} shape sampling: add --sample N")
    if args.sample is not None and args.n_best > 1:
        parser.error("--n-best is beam search's: --sample N prints N samples a sentence")
    flags = (
        ("--sample", args.sample is not None),
        ("--prefix", args.prefix is not None),
        ("--prefix-column", args.prefix_column),
        ("--constraints", args.constraints is not None),
    )
    for flag, given in flags:
        if given and args.engine != "torch":
            parser.error(f"{flag} decodes with --engine torch, not {args.engine}")
    prefixed = args.prefix is not None or args.prefix_column
    if args.constraints is not None and (args.sample is not None or prefixed):
        parser.error("--constraints steer beam search: not with --sample or a prefix")


def sampling(args: argparse.Namespace) -> Sampling | None:
    """The `Sampling` the options ask for, or None for beam search."""
    if args.sample is None:
        return None
    shaping = {name: getattr(args, name) for name in SHAPING if getattr(args, name) is not None}
    return Sampling(n=args.sample, **shaping)


def split_prefix_column(lines: Iterable[str], where: str) -> tuple[Iterator[str], Iterator[str]]:
    """The sources and the prefixes of 'source<TAB>prefix' lines, lazily, in step; a line
    without exactly one tab is refused, naming `where` and the line."""
    rows = (_source_and_prefix(line, where, number) for number, line in enumerate(lines, 1))
    sources, prefixes = tee(rows)
    return (source for source, _ in sources), (prefix for _, prefix in prefixes)


def _source_and_prefix(line: str, where: str, number: int) -> tuple[str, str]:
    fields = line.rstrip("\n").split("\t")
    if len(fields) != 2:
        raise DataError(
            f"{where}, line {number}: {len(fields)} tab-separated column(s), not "
            "'source<TAB>prefix' as --prefix-column reads (nothing after the tab: no prefix)"
        )
    return fields[0], fields[1]


def read_constraints(path: Path, lines: int | None) -> dict[int, list[str]]:
    """Line number (from 1) -> its phrases; a line number past `lines` (when known) or not a
    number is refused, naming the line of `path`."""
    by_line: dict[int, list[str]] = {}
    for number, row in enumerate(read_lines(path), start=1):
        fields = row.rstrip("\n").split("\t")
        if not fields[0].strip().isdigit() or int(fields[0]) < 1:
            raise DataError(
                f"{path}, line {number}: starts with {fields[0]!r}, not the number (from 1) of "
                "the input line its phrases constrain"
            )
        line = int(fields[0])
        if lines is not None and line > lines:
            raise DataError(
                f"{path}, line {number}: constrains input line {line}, but the input has {lines}"
            )
        by_line.setdefault(line, []).extend(phrase for phrase in fields[1:] if phrase.strip())
    return by_line
