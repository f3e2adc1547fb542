"""`nmt-translate`: a checkpoint translates a file or stdin to stdout, one line per input line."""

import argparse
import logging
import sys
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from transformer_nmt.checkpoint import CheckpointError, load_checkpoint
from transformer_nmt.data.bitext import decode_lines, read_lines
from transformer_nmt.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, BPETokenizer
from transformer_nmt.model import Transformer, beam_search

log = logging.getLogger(__name__)


def encode_sources(
    tokenizer: BPETokenizer, sentences: list[str], max_positions: int
) -> torch.Tensor:
    """(B, S) source ids ending in EOS as in training, right-padded; cut to the position table."""
    return pad_sources(tokenizer.encode_batch(sentences), max_positions)


def pad_sources(ids: list[list[int]], max_positions: int) -> torch.Tensor:
    """(B, S) from token ids: cut to max_positions - 1, EOS appended, right-padded."""
    rows = [row[: max_positions - 1] + [EOS_ID] for row in ids]
    width = max(map(len, rows))
    return torch.tensor([row + [PAD_ID] * (width - len(row)) for row in rows])


def translate(
    model: Transformer,
    tokenizer: BPETokenizer,
    sentences: Iterable[str],
    batch_size: int = 64,
    beam_size: int = 4,
    alpha: float = 0.6,
    penalty: str = "gnmt",
    max_len_b: int = 50,
    n_best: int = 1,
) -> Iterator[list[tuple[str, float]]]:
    """Detokenized translations, in input order, batch_size consecutive sentences at a time.

    An empty (or blank) sentence translates to an empty one without running the model. A sentence
    longer than the model's position table is cut to fit, with a warning naming its line.

    Args:
        model: in eval mode, on the device to decode on.
        tokenizer: the model's.
        sentences: source text, one sentence each; read lazily, a batch at a time.
        batch_size: sentences decoded together.
        beam_size, alpha, penalty, max_len_b, n_best: as in `beam_search`.

    Yields:
        For each sentence, its n_best (translation, score) pairs, best first.
    """
    sentences = iter(sentences)
    device = next(model.parameters()).device
    limit = model.config["max_positions"] - 1  # source tokens that fit beside EOS
    first_line = 1
    while batch := [s.strip() for s in islice(sentences, batch_size)]:
        results = [[("", 0.0)] * n_best for _ in batch]
        todo = [i for i, sentence in enumerate(batch) if sentence]
        ids = tokenizer.encode_batch([batch[i] for i in todo])
        for i, row in zip(todo, ids, strict=True):
            if len(row) > limit:
                log.warning(
                    "line %d: %d tokens, more than the model's %d; translating the first %d",
                    first_line + i,
                    len(row),
                    limit,
                    limit,
                )
        if todo:
            src = pad_sources(ids, limit + 1).to(device)
            beams = beam_search(
                model, src, BOS_ID, EOS_ID, beam_size, alpha, max_len_b, penalty, n_best
            )
            for i, hypotheses in zip(todo, beams, strict=True):
                texts = tokenizer.decode_batch([h.tokens for h in hypotheses])
                results[i] = [(text, h.score) for text, h in zip(texts, hypotheses, strict=True)]
        yield from results
        first_line += len(batch)


def add_search_arguments(parser: argparse.ArgumentParser) -> None:
    """Decoding options shared by translate and evaluate; defaults are the paper's."""
    parser.add_argument("--beam-size", type=int, default=4, help="1 is greedy (default: 4)")
    parser.add_argument("--alpha", type=float, default=0.6, help="length penalty (default: 0.6)")
    parser.add_argument(
        "--penalty",
        choices=["gnmt", "fairseq"],
        default="gnmt",
        help="gnmt: log P / ((5 + |Y|) / 6)^alpha, the paper's; fairseq: log P / |Y|^alpha",
    )
    parser.add_argument(
        "--max-len-b", type=int, default=50, help="outputs stop at source length + this (50)"
    )
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per batch (64)")
    parser.add_argument(
        "--device",
        default="cuda" if torch.cuda.is_available() else "cpu",
        help="where the model decodes (default: cuda if available, else cpu)",
    )
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")


def parse_search_args(
    parser: argparse.ArgumentParser, argv: list[str] | None
) -> argparse.Namespace:
    """Parse a command line with the search arguments and apply the process-wide ones: the
    `--threads`, and warnings (a line cut or replaced) on stderr."""
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    logging.basicConfig(format="%(levelname)s: %(message)s", level=logging.WARNING)
    return args


def search_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of `translate` that `add_search_arguments` parsed."""
    keys = ("batch_size", "beam_size", "alpha", "penalty", "max_len_b")
    return {key: getattr(args, key) for key in keys}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("checkpoint", type=Path, help="a .ckpt from training or nmt-average")
    parser.add_argument("input", nargs="?", type=Path, help="text or .gz file (default: stdin)")
    parser.add_argument(
        "--n-best", type=int, default=1, help="if above 1, print 'line<TAB>score<TAB>text' lines"
    )
    add_search_arguments(parser)
    args = parse_search_args(parser, argv)
    try:
        model, tokenizer = load_checkpoint(args.checkpoint)
        if args.input is None:
            # Bytes, not text: invalid UTF-8 is replaced per line, and only "\n" ends a line.
            lines, progress = decode_lines(sys.stdin.buffer, "stdin", replace_invalid=True), None
        else:
            lines = read_lines(args.input, replace_invalid=True)
            progress = tqdm(total=len(lines), unit="sent", file=sys.stderr)
    except (CheckpointError, OSError) as e:
        sys.exit(f"error: {e}")
    model.to(args.device)
    outputs = translate(model, tokenizer, lines, n_best=args.n_best, **search_options(args))
    for i, hypotheses in enumerate(outputs):
        if args.n_best == 1:
            print(hypotheses[0][0], flush=True)  # flushed: stdin may be a person typing
        else:
            for text, score in hypotheses:
                print(f"{i}\t{score:.4f}\t{text}", flush=True)
        if progress is not None:
            progress.update()


if __name__ == "__main__":
    main()
