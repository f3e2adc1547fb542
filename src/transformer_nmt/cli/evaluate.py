"""`nmt-evaluate`: sacreBLEU and chrF of a checkpoint (or an average of several) on a test set."""

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from sacrebleu.metrics import BLEU, CHRF
from tqdm import tqdm

from transformer_nmt.atomic import write_atomically
from transformer_nmt.cli.search_args import (
    add_search_arguments,
    engine_options,
    parse_search_args,
    positive_int,
    search_options,
)
from transformer_nmt.data.bitext import read_lines
from transformer_nmt.data.corpus import DataError
from transformer_nmt.training.checkpoint import CheckpointError, resolve_checkpoints
from transformer_nmt.translator import Translator


def score(hypotheses: list[str], references: list[str]) -> dict[str, Any]:
    """Corpus BLEU and chrF with sacreBLEU's defaults, each with its signature.

    Also BLEU-lc, sacreBLEU's `-lc` on the same output: comparable with the lowercased BLEU
    that many papers report.
    """
    report = {}
    metrics = {"BLEU": BLEU(), "BLEU-lc": BLEU(lowercase=True), "chrF2": CHRF()}
    for name, metric in metrics.items():
        result = metric.corpus_score(hypotheses, [references])
        report[name] = {
            "score": result.score,
            "result": str(result),
            "signature": str(metric.get_signature()),
        }
    return report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "checkpoints",
        nargs="+",
        help="one .ckpt; several to average; or a folder with --average-last",
    )
    parser.add_argument(
        "--average-last",
        type=positive_int,
        metavar="N",
        help="average the folder's last N checkpoints",
    )
    parser.add_argument("--src", type=Path, required=True, help="source text, .gz allowed")
    parser.add_argument("--ref", type=Path, required=True, help="reference text, line-aligned")
    parser.add_argument(
        "--output-dir",
        type=Path,
        help="where hypotheses.txt and report.json go (default: evaluation/ beside the checkpoint)",
    )
    add_search_arguments(parser)
    args = parse_search_args(parser, argv)
    try:
        paths = resolve_checkpoints(args.checkpoints, args.average_last)
        translator = Translator.from_checkpoint(paths, args.device, **engine_options(args))
        # Invalid UTF-8 is an error here, not replaced: it would change the score silently.
        sources = [line.strip() for line in read_lines(args.src)]
        references = [line.strip() for line in read_lines(args.ref)]
    except (CheckpointError, DataError, OSError) as e:
        sys.exit(f"error: {e}")
    if len(sources) != len(references):
        sys.exit(f"{args.src} has {len(sources)} lines but {args.ref} has {len(references)}")
    outputs = translator.stream(sources, **search_options(args))
    hypotheses = [hyps[0][0] for hyps in tqdm(outputs, total=len(sources), unit="sent")]

    scores = score(hypotheses, references)
    report = {
        "checkpoints": [str(p) for p in paths],
        "src": str(args.src),
        "ref": str(args.ref),
        "sentences": len(sources),
        "search": search_options(args),
        **engine_options(args),
        **scores,
    }
    output_dir = args.output_dir or Path(paths[-1]).parent / "evaluation"
    try:
        write_atomically(output_dir / "hypotheses.txt", "".join(f"{h}\n" for h in hypotheses))
        write_atomically(output_dir / "report.json", json.dumps(report, indent=2) + "\n")
    except OSError as e:
        sys.exit(f"error: {e}")
    for name, metric in scores.items():
        print(f"{name}: {metric['result']}\n  signature: {metric['signature']}")
    print(f"hypotheses: {output_dir / 'hypotheses.txt'}\nreport: {output_dir / 'report.json'}")


if __name__ == "__main__":
    main()
