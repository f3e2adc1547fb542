"""`nmt-translate`: a checkpoint translates a file or stdin to stdout, one line per input line."""

import argparse
import sys
from collections.abc import Iterator
from functools import partial
from itertools import islice, tee
from pathlib import Path

from transformer_nmt.checkpoint import CheckpointError, resolve_checkpoints
from transformer_nmt.cli import alignment_args, ensemble_args, sampling_args, shard_args
from transformer_nmt.cli.search_args import (
    add_search_arguments,
    parse_search_args,
    positive_int,
    search_options,
)
from transformer_nmt.data.bitext import decode_lines, iter_lines, read_lines
from transformer_nmt.data.corpus import DataError
from transformer_nmt.export import ExportError
from transformer_nmt.inference.alignment import Alignment
from transformer_nmt.inference.shards import translate_sharded
from transformer_nmt.inference.translator import Scored, Translator


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
        help="translate with the average of the folder's last N periodic checkpoints, N >= 1 "
        "(default: the checkpoint alone)",
    )
    parser.add_argument(
        "--n-best",
        type=positive_int,
        default=1,
        metavar="N",
        help="1 to --beam-size; above 1, print 'line<TAB>score<TAB>text' lines, best first, the "
        "score the hypothesis' log-probability (as nmt-score gives it), ranked by score / "
        "length penalty (default: 1)",
    )
    parser.add_argument(
        "--tgt-lang",
        metavar="LANG",
        help="a multilingual model's language to translate into (one of those it was trained "
        "on; an unknown one is refused with the list)",
    )
    parser.add_argument(
        "--src-lang",
        metavar="LANG",
        help="the input's language, with --tgt-lang: a direction the model never trained is "
        "translated with a warning that it is zero-shot",
    )
    shard_args.add_shard_argument(parser, "translate")
    ensemble_args.add_ensemble_arguments(parser)
    sampling_args.add_sampling_arguments(parser)
    alignment_args.add_alignment_arguments(parser)
    add_search_arguments(parser)
    args = parse_search_args(parser, argv)
    ensemble_args.check_ensemble_args(parser, args)
    sampling_args.check_sampling_args(parser, args)
    alignment_args.check_alignment_args(parser, args)
    devices = shard_args.shard_devices(parser, args)
    if args.n_best > args.beam_size and args.mbr is None:
        parser.error(
            f"--n-best {args.n_best} exceeds --beam-size {args.beam_size}: the beam holds only "
            "beam-size hypotheses; raise --beam-size or lower --n-best"
        )
    try:
        # Prefixes are counted against a file's lines before the model loads.
        prefixes = None if args.prefix is None else read_lines(args.prefix, replace_invalid=True)
        if prefixes is not None and args.input is not None:
            check_prefix_count(args.prefix, prefixes, args.input)
        if args.prefix_column and args.input is not None:
            check_prefix_column(args.input)
        if args.constraints is not None and args.input is not None:
            sampling_args.read_constraints(args.constraints, line_count(args.input))
        first = resolve_checkpoints([args.checkpoint], args.average_last)
        translator = ensemble_args.load(first, args)
        alignment_args.check_alignment_layer(translator.model, args)
        if args.input is None:
            # Bytes, not text: invalid UTF-8 is replaced per line, and only "\n" ends a line.
            lines = decode_lines(sys.stdin.buffer, "stdin", replace_invalid=True)
        else:
            lines = read_lines(args.input, replace_invalid=True)
        total = None if args.input is None else len(lines)
        if args.prefix_column:
            where = "stdin" if args.input is None else str(args.input)
            lines, prefixes = sampling_args.split_prefix_column(lines, where)
            if devices is not None:  # shards take lists: every line read (or refused) here
                lines, prefixes = list(lines), list(prefixes)
        constraints = None
        if args.constraints is not None:  # every line read: a constraint may name any of them
            lines = list(lines)
            total = len(lines)
            by_line = sampling_args.read_constraints(args.constraints, len(lines))
            constraints = [by_line.get(n, []) for n in range(1, len(lines) + 1)]
        if prefixes is not None and args.input is not None:  # refused before the first line
            lines, prefixes = list(lines), list(prefixes)
            translator.check_prefixes(lines, prefixes, args.max_len_b)
    # ExportError: --engine ct2; ValueError: a prefix too long, named by its line
    except (CheckpointError, DataError, ExportError, OSError, ValueError) as e:
        sys.exit(f"error: {e}")
    sampling = sampling_args.sampling(args)
    per_line = args.n_best if sampling is None else sampling.n
    options = dict(n_best=args.n_best, sampling=sampling, **search_options(args))
    options["mbr"] = sampling_args.mbr(args)
    options |= dict(tgt_lang=args.tgt_lang, src_lang=args.src_lang)
    alignment = alignment_args.alignment(args)
    if alignment is not None:  # each output's source, read as the translator reads it
        lines, sources = tee(lines)
    if devices is None:
        outputs = translator.stream(lines, prefixes=prefixes, constraints=constraints, **options)
        progress = None
        if args.input is not None:
            progress = shard_args.logged_progress(
                desc="translating", total=total, unit=" sentences"
            )
    else:
        if alignment is None:  # loaded to refuse a bad checkpoint early; each shard loads its own
            translator = None
        lines = list(lines)
        each = {"prefixes": prefixes, "constraints": constraints}
        each = {name: items for name, items in each.items() if items is not None}
        make = partial(shard_args.shard_translator, first, args)
        outputs = translate_sharded(make, devices, lines, options, each, args.threads)
        progress = shard_args.logged_progress(
            desc="translating", total=len(lines), unit=" sentences"
        )
    if alignment is not None:
        langs = {"tgt_lang": args.tgt_lang, "src_lang": args.src_lang}
        outputs = with_alignments(outputs, sources, translator, alignment, args.batch_size, langs)
    try:
        for i, hypotheses in enumerate(outputs):
            if per_line == 1:
                print("\t".join(map(str, hypotheses[0][::2])), flush=True)  # text[, alignment]
            else:
                for text, score, *aligned in hypotheses:
                    print("\t".join([str(i), f"{score:.4f}", text, *aligned]), flush=True)
            if progress is not None:
                progress.update()
        if progress is not None:
            progress.close()
    except (DataError, ValueError) as e:  # a prefix too long, or missing: named by its line
        sys.exit(f"error: {e}")


def with_alignments(
    outputs: Iterator[Scored],
    sources: Iterator[str],
    translator: Translator,
    alignment: Alignment,
    batch_size: int,
    langs: dict[str, str | None] | None = None,
) -> Iterator[list[tuple[str, float, str]]]:
    """Each sentence's (text, score, Pharaoh alignment) hypotheses: the translations scored
    back with their attention (forced decoding), batch_size sentences at a time; `langs`: the
    tgt_lang and src_lang they were translated with, so that they are read as the search
    wrote them (after the target's tag)."""
    while block := list(islice(outputs, batch_size)):
        texts = [[text for text, _ in hypotheses] for hypotheses in block]
        read = list(islice(sources, len(block)))
        sentences = [source for source, found in zip(read, texts, strict=True) for _ in found]
        targets = [text for found in texts for text in found]
        scored = iter(translator.score(sentences, targets, alignment=alignment, **(langs or {})))
        for hypotheses in block:
            yield [(text, score, next(scored).alignment) for text, score in hypotheses]


def line_count(source: Path) -> int:
    return sum(1 for _ in iter_lines(source, replace_invalid=True))


def check_prefix_column(source: Path) -> None:
    """Refuse an input line without its prefix column before the model loads."""
    lines = iter_lines(source, replace_invalid=True)
    for _ in sampling_args.split_prefix_column(lines, str(source))[0]:
        pass


def check_prefix_count(prefix: Path, prefixes: list[str], source: Path) -> None:
    """Refuse a prefix file whose lines do not pair up with the input's."""
    lines = line_count(source)
    if len(prefixes) != lines:
        raise DataError(
            f"--prefix {prefix} has {len(prefixes)} lines but {source} has {lines}: give one "
            "prefix a line (a blank line for none)"
        )


if __name__ == "__main__":
    main()
