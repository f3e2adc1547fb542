"""`nmt-translate`'s sampling, MBR, prefix and constraint options: --sample N, --mbr N,
--temperature, --top-k, --top-p, --epsilon, --seed, --prefix FILE or --prefix-column,
--constraints FILE."""

import argparse
from collections.abc import Iterable, Iterator
from itertools import tee
from pathlib import Path

from transformer_nmt.cli.search_args import (
    at_least,
    non_negative_int,
    positive_float,
    positive_int,
    probability,
)
from transformer_nmt.data.bitext import read_lines
from transformer_nmt.data.corpus import DataError
from transformer_nmt.decoding.mbr import CANDIDATES, MBR
from transformer_nmt.decoding.sampling import Sampling
from transformer_nmt.evaluation.utility import UTILITIES

# What means nothing without --sample or --mbr.
SHAPING = ("temperature", "top_k", "top_p", "epsilon", "seed")


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
    group.add_argument(
        "--epsilon",
        type=epsilon,
        metavar="E",
        help="draw among the ids of probability >= E only, E in [0, 1) (epsilon sampling, "
        "e.g. 0.02 for MBR's candidates; default: 0, all)",
    )
    group.add_argument("--seed", type=non_negative_int, help="an integer >= 0 (default: 0)")
    mbr = parser.add_argument_group("minimum Bayes risk decoding")
    mbr.add_argument(
        "--mbr",
        type=samples_to_compare,
        metavar="N",
        help="MBR decoding: N samples a sentence (shaped by --temperature, --top-k, --top-p, "
        "--epsilon, seeded by --seed) are the pseudo-references; the candidate of the highest "
        "mean utility against them is printed (with --n-best K, the K best by it as "
        "'line<TAB>score<TAB>text', the score its log-probability as nmt-score gives it); "
        "N >= 2 (default: no MBR)",
    )
    mbr.add_argument(
        "--mbr-candidates",
        choices=CANDIDATES,
        help="the N samples, the beam's --beam-size n-best, or both (default: sample)",
    )
    mbr.add_argument(
        "--mbr-utility", choices=UTILITIES, help="sentence chrF, chrF++ or BLEU (default: chrf)"
    )
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
    if given and args.sample is None and args.mbr is None:
        parser.error(f"{' '.join(given)} shape sampling: add --sample N or --mbr N")
    if args.sample is not None and args.n_best > 1:
        parser.error("--n-best is beam search's: --sample N prints N samples a sentence")
    check_mbr_args(parser, args)
    flags = (
        ("--sample", args.sample is not None),
        ("--mbr", args.mbr is not None),
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


def check_mbr_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse, before loading, MBR options that cannot work."""
    chosen = [
        f"--{name.replace('_', '-')}"
        for name in ("mbr_candidates", "mbr_utility")
        if getattr(args, name) is not None
    ]
    if chosen and args.mbr is None:
        parser.error(f"{' '.join(chosen)} choose how MBR decodes: add --mbr N")
    if args.mbr is None:
        return
    if args.sample is not None:
        parser.error("--mbr samples its own pseudo-references: leave out --sample")
    if args.n_best > args.mbr:
        parser.error(f"--n-best {args.n_best} exceeds --mbr {args.mbr}: raise N or lower --n-best")
    if args.constraints is not None:
        parser.error("--constraints steer beam search: not with --mbr")


def sampling(args: argparse.Namespace) -> Sampling | None:
    """The `Sampling` the options ask for, or None for beam search (and MBR)."""
    if args.sample is None:
        return None
    return Sampling(n=args.sample, **_shaping(args))


def mbr(args: argparse.Namespace) -> MBR | None:
    """The `MBR` the options ask for, or None."""
    if args.mbr is None:
        return None
    chosen = {"candidates": args.mbr_candidates, "utility": args.mbr_utility}
    chosen = {name: value for name, value in chosen.items() if value is not None}
    return MBR(Sampling(n=args.mbr, **_shaping(args)), **chosen)


def _shaping(args: argparse.Namespace) -> dict:
    return {name: getattr(args, name) for name in SHAPING if getattr(args, name) is not None}


def samples_to_compare(text: str) -> int:
    """argparse type: MBR's samples a sentence, an integer >= 2 (one has nothing to compare)."""
    return at_least(text, 2)


def epsilon(text: str) -> float:
    """argparse type: a number in [0, 1)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1), got {text!r}")
    return value


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
