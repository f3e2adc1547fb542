"""What the frontier's timing scripts (profile, pair, ab) share: one checkpoint translating one
source file with the frontier's search, as `experiments/export/benchmark.py` runs it."""

import argparse
from pathlib import Path


def parser(doc: str, beam_size: int) -> argparse.ArgumentParser:
    """A script's parser, holding the arguments every timing script takes."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--src", type=Path, required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--beam-size", type=int, default=beam_size)
    parser.add_argument("--batch-size", type=int, default=64)
    return parser


def search(args: argparse.Namespace) -> dict:
    """`Translator.translate`'s options: the beam, a length penalty of log P / |Y|^1.0 for every
    engine, outputs of at most source + 50 tokens, the batch size."""
    return dict(
        beam_size=args.beam_size, alpha=1.0, penalty="fairseq", max_len_b=50,
        batch_size=args.batch_size,
    )  # fmt: skip
