"""`--align`, `--align-layer` and `--align-heads`, shared by nmt-translate and nmt-score."""

import argparse
import sys

from transformer_nmt.cli.search_args import positive_int
from transformer_nmt.decoding.forced import attention_layers
from transformer_nmt.inference.alignment import HEADS, Alignment
from transformer_nmt.model import EncoderDecoder


def add_alignment_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--align",
        action="store_true",
        help="also print Pharaoh word alignments ('0-0 1-2 ...', source-target) from the "
        "encoder-decoder attention, after a TAB",
    )
    parser.add_argument(
        "--align-layer",
        type=positive_int,
        metavar="L",
        help="the decoder layer aligning, 1 to the decoder's layers (default: the last)",
    )
    parser.add_argument(
        "--align-heads",
        choices=HEADS,
        default="mean",
        help="mean: the heads averaged; best: the most peaked head (default: mean)",
    )


def check_alignment_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse, before loading, alignments that cannot be made."""
    if args.align_layer is not None and not args.align:
        parser.error("--align-layer chooses the attention of --align: add --align")
    if args.align and args.ensemble:
        parser.error("--align reads one model's attention: leave out --ensemble")


def alignment(args: argparse.Namespace) -> Alignment | None:
    """The `Alignment` the options ask for, or None."""
    if not args.align:
        return None
    return Alignment(-1 if args.align_layer is None else args.align_layer, args.align_heads)


def check_alignment_layer(model: EncoderDecoder, args: argparse.Namespace) -> None:
    """Refuse, once the model is loaded and before decoding, a layer its decoder lacks."""
    if args.align and args.align_layer is not None:
        layers = attention_layers(model)
        if args.align_layer > layers:
            sys.exit(
                f"error: --align-layer {args.align_layer}: the decoder has {layers} layers; "
                f"choose 1 to {layers} (default: the last)"
            )
