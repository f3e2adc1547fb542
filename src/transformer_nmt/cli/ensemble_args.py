"""`--ensemble` and `--weights`, shared by the commands that decode or score with checkpoints."""

import argparse
from pathlib import Path

from transformer_nmt.cli.search_args import engine_options, positive_float
from transformer_nmt.inference.translator import Translator


def add_ensemble_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--ensemble",
        nargs="+",
        type=Path,
        default=[],
        metavar="CKPT",
        help="more checkpoints decoding with the first as one model, their log-probabilities "
        "averaged; all share the first's vocabulary (an ensemble runs on --engine torch; "
        "default: none)",
    )
    parser.add_argument(
        "--weights",
        nargs="+",
        type=positive_float,
        metavar="W",
        help="one weight per ensemble member, each > 0, the first checkpoint first (default: "
        "equal)",
    )


def check_ensemble_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse, before loading, what an ensemble cannot do."""
    members = 1 + len(args.ensemble)
    if args.weights is not None and len(args.weights) != members:
        parser.error(
            f"--weights: {len(args.weights)} given for {members} ensemble members (the first "
            "checkpoint and each of --ensemble): give one each"
        )
    if args.ensemble and getattr(args, "engine", "torch") != "torch":
        parser.error("--ensemble decodes with --engine torch: CTranslate2 runs one model")


def load(first: list[Path], args: argparse.Namespace) -> Translator:
    """The translator of the checkpoint (or average) `first`, in an ensemble with --ensemble."""
    options = engine_options(args)
    if not args.ensemble:
        return Translator.from_checkpoint(first, args.device, **options)
    members = [first, *[[path] for path in args.ensemble]]
    del options["engine"], options["vmap_from"]
    return Translator.from_ensemble(members, args.weights, args.device, **options)
