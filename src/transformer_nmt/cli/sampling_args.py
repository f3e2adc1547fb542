"""`nmt-translate`'s sampling and prefix options: --sample N, --temperature, --top-k, --top-p,
--seed, --prefix FILE."""

import argparse
from pathlib import Path

from transformer_nmt.cli.search_args import (
    non_negative_int,
    positive_float,
    positive_int,
    probability,
)
from transformer_nmt.model.sampling import Sampling

SHAPING = ("temperature", "top_k", "top_p", "seed")  # what means nothing without --sample


def add_sampling_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("sampling (instead of beam search)")
    group.add_argument(
        "--sample",
        type=positive_int,
        metavar="N",
        help="draw N translations a sentence from the model (back-translation, diversity), "
        "printed as 'line<TAB>score<TAB>text' when N > 1; reproducible for a --seed whatever "
        "the batches",
    )
    group.add_argument("--temperature", type=positive_float, help="> 1 flattens (default: 1)")
    group.add_argument("--top-k", type=positive_int, help="draw among the K most likely ids")
    group.add_argument(
        "--top-p", type=probability, help="draw among the fewest ids whose mass reaches P"
    )
    group.add_argument("--seed", type=non_negative_int, help="default: 0")
    parser.add_argument(
        "--prefix",
        type=Path,
        metavar="FILE",
        help="one prefix a line (.gz allowed; a blank line: none): each translation starts with "
        "its line's prefix, forced before the search goes on",
    )


def check_sampling_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse, before loading, options that cannot work together."""
    given = [f"--{name.replace('_', '-')}" for name in SHAPING if getattr(args, name) is not None]
    if given and args.sample is None:
        parser.error(f"{' '.join(given)} shape sampling: add --sample N")
    if args.sample is not None and args.n_best > 1:
        parser.error("--n-best is beam search's: --sample N prints N samples a sentence")
    for flag, value in (("--sample", args.sample), ("--prefix", args.prefix)):
        if value is not None and args.engine != "torch":
            parser.error(f"{flag} decodes with --engine torch, not {args.engine}")


def sampling(args: argparse.Namespace) -> Sampling | None:
    """The `Sampling` the options ask for, or None for beam search."""
    if args.sample is None:
        return None
    shaping = {name: getattr(args, name) for name in SHAPING if getattr(args, name) is not None}
    return Sampling(n=args.sample, **shaping)
