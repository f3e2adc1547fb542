"""`nmt-evaluate`: sacreBLEU, chrF, chrF++ and TER of a checkpoint (or an average of several)
on a test set.

The test set is either two line-aligned files (`--src/--ref`) or a split of any data config,
read by the corpus class training uses, with Hydra overrides after the checkpoints:

    nmt-evaluate CKPT --data wmt14_en_de --split test
    nmt-evaluate CKPT --data multi30k_hub data.corpus.name=/local/copy --split test

A multilingual checkpoint is evaluated direction by direction (each translated into its target
with its tag) on a multilingual data config, or on several --src/--ref files, one --directions
name each; the report adds each direction's off-target rate, and the means:

    nmt-evaluate CKPT --data multi30k_multilingual --split test [--directions de-fr fr-de]
    nmt-evaluate CKPT --src test.de test.fr --ref test.fr test.de --directions de-fr fr-de
"""

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from transformer_nmt.checkpoint import CheckpointError, resolve_checkpoints
from transformer_nmt.cli import ensemble_args
from transformer_nmt.cli.evaluate_files import ensemble_report, path_text, read_pair_files
from transformer_nmt.cli.grid import settings, table
from transformer_nmt.cli.search_args import (
    add_search_arguments,
    engine_options,
    parse_search_args,
    positive_int,
    search_options,
)
from transformer_nmt.cli.shard_args import logged_progress
from transformer_nmt.data.bitext import read_lines
from transformer_nmt.data.corpus import DataError
from transformer_nmt.evaluation import significance
from transformer_nmt.evaluation.corpus_scores import score
from transformer_nmt.evaluation.sentence_scores import write_sentence_scores
from transformer_nmt.export import ExportError
from transformer_nmt.inference.translator import Translator
from transformer_nmt.runtime.atomic import write_atomically
from transformer_nmt.runtime.wandb_run import (
    RUN_FILE,
    WandbRunError,
    add_to_run,
    run_dir_of,
    saved_run,
)


def split_overrides(words: list[str]) -> tuple[list[str], list[str]]:
    """Checkpoint paths and Hydra overrides: a KEY=VALUE word that is not a file is the latter."""
    checkpoints = [w for w in words if "=" not in w or Path(w).exists()]
    return checkpoints, [w for w in words if w not in checkpoints]


def read_test_set(
    args: argparse.Namespace, overrides: list[str]
) -> tuple[list[str], list[str], dict[str, Any]]:
    """Sources, references and what the report names them by: files, or a config's split."""
    if args.data is not None:
        # Imported here: composing a data config loads Hydra, which scoring files does not need.
        from transformer_nmt.cli.compose import read_split

        pairs, src_lang, tgt_lang = read_split(args.data, args.split, overrides)
        where = {"data": args.data, "split": args.split, "overrides": overrides}
        where |= {"langs": [src_lang, tgt_lang]}
        return [s for s, _ in pairs], [t for _, t in pairs], where
    sources, references = read_pair_files(args.src[0], args.ref[0])
    return sources, references, {"src": str(args.src[0]), "ref": str(args.ref[0])}


def parse_arguments(argv: list[str] | None) -> tuple[argparse.Namespace, list[str], list[str]]:
    """The options, the checkpoints and the Hydra overrides of the data config."""
    parser = argparse.ArgumentParser(
        description=__doc__,
        epilog="Several --average-last, --beam-size or --alpha values evaluate every combination, "
        "a grid (to choose decoding on --split val): each in its own folder under --output-dir, "
        "then a table of all, also written as grid.json.",
    )
    parser.add_argument(
        "checkpoints",
        nargs="+",
        help="one .ckpt; several to average; or a folder with --average-last; with --data, "
        "KEY=VALUE words (not files) are Hydra overrides of the data config",
    )
    parser.add_argument(
        "--average-last",
        type=positive_int,
        nargs="+",
        metavar="N",
        help="average the folder's last N periodic checkpoints, N >= 1; several: each is "
        "evaluated (default: the checkpoints given, averaged if several)",
    )
    test_set = parser.add_mutually_exclusive_group(required=True)
    test_set.add_argument(
        "--src",
        type=Path,
        nargs="+",
        metavar="FILE",
        help="source text, .gz allowed (needs --ref); several: one a direction of --directions",
    )
    test_set.add_argument("--data", help="a conf/data config, e.g. wmt14_en_de (with --split)")
    parser.add_argument(
        "--ref",
        type=Path,
        nargs="+",
        metavar="FILE",
        help="reference text, line-aligned with --src (one for each --src file)",
    )
    parser.add_argument(
        "--directions",
        nargs="+",
        metavar="SRC-TGT",
        help="a multilingual checkpoint's directions to evaluate, e.g. de-fr: with --src/--ref "
        "one for each file pair; with a multilingual --data, those of its split (default: every "
        "ordered pair of the model's languages, its zero-shot ones marked)",
    )
    parser.add_argument(
        "--split",
        default="test",
        choices=["train", "val", "test"],
        help="with --data (default: test)",
    )
    parser.add_argument(
        "--tgt-lang",
        help="the target language for BLEU-tok's Moses tokenizer (default: the data config's, "
        "else en)",
    )
    parser.add_argument(
        "--output-dir",
        type=Path,
        help="where hypotheses.txt and report.json go (default: evaluation/ beside the "
        "checkpoint); a grid's cells go to folders in it, e.g. avg5_beam4_alpha0.6/",
    )
    parser.add_argument(
        "--wandb",
        action="store_true",
        help="also add the report (scores, signatures, decoding settings) to the W&B run of the "
        "checkpoint's training run (<run dir>/wandb_run.json), online or offline as W&B is set",
    )
    parser.add_argument(
        "--systems",
        type=Path,
        nargs="+",
        default=[],
        metavar="FILE|CKPT",
        help="other systems, compared by --paired before this call's own, the first the "
        "baseline: a file of outputs, one line a reference (e.g. an earlier evaluation's "
        "hypotheses.txt), or a .ckpt, decoded here with this call's search (alone, without "
        "--ensemble), its outputs written to systems/ under --output-dir",
    )
    parser.add_argument(
        "--paired",
        choices=sorted(significance.TESTS),
        help="sacreBLEU's paired significance test of every system (the --systems, then each "
        "decoded setting) against the first, in BLEU, chrF, chrF++ and TER: bs, bootstrap "
        "resampling (means, 95%% "
        "intervals, p-values); ar, approximate randomization (p-values); its numbers are "
        "sacreBLEU's command line's, written to significance.json (default: no test)",
    )
    parser.add_argument(
        "--paired-n",
        type=positive_int,
        metavar="N",
        help="resamples (bs) or trials (ar), N >= 1 (default: 1000 resamples, 10000 trials)",
    )
    parser.add_argument(
        "--sentence-scores",
        type=Path,
        metavar="FILE",
        help="also write each sentence's sacreBLEU scores to FILE, a TSV of 'line<TAB>BLEU<TAB>"
        "chrF<TAB>chrF++<TAB>TER' (lines from 1, under a header; BLEU with its effective order, "
        "as sentence_bleu)",
    )
    ensemble_args.add_ensemble_arguments(parser)
    add_search_arguments(parser, grid=True)
    args = parse_search_args(parser, argv, intermixed=True)
    ensemble_args.check_ensemble_args(parser, args)
    if (args.src is None) != (args.ref is None):
        parser.error("--src and --ref go together")
    if args.src is not None and len(args.src) != len(args.ref):
        parser.error(f"{len(args.src)} --src files but {len(args.ref)} --ref files: give one each")
    if args.src is not None and len(args.src) > 1 and args.directions is None:
        parser.error("several --src/--ref files are directions: name each with --directions")
    if args.src is not None and args.directions and len(args.directions) != len(args.src):
        parser.error(
            f"{len(args.directions)} --directions for {len(args.src)} --src/--ref pairs: "
            "name one direction each"
        )
    if args.wandb and len(settings(args.average_last, args.beam_size, args.alpha)) > 1:
        parser.error(
            "--wandb adds one evaluation to the training run: choose the setting on a grid "
            "first, then evaluate it alone with --wandb"
        )
    grid = settings(args.average_last, args.beam_size, args.alpha)
    if args.sentence_scores is not None and len(grid) > 1:
        parser.error(
            "--sentence-scores writes one setting's scores: choose the setting on a grid first, "
            "then evaluate it alone"
        )
    if args.paired is not None and len(args.systems) + len(grid) < 2:
        parser.error(
            "--paired compares systems: add --systems FILE|CKPT (the baseline), or decode a grid"
        )
    if args.paired is None and (args.systems or args.paired_n is not None):
        parser.error("--systems and --paired-n are for --paired: add --paired bs or ar")
    if len({(s.beam_size, s.alpha) for s in grid}) > 1 and any(map(is_checkpoint, args.systems)):
        parser.error(
            "a .ckpt of --systems decodes with this call's search: give one --beam-size and "
            "one --alpha"
        )
    checkpoints, overrides = split_overrides(args.checkpoints)
    if overrides and args.data is None:
        parser.error(f"overrides {overrides} need --data")
    return args, checkpoints, overrides


def evaluate(
    translator: Translator,
    sources: list[str],
    references: list[str],
    search: dict[str, Any],
    lang: str,
    desc: str | None = None,
) -> tuple[list[str], dict[str, Any]]:
    """The best hypothesis of each source, and their scores against the references."""
    outputs = translator.stream(sources, **search)
    desc = desc or "translating"
    bar = logged_progress(iterable=outputs, total=len(sources), unit=" sentences", desc=desc)
    hypotheses = [hyps[0][0] for hyps in bar]
    return hypotheses, score(hypotheses, references, lang)


def is_checkpoint(path: Path) -> bool:
    """A --systems entry to decode, not a file of outputs."""
    return path.suffix == ".ckpt"


def read_systems(paths: list[Path], lines: int) -> dict[int, list[str]]:
    """The outputs of each file of --systems (by position), one a reference; each checkpoint
    found, so that a missing one fails before any decoding."""
    outputs = {}
    for position, path in enumerate(paths):
        if is_checkpoint(path):
            resolve_checkpoints([str(path)])
            continue
        outputs[position] = [line.strip() for line in read_lines(path)]
        if len(outputs[position]) != lines:
            raise DataError(
                f"--systems {path} has {len(outputs[position])} lines for {lines} references"
            )
    return outputs


def decode_systems(
    args: argparse.Namespace,
    outputs: dict[int, list[str]],
    sources: list[str],
    search: dict[str, Any],
    output_dir: Path,
) -> list[tuple[str, list[str]]]:
    """Every --systems entry, in order, named by its path: a file's outputs, or a checkpoint's
    translations (written to output_dir/systems/<position>_<name>.txt)."""
    systems = []
    for position, path in enumerate(args.systems):
        if position not in outputs:
            translator = Translator.from_checkpoint([path], args.device, **engine_options(args))
            found = translator.stream(sources, **search)
            bar = logged_progress(
                iterable=found, total=len(sources), unit=" sentences", desc=path.name
            )
            hypotheses = [h[0][0] for h in bar]
            written = output_dir / "systems" / f"{position + 1}_{path.stem}.txt"
            write_atomically(written, "".join(f"{h}\n" for h in hypotheses))
            outputs[position] = hypotheses
        systems.append((str(path), outputs[position]))
    return systems


def compare(
    systems: list[tuple[str, list[str]]],
    references: list[str],
    args: argparse.Namespace,
    output_dir: Path,
) -> None:
    """sacreBLEU's paired test of the systems, printed and written beside the evaluations."""
    n = args.paired_n or 0  # sacreBLEU's default
    signatures, results = significance.paired_test(systems, references, args.paired, n)
    text = significance.table(signatures, results, args.paired, n)
    report = {
        "test": significance.TESTS[args.paired],
        "signatures": signatures,
        "systems": significance.as_records(results),
    }
    try:
        write_atomically(output_dir / "significance.txt", text)
        write_atomically(output_dir / "significance.json", json.dumps(report, indent=2) + "\n")
    except OSError as e:
        sys.exit(f"error: {e}")
    print(text + f"significance: {output_dir / 'significance.json'}")


def main(argv: list[str] | None = None) -> None:
    args, checkpoints, overrides = parse_arguments(argv)
    corpus = None
    if args.data is not None:
        from transformer_nmt.cli.compose import multilingual_corpus  # loads Hydra: only here

        try:
            corpus = multilingual_corpus(args.data, overrides)
        except DataError as e:
            sys.exit(f"error: {e}")
    if corpus is not None or args.directions is not None:
        # Imported here: it builds on this module's scores.
        from transformer_nmt.cli import evaluate_directions

        evaluate_directions.main(args, checkpoints, overrides, corpus)
        return
    grid = settings(args.average_last, args.beam_size, args.alpha)
    if len(grid) > 1 and args.data is not None and args.split == "test":
        print(
            "warning: a grid on the test split chooses decoding on test; choose it on --split "
            "val, then score test once with the chosen setting",
            file=sys.stderr,
        )
    try:
        # Every average's checkpoints before any decoding: a grid fails now, not an hour in.
        averages = dict.fromkeys(s.average_last for s in grid)
        paths = {n: resolve_checkpoints(checkpoints, n) for n in averages}
        run_dir = run_dir_of(paths[grid[0].average_last][-1])
        if args.wandb and saved_run(run_dir) is None:  # before hours of decoding
            raise WandbRunError(f"--wandb: {run_dir} logged to no W&B run (no {RUN_FILE})")
        sources, references, test_set = read_test_set(args, overrides)
        outputs = read_systems(args.systems, len(references))
    except (CheckpointError, DataError, OSError, WandbRunError) as e:
        sys.exit(f"error: {e}")
    tok_lang = args.tgt_lang or test_set.get("langs", [None, "en"])[1]
    output_dir = args.output_dir or paths[grid[0].average_last][-1].parent / "evaluation"
    options = engine_options(args)
    # The report's options: the dtype by its --dtype name (bf16-mixed: the autocast) and paths as
    # text, as JSON has neither.
    engine = {key: value for key, value in options.items() if key != "autocast"} | {
        "dtype": args.dtype,
        "device": args.device,
        "vmap_from": path_text(args.vmap_from),
    }

    search = search_options(args) | {"beam_size": grid[0].beam_size, "alpha": grid[0].alpha}
    try:  # before this call's own: a system that fails to load fails first
        systems = decode_systems(args, outputs, sources, search, output_dir)
    except (CheckpointError, ExportError, OSError) as e:
        sys.exit(f"error: {e}")
    rows, translator = [], None
    for i, setting in enumerate(grid):
        try:
            if i == 0 or setting.average_last != grid[i - 1].average_last:
                translator = None  # free the previous average before building the next
                translator = ensemble_args.load(paths[setting.average_last], args)
            search = search_options(args) | {"beam_size": setting.beam_size, "alpha": setting.alpha}
            desc = setting.name if len(grid) > 1 else None
            hypotheses, scores = evaluate(translator, sources, references, search, tok_lang, desc)
            report = {
                "checkpoints": [str(p) for p in paths[setting.average_last]],
                **ensemble_report(args),
                **test_set,
                "sentences": len(sources),
                "search": search,
                **engine,
                **scores,
            }
            cell = output_dir if len(grid) == 1 else output_dir / setting.name
            write_atomically(cell / "hypotheses.txt", "".join(f"{h}\n" for h in hypotheses))
            write_atomically(cell / "report.json", json.dumps(report, indent=2) + "\n")
            if args.sentence_scores is not None:
                write_sentence_scores(args.sentence_scores, hypotheses, references)
        except (CheckpointError, ExportError, OSError) as e:  # ExportError: --engine ct2
            sys.exit(f"error: {e}")
        rows.append((setting, scores))
        systems.append((setting.name, hypotheses))
    if args.paired is not None:
        compare(systems, references, args, output_dir)

    if len(grid) == 1:
        for name, metric in scores.items():
            print(f"{name}: {metric['result']}\n  signature: {metric['signature']}")
        print(f"hypotheses: {output_dir / 'hypotheses.txt'}\nreport: {output_dir / 'report.json'}")
        if args.sentence_scores is not None:
            print(f"sentence scores: {args.sentence_scores}")
        if args.wandb:
            summary = {f"evaluate/{name}": metric["score"] for name, metric in scores.items()}
            try:
                print(f"added to {add_to_run(run_dir, summary | {'evaluate/report': report})}")
            except WandbRunError as e:
                sys.exit(f"error: {e}; the report is in {output_dir / 'report.json'}")
        return
    summary = [{"folder": s.name, **asdict(s), **scores} for s, scores in rows]
    try:
        write_atomically(output_dir / "grid.json", json.dumps(summary, indent=2) + "\n")
    except OSError as e:
        sys.exit(f"error: {e}")
    print(table(rows))
    print(f"  BLEU signature: {rows[0][1]['BLEU']['signature']}")
    print(f"reports: {output_dir}/<folder>/report.json\ngrid: {output_dir / 'grid.json'}")


if __name__ == "__main__":
    main()
