"""`nmt-translate`: a checkpoint translates a file or stdin to stdout, one line per input line."""

import argparse
import logging
import sys
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path

from tqdm import tqdm

from transformer_nmt.cli.search_args import (
    add_search_arguments,
    parse_search_args,
    positive_int,
    search_options,
)
from transformer_nmt.data.bitext import decode_lines, read_lines
from transformer_nmt.data.corpus import DataError
from transformer_nmt.data.framing import ADDED_TOKENS, TARGET_FRAME, source_batch
from transformer_nmt.data.tokenizer import BPETokenizer
from transformer_nmt.model import EncoderDecoder, beam_search
from transformer_nmt.training.checkpoint import (
    CheckpointError,
    load_translator,
    resolve_checkpoints,
)

log = logging.getLogger(__name__)


def translate(
    model: EncoderDecoder,
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
    if batch_size < 1:  # islice would take nothing: every sentence lost without a word
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    sentences = iter(sentences)
    device = next(model.parameters()).device
    limit = model.config.max_positions - ADDED_TOKENS  # source tokens that fit beside EOS
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
            src = source_batch(ids, model.config.max_positions).to(device)
            beams = beam_search(
                model,
                src,
                **TARGET_FRAME,
                beam_size=beam_size,
                alpha=alpha,
                max_len_b=max_len_b,
                penalty=penalty,
                n_best=n_best,
            )
            for i, hypotheses in zip(todo, beams, strict=True):
                texts = tokenizer.decode_batch([h.tokens for h in hypotheses])
                results[i] = [(text, h.score) for text, h in zip(texts, hypotheses, strict=True)]
        yield from results
        first_line += len(batch)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "checkpoint", help="a .ckpt from training or nmt-average, or a folder with --average-last"
    )
    parser.add_argument("input", nargs="?", type=Path, help="text or .gz file (default: stdin)")
    parser.add_argument(
        "--average-last",
        type=positive_int,
        metavar="N",
        help="translate with the average of the folder's last N checkpoints",
    )
    parser.add_argument(
        "--n-best",
        type=positive_int,
        default=1,
        help="if above 1, print 'line<TAB>score<TAB>text' lines (at most --beam-size)",
    )
    add_search_arguments(parser)
    args = parse_search_args(parser, argv)
    if args.n_best > args.beam_size:
        parser.error(
            f"--n-best {args.n_best} exceeds --beam-size {args.beam_size}: the beam holds only "
            "beam-size hypotheses; raise --beam-size or lower --n-best"
        )
    try:
        paths = resolve_checkpoints([args.checkpoint], args.average_last)
        model, tokenizer = load_translator(paths)
        if args.input is None:
            # Bytes, not text: invalid UTF-8 is replaced per line, and only "\n" ends a line.
            lines, progress = decode_lines(sys.stdin.buffer, "stdin", replace_invalid=True), None
        else:
            lines = read_lines(args.input, replace_invalid=True)
            progress = tqdm(total=len(lines), unit="sent", file=sys.stderr)
    except (CheckpointError, DataError, OSError) as e:
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
