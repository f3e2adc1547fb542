"""Decoding options shared by `nmt-translate` and `nmt-evaluate`; the defaults are the paper's."""

import argparse
import logging
import math
from pathlib import Path
from typing import Any

import torch


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    return at_least(text, 1)


def non_negative_int(text: str) -> int:
    """An argparse type: an integer >= 0."""
    return at_least(text, 0)


def at_least(text: str, minimum: int) -> int:
    """An argparse type's check: an integer >= minimum."""
    try:
        if (value := int(text)) >= minimum:
            return value
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {text!r}")


def finite_float(text: str) -> float:
    """An argparse type: a number other than nan and ±inf."""
    try:
        if math.isfinite(value := float(text)):
            return value
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")


def positive_float(text: str) -> float:
    """An argparse type: a finite number > 0."""
    try:
        if math.isfinite(value := float(text)) and value > 0:
            return value
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")


def probability(text: str) -> float:
    """An argparse type: a number in (0, 1]."""
    try:
        if 0 < (value := float(text)) <= 1:
            return value
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"must be a number in (0, 1], got {text!r}")


# --dtype's names; None (no --dtype) keeps the checkpoint's float32.
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# --dtype's mixed precisions: float32 weights, matmuls in this dtype under torch.autocast.
AUTOCAST = {"bf16-mixed": torch.bfloat16}


def add_device_arguments(parser: argparse.ArgumentParser, mixed: bool = False) -> None:
    """`--device` and `--dtype`, where and in what precision the model runs; `mixed` offers
    the autocast precisions too (decoding: `Translator`'s autocast)."""
    parser.add_argument(
        "--device",
        default="cuda" if torch.cuda.is_available() else "cpu",
        help="where the model runs: cpu, cuda or cuda:N (default: cuda if available, else cpu)",
    )
    parser.add_argument(
        "--dtype",
        choices=[*DTYPES, *(AUTOCAST if mixed else ())],
        help="the weights' type: bfloat16 or float16 halve memory and speed up GPUs with tensor "
        "cores"
        + (
            "; bf16-mixed keeps float32 weights and runs the matmuls in bfloat16 (autocast), "
            "as training's bf16-mixed validates"
            if mixed
            else ""
        )
        + " (default: the checkpoint's float32)",
    )


def torch_dtype(args: argparse.Namespace) -> torch.dtype | None:
    """The weights' torch dtype `--dtype` names, or None to keep the checkpoint's."""
    return DTYPES.get(args.dtype)


def check_device(parser: argparse.ArgumentParser, device: str) -> None:
    """Refuse, through `parser.error`, a --device torch cannot name or this machine lacks."""
    try:
        where = torch.device(device)
    except RuntimeError:
        parser.error(f"--device {device}: not a device name; use cpu, cuda or cuda:N")
    if where.type == "cuda" and not torch.cuda.is_available():
        parser.error(f"--device {device}: this machine has no CUDA GPU torch can use; --device cpu")
    if where.type == "cuda" and (where.index or 0) >= torch.cuda.device_count():
        parser.error(f"--device {device}: only {torch.cuda.device_count()} CUDA GPU(s) here")


def add_search_arguments(parser: argparse.ArgumentParser, grid: bool = False) -> None:
    """Decoding options shared by translate and evaluate; defaults are the paper's.

    grid: --beam-size and --alpha take several values (lists, also when one is given), every
    combination to be decoded (nmt-evaluate).
    """
    several = {"nargs": "+", "metavar": "N"} if grid else {}
    parser.add_argument(
        "--beam-size",
        type=positive_int,
        default=[4] if grid else 4,
        help="hypotheses kept, an integer >= 1; 1 is greedy (default: 4)"
        + ("; several: each is decoded" if grid else ""),
        **several,
    )
    parser.add_argument(
        "--alpha",
        type=finite_float,
        default=[0.6] if grid else 0.6,
        help="length penalty exponent, a finite number; 0 ranks by log P alone (default: 0.6)"
        + ("; several: each is decoded" if grid else ""),
        **several | ({"metavar": "A"} if grid else {}),
    )
    parser.add_argument(
        "--penalty",
        choices=["gnmt", "fairseq"],
        default="gnmt",
        help="gnmt: log P / ((5 + |Y|) / 6)^alpha, the paper's; fairseq: log P / |Y|^alpha "
        "(default: gnmt)",
    )
    parser.add_argument(
        "--max-len-b",
        type=non_negative_int,
        default=50,
        help="outputs stop at source length + this many tokens, an integer >= 0 (default: 50)",
    )
    batching = parser.add_mutually_exclusive_group()
    batching.add_argument(
        "--batch-size",
        type=positive_int,
        default=64,
        help="sentences per batch, an integer >= 1 (default: 64)",
    )
    batching.add_argument(
        "--max-tokens",
        type=positive_int,
        metavar="N",
        help="batches of up to N source tokens (padding included) instead of --batch-size "
        "sentences, sorted by length, output in input order: large batches for GPUs; a longer "
        "sentence goes alone in its batch (N >= 1; default: --batch-size sentences)",
    )
    add_device_arguments(parser, mixed=True)
    parser.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help="torch CPU threads, an integer >= 1 (default: torch's, one per core)",
    )
    parser.add_argument(
        "--workers",
        type=positive_int,
        default=1,
        metavar="N",
        help="with --engine torch on a CPU: decode N batches side by side, each on one core "
        "(one torch thread), as --engine ct2 always does with one per --threads; often faster "
        "than one batch split over the cores for small models; output as with --threads 1 "
        "(N >= 1; default: 1, one batch at a time on --threads)",
    )
    parser.add_argument(
        "--engine",
        choices=["torch", "ct2"],
        default="torch",
        help="torch: our search; ct2: CTranslate2 on the model converted in memory, several "
        "times faster on CPUs (default: torch)",
    )
    parser.add_argument(
        "--quantization",
        choices=["float32", "int8", "int8_float32"],
        help="with --engine torch, int8 runs the linear layers in dynamic int8 on the CPU; with "
        "--engine ct2, CTranslate2's weight type, int8 the fastest (default: float32)",
    )
    parser.add_argument(
        "--vmap-from",
        type=Path,
        metavar="FILE",
        help="with --engine ct2: score only the tokens of FILE, the target side of the training "
        "data (.gz allowed), through CTranslate2's vocabulary map: faster; the softmax then "
        "runs over those tokens alone, so scores and some translations change a little",
    )


def parse_search_args(
    parser: argparse.ArgumentParser, argv: list[str] | None, intermixed: bool = False
) -> argparse.Namespace:
    """Parse a command line with the search arguments and apply the process-wide ones: the
    `--threads`, and warnings (a line cut or replaced) on stderr. `intermixed`: positionals may
    also follow options (`nmt-evaluate CKPT --data wmt14_en_de data.src_lang=de`)."""
    args = parser.parse_intermixed_args(argv) if intermixed else parser.parse_args(argv)
    if args.engine == "torch" and args.quantization not in (None, "int8"):
        parser.error(f"--quantization {args.quantization} is CTranslate2's: add --engine ct2")
    if args.vmap_from is not None and args.engine != "ct2":
        parser.error("--vmap-from restricts CTranslate2's search: add --engine ct2")
    if args.dtype is not None and args.engine == "ct2":
        parser.error("--dtype is the torch engine's: CTranslate2 takes --quantization")
    if args.dtype is not None and args.quantization is not None:
        parser.error("--quantization int8 computes in float32: leave out --dtype")
    check_device(parser, args.device)
    if args.workers > 1 and (args.engine != "torch" or torch.device(args.device).type != "cpu"):
        parser.error(
            "--workers is --engine torch's on a CPU: --engine ct2 runs one per --threads, and a "
            "GPU decodes one batch at a time"
        )
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    logging.basicConfig(format="%(levelname)s: %(message)s", level=logging.WARNING)
    return args


def search_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of `translate` that `add_search_arguments` parsed."""
    keys = ("batch_size", "max_tokens", "beam_size", "alpha", "penalty", "max_len_b")
    return {key: getattr(args, key) for key in keys}


def engine_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of `Translator.from_checkpoint` that choose the engine."""
    return {
        "engine": args.engine,
        "quantization": args.quantization,
        "dtype": torch_dtype(args),
        "autocast": AUTOCAST.get(args.dtype),
        "vmap_from": args.vmap_from,
        "workers": args.workers,
    }
