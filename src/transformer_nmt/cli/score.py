"""`nmt-score`: a checkpoint's log-probabilities of given translations (forced decoding).

One output line per pair: score<TAB>mean. The score is log P(target + EOS | source), the sum of
its tokens' log-probabilities, what nmt-translate prints for the same hypothesis; the mean is that
per token (EOS included). Then with --per-token each token's log-probability (space-separated),
with --align the Pharaoh alignment.
An n-best list (`nmt-translate --n-best` or `--sample` lines, 'line<TAB>score<TAB>text') keeps
its columns and gains these, so that several models' scores accumulate for `nmt-rescore`.

    nmt-score CKPT --src test.de --tgt test.en
    nmt-score CKPT --tsv pairs.tsv --per-token --align
    nmt-score CKPT --src test.de --n-best nbest.txt
    nmt-score reverse.ckpt --src test.de --n-best nbest.txt --reverse   # P(source | hypothesis)
"""

import argparse
import logging
import sys
from functools import partial
from pathlib import Path

import torch

from transformer_nmt.checkpoint import CheckpointError, resolve_checkpoints
from transformer_nmt.cli import alignment_args, ensemble_args, shard_args
from transformer_nmt.cli.search_args import add_device_arguments, check_device, positive_int
from transformer_nmt.data.bitext import read_lines
from transformer_nmt.data.corpus import DataError
from transformer_nmt.data.progress import progress
from transformer_nmt.inference.scoring import TargetScore
from transformer_nmt.inference.shards import translate_sharded


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("checkpoint", help="a .ckpt, or a folder with --average-last")
    parser.add_argument(
        "--average-last",
        type=positive_int,
        metavar="N",
        help="score with the average of the folder's last N periodic checkpoints, N >= 1 "
        "(default: the checkpoint alone)",
    )
    pairs = parser.add_mutually_exclusive_group(required=True)
    pairs.add_argument(
        "--tgt", type=Path, metavar="FILE", help="targets, line-aligned with --src (.gz allowed)"
    )
    pairs.add_argument(
        "--n-best",
        type=Path,
        metavar="FILE",
        help="'line<TAB>score<TAB>text' lines of --src (lines from 0), as nmt-translate --n-best "
        "prints them",
    )
    pairs.add_argument("--tsv", type=Path, metavar="FILE", help="'source<TAB>target' lines")
    parser.add_argument(
        "--src", type=Path, metavar="FILE", help="sources (.gz allowed), with --tgt or --n-best"
    )
    parser.add_argument(
        "--reverse",
        action="store_true",
        help="score each source given its target, with a model of the other direction",
    )
    parser.add_argument(
        "--tgt-lang",
        metavar="LANG",
        help="a multilingual model's language of the targets: they are scored as translations "
        "into it, framed by its tag as nmt-translate --tgt-lang frames them (an unknown one is "
        "refused with the list); with --reverse, the language of the sources",
    )
    parser.add_argument(
        "--src-lang",
        metavar="LANG",
        help="the sources' language (with --reverse, the targets': then the language scored "
        "into, required by a multilingual model)",
    )
    parser.add_argument("--per-token", action="store_true", help="each token's log-probability")
    alignment_args.add_alignment_arguments(parser)
    batching = parser.add_mutually_exclusive_group()
    batching.add_argument(
        "--batch-size",
        type=positive_int,
        default=64,
        help="pairs a batch, an integer >= 1 (default: 64)",
    )
    batching.add_argument(
        "--max-tokens",
        type=positive_int,
        metavar="N",
        help="batches of up to N source tokens (padding included) instead of --batch-size "
        "pairs, N >= 1 (default: --batch-size pairs)",
    )
    add_device_arguments(parser, mixed=True)
    parser.add_argument(
        "--threads",
        type=positive_int,
        help="torch CPU threads, an integer >= 1 (default: torch's, one per core)",
    )
    shard_args.add_shard_argument(parser, "score")
    ensemble_args.add_ensemble_arguments(parser)
    args = parser.parse_args(argv)
    if (args.tsv is None) == (args.src is None):
        parser.error("give --src with --tgt or --n-best, or --tsv alone")
    alignment_args.check_alignment_args(parser, args)
    # Scoring runs our model itself: the engine options translation has are fixed here.
    args.engine, args.quantization, args.vmap_from, args.workers = "torch", None, None, 1
    check_device(parser, args.device)
    ensemble_args.check_ensemble_args(parser, args)
    args.devices = shard_args.shard_devices(parser, args)
    return args


def read_pairs(args: argparse.Namespace) -> tuple[list[str], list[str], list[str] | None]:
    """Sources, targets and, for an n-best list, each of its lines to print before the scores."""
    if args.tsv is not None:
        rows = [line.rstrip("\n").split("\t") for line in read_lines(args.tsv)]
        for number, row in enumerate(rows, start=1):
            if len(row) != 2:
                raise DataError(
                    f"{args.tsv}, line {number}: {len(row)} columns, not source<TAB>target"
                )
        return [s for s, _ in rows], [t for _, t in rows], None
    sources = [line.rstrip("\n") for line in read_lines(args.src)]
    if args.tgt is not None:
        targets = [line.rstrip("\n") for line in read_lines(args.tgt)]
        if len(targets) != len(sources):
            raise DataError(
                f"{args.src} has {len(sources)} lines but {args.tgt} has {len(targets)}"
            )
        return sources, targets, None
    return _n_best(args.n_best, sources)


def _n_best(path: Path, sources: list[str]) -> tuple[list[str], list[str], list[str]]:
    """Each n-best line's source and hypothesis; the columns after the text (an earlier
    nmt-score's) are kept, so that scores of several models accumulate."""
    lines = [line.rstrip("\n") for line in read_lines(path)]
    paired, hypotheses = [], []
    for number, line in enumerate(lines, start=1):
        row = line.split("\t")
        if len(row) < 3 or not row[0].isdigit() or int(row[0]) >= len(sources):
            raise DataError(
                f"{path}, line {number}: not 'line<TAB>score<TAB>text' of a line of the "
                f"{len(sources)} sources (nmt-translate --n-best prints them, lines from 0)"
            )
        paired.append(sources[int(row[0])])
        hypotheses.append(row[2])
    return paired, hypotheses, lines


def columns(scored: TargetScore) -> str:
    out = [f"{scored.score:.4f}", f"{scored.mean:.4f}"]
    if scored.token_log_probs is not None:
        out.append(" ".join(f"{p:.4f}" for p in scored.token_log_probs))
    if scored.alignment is not None:
        out.append(scored.alignment)
    return "\t".join(out)


def main(argv: list[str] | None = None) -> None:
    args = parse_arguments(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    # Off a terminal, progress is a log line every 30 s.
    logging.basicConfig(format="%(levelname)s: %(message)s", level=logging.INFO)
    try:
        sources, targets, before = read_pairs(args)
        first = resolve_checkpoints([args.checkpoint], args.average_last)
        translator = ensemble_args.load(first, args)
        alignment_args.check_alignment_layer(translator.model, args)
        tgt_lang, src_lang = args.tgt_lang, args.src_lang
        if args.reverse:
            sources, targets = targets, sources
            tgt_lang, src_lang = src_lang, tgt_lang
        translator.frame(tgt_lang, src_lang, warn=False)  # a language it lacks: refused now
    except (CheckpointError, DataError, OSError, ValueError) as e:
        sys.exit(f"error: {e}")
    alignment = alignment_args.alignment(args)
    options = dict(
        batch_size=args.batch_size,
        max_tokens=args.max_tokens,
        per_token=args.per_token,
        alignment=alignment,
        tgt_lang=tgt_lang,
        src_lang=src_lang,
    )
    if args.devices is None:
        scores = translator.score_stream(sources, targets, **options)
    else:
        translator = None  # loaded to refuse a bad checkpoint early; each shard loads its own
        make = partial(shard_args.shard_translator, first, args)
        each = {"targets": targets}
        scores = translate_sharded(
            make, args.devices, sources, options, each, args.threads, "score_stream"
        )
    try:
        for i, scored in enumerate(
            progress(scores, desc="scoring", total=len(sources), unit="pair")
        ):
            prefix = "" if before is None else before[i] + "\t"
            print(prefix + columns(scored), flush=True)
    except ValueError as e:  # a target too long, a layer the model lacks: named
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()
