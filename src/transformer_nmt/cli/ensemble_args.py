"""`--ensemble` and `--weights`, shared by the commands that decode or score with checkpoints."""

import argparse
import zipfile
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
    """Refuse, before loading, what an ensemble cannot do; hand back an input --ensemble took."""
    take_input_back(args)
    members = 1 + len(args.ensemble)
    if args.weights is not None and len(args.weights) != members:
        parser.error(
            f"--weights: {len(args.weights)} given for {members} ensemble members (the first "
            "checkpoint and each of --ensemble): give one each"
        )
    if args.ensemble and getattr(args, "engine", "torch") != "torch":
        parser.error("--ensemble decodes with --engine torch: CTranslate2 runs one model")


def take_input_back(args: argparse.Namespace) -> None:
    """`A --ensemble B in.de`: --ensemble takes every path after it, so the input comes last.

    A checkpoint is a folder or a zip archive (torch.save's format); a last path that is a file of
    anything else is the command's input, where it takes one and none was given.
    """
    if not args.ensemble or getattr(args, "input", "no input") is not None:
        return
    last = args.ensemble[-1]
    if last.is_file() and not zipfile.is_zipfile(last):
        args.ensemble, args.input = args.ensemble[:-1], last


def load(first: list[Path], args: argparse.Namespace) -> Translator:
    """The translator of the checkpoint (or average) `first`, in an ensemble with --ensemble."""
    options = engine_options(args)
    if not args.ensemble:
        return Translator.from_checkpoint(first, args.device, **options)
    members = [first, *[[path] for path in args.ensemble]]
    del options["engine"], options["vmap_from"]
    return Translator.from_ensemble(members, args.weights, args.device, **options)
