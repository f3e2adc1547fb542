"""`--shards N`, shared by nmt-translate and nmt-score: one input decoded by N processes."""

import argparse
import logging
import sys
from pathlib import Path

import torch
from tqdm import tqdm

from transformer_nmt.cli import ensemble_args
from transformer_nmt.cli.search_args import positive_int
from transformer_nmt.data.progress import LoggedProgress, on_terminal
from transformer_nmt.inference.translator import Translator


def add_shard_argument(parser: argparse.ArgumentParser, verb: str) -> None:
    parser.add_argument(
        "--shards",
        type=positive_int,
        metavar="N",
        help=f"{verb} in N processes, each a share of the input (one a GPU with --device "
        "cuda, else N CPU processes of --threads each): output in input order, byte for byte "
        "one process's with the same --threads; progress logged off a terminal (N >= 1; default: "
        "one process)",
    )


def shard_devices(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str] | None:
    """The device of each --shards process: a GPU each with --device cuda, else the CPU."""
    if args.shards is None:
        return None
    if args.engine != "torch":
        parser.error("--shards runs our search in each process: add --engine torch")
    if torch.device(args.device).type != "cuda":
        return [args.device] * args.shards
    if args.shards > torch.cuda.device_count():
        parser.error(f"--shards {args.shards}: only {torch.cuda.device_count()} CUDA GPU(s) here")
    return [f"cuda:{i}" for i in range(args.shards)]


def shard_translator(first: list[Path], args: argparse.Namespace, device: str) -> Translator:
    """A shard's translator: the command's model on the shard's device."""
    return ensemble_args.load(first, argparse.Namespace(**{**vars(args), "device": device}))


def logged_progress(**kwargs) -> "tqdm | LoggedProgress":
    """A bar on a terminal; off one (a cluster job's log), a line every 30 seconds."""
    if on_terminal():
        return tqdm(file=sys.stderr, **kwargs)
    logging.getLogger("transformer_nmt.data.progress").setLevel(logging.INFO)
    return LoggedProgress(**kwargs)
