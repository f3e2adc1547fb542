"""`nmt-evaluate` of a multilingual checkpoint, direction by direction (`evaluation/directions`).

Each direction is translated into its target language (its tag, as `nmt-translate --tgt-lang`)
and scored; its outputs go to `<output dir>/<src>-<tgt>/hypotheses.txt`, the whole report to
`report.json`, the table to `directions.tsv` and the BLEU heatmap (rows source, columns target,
zero-shot cells hatched) to `bleu_grid.png`.
"""

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from transformer_nmt.checkpoint import CheckpointError, resolve_checkpoints
from transformer_nmt.cli import ensemble_args
from transformer_nmt.cli.evaluate_files import ensemble_report, path_text, read_pair_files
from transformer_nmt.cli.grid import settings
from transformer_nmt.cli.search_args import engine_options, search_options
from transformer_nmt.cli.shard_args import logged_progress
from transformer_nmt.data.corpus import DataError
from transformer_nmt.data.languages import Direction, Languages, direction_name
from transformer_nmt.evaluation import directions as per_direction
from transformer_nmt.evaluation.corpus_scores import score
from transformer_nmt.evaluation.direction_grid import draw_direction_grid
from transformer_nmt.evaluation.directions import OFF_TARGET
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

GRID = "bleu_grid.png"  # the source-by-target heatmap (`evaluation/direction_grid.py`)

TestSets = dict[Direction, tuple[list[str], list[str], dict[str, Any]]]


def refuse_options(args: argparse.Namespace) -> str | None:
    """What per-direction evaluation does not do, as the line that says so."""
    if len(settings(args.average_last, args.beam_size, args.alpha)) > 1:
        return (
            "per-direction evaluation evaluates one setting: give one --average-last, "
            "--beam-size and --alpha"
        )
    for option, given in (("--paired", args.paired), ("--sentence-scores", args.sentence_scores)):
        if given is not None:
            return f"{option} compares one direction's outputs: evaluate that direction alone"
    return None


def languages_of(translator: Translator, checkpoint: Path) -> Languages:
    """The checkpoint's languages; one without is refused, saying what to do instead."""
    if translator.languages is None:
        raise CheckpointError(
            f"{checkpoint} records no languages: per-direction evaluation (--directions, a "
            "multilingual --data) needs a multilingual checkpoint; evaluate its one direction "
            "with one --src/--ref pair or a one-direction --data"
        )
    return translator.languages


def read_test_sets(
    args: argparse.Namespace,
    overrides: list[str],
    corpus: tuple[Any, list[str]] | None,
    languages: Languages,
) -> TestSets:
    """Each direction's sources, references and where they come from, in the order asked."""
    if args.directions is not None:
        wanted = per_direction.parse_directions(args.directions, languages)
    else:
        wanted = per_direction.all_directions(languages)
    if args.src is not None:
        return {
            d: (*read_pair_files(src, ref), {"src": str(src), "ref": str(ref)})
            for d, src, ref in zip(wanted, args.src, args.ref, strict=True)
        }
    if corpus is None:
        raise DataError(
            f"--data {args.data} is a config of one direction: --directions needs a "
            "multilingual one (with data.languages) or --src/--ref files"
        )
    reader, data_languages = corpus
    if args.directions is None:  # every pair the data holds too
        wanted = [d for d in wanted if set(d) <= set(data_languages)]
    elif missing := [direction_name(d) for d in wanted if not set(d) <= set(data_languages)]:
        raise DataError(
            f"--data {args.data} holds no {', '.join(missing)}: its languages are "
            f"{', '.join(data_languages)}"
        )
    where = {"data": args.data, "split": args.split, "overrides": overrides}
    test_sets = {}
    for direction in wanted:
        pairs = reader.read(args.split, *direction)
        test_sets[direction] = ([s for s, _ in pairs], [t for _, t in pairs], where)
    return test_sets


def main(
    args: argparse.Namespace,
    checkpoints: list[str],
    overrides: list[str],
    corpus: tuple[Any, list[str]] | None,
) -> None:
    """Evaluate each direction, then write and print the report, the table and the means."""
    if problem := refuse_options(args):
        sys.exit(f"error: {problem}")
    setting = settings(args.average_last, args.beam_size, args.alpha)[0]
    try:
        paths = resolve_checkpoints(checkpoints, setting.average_last)
        run_dir = run_dir_of(paths[-1])
        if args.wandb and saved_run(run_dir) is None:  # before hours of decoding
            raise WandbRunError(f"--wandb: {run_dir} logged to no W&B run (no {RUN_FILE})")
        translator = ensemble_args.load(paths, args)
        languages = languages_of(translator, paths[0])
        test_sets = read_test_sets(args, overrides, corpus, languages)
    except (CheckpointError, DataError, ExportError, OSError, ValueError, WandbRunError) as e:
        sys.exit(f"error: {e}")
    output_dir = args.output_dir or paths[-1].parent / "evaluation"
    search = search_options(args) | {"beam_size": setting.beam_size, "alpha": setting.alpha}
    reports = {}
    try:
        for direction, (sources, references, _) in test_sets.items():
            name = direction_name(direction)
            hypotheses = translate(translator, sources, search, direction)
            reports[name] = per_direction.direction_report(
                hypotheses, references, direction, languages, score
            )
            text = "".join(f"{h}\n" for h in hypotheses)
            write_atomically(output_dir / name / "hypotheses.txt", text)
        mean = per_direction.means(reports)
        report = {
            "checkpoints": [str(p) for p in paths],
            **ensemble_report(args),
            "languages": languages.to_dict(),
            "search": search,
            **{k: v for k, v in engine_options(args).items() if k != "autocast"},
            "dtype": args.dtype,
            "device": args.device,
            "vmap_from": path_text(args.vmap_from),
            "test_sets": {direction_name(d): where for d, (*_, where) in test_sets.items()},
            "directions": reports,
            "mean": mean,
        }
        write_atomically(output_dir / "report.json", json.dumps(report, indent=2) + "\n")
        write_atomically(output_dir / "directions.tsv", per_direction.tsv(reports, mean))
        bleu = {name: r["BLEU"]["score"] for name, r in reports.items()}
        draw_direction_grid(languages, bleu, output_dir / GRID, title="BLEU")
    except (CheckpointError, ExportError, OSError, ValueError) as e:
        sys.exit(f"error: {e}")
    print(per_direction.table(reports, mean), end="")
    print(f"  BLEU signature: {next(iter(reports.values()))['BLEU']['signature']}")
    print(f"report: {output_dir / 'report.json'}\ntable: {output_dir / 'directions.tsv'}")
    print(f"grid: {output_dir / GRID}")
    if args.wandb:
        try:
            summary = wandb_summary(reports, mean) | {"evaluate/report": report}
            print(f"added to {add_to_run(run_dir, summary)}")
        except WandbRunError as e:
            sys.exit(f"error: {e}; the report is in {output_dir / 'report.json'}")


def translate(
    translator: Translator, sources: list[str], search: dict[str, Any], direction: Direction
) -> list[str]:
    """The best translation of each source into the direction's target language."""
    langs = {"src_lang": direction[0], "tgt_lang": direction[1]}
    outputs = translator.stream(sources, **search, **langs)
    name = direction_name(direction)
    bar = logged_progress(iterable=outputs, total=len(sources), unit=" sentences", desc=name)
    return [hypotheses[0][0] for hypotheses in bar]


def wandb_summary(reports: dict[str, dict], mean: dict[str, dict[str, float]]) -> dict[str, float]:
    """`evaluate/<metric>/<direction>` and `evaluate/<metric>` (the mean), as validation names
    its per-direction metrics."""
    summary = {}
    for name, r in reports.items():
        summary |= {f"evaluate/{m}/{name}": r[m]["score"] for m in per_direction.METRICS}
        summary[f"evaluate/{OFF_TARGET}/{name}"] = r[OFF_TARGET]
    return summary | {f"evaluate/{m}": value for m, value in mean["all"].items()}
