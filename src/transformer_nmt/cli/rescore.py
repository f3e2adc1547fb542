"""`nmt-rescore`: rerank n-best lists by a weighted sum of features, the weights tuned on a
validation split (Optuna, for corpus BLEU).

    nmt-translate fwd.ckpt val.de --n-best 8 --beam-size 8 > val.nbest
    nmt-score fwd.ckpt --src val.de --n-best val.nbest > val.fwd
    nmt-score rev.ckpt --src val.de --n-best val.fwd --reverse > val.feats
    nmt-rescore tune val.feats --ref val.en --output weights.json
    nmt-rescore apply test.feats --weights weights.json > test.en

Features: the n-best's own score, every number nmt-score appended, and the length in words.
"""

import argparse
import json
import sys
from pathlib import Path

from transformer_nmt.cli.search_args import non_negative_int, positive_int
from transformer_nmt.data.bitext import read_lines
from transformer_nmt.data.corpus import DataError
from transformer_nmt.evaluation.rescoring import read_n_best, rerank, tune
from transformer_nmt.runtime.atomic import write_atomically


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    tuning = commands.add_parser("tune", help="choose the weights on a validation split")
    tuning.add_argument("n_best", type=Path, help="the validation split's n-best with features")
    tuning.add_argument("--ref", type=Path, required=True, help="its references")
    tuning.add_argument("--output", type=Path, required=True, help="the weights' JSON file")
    tuning.add_argument(
        "--trials",
        type=positive_int,
        default=100,
        help="Optuna trials, an integer >= 1 (default: 100)",
    )
    tuning.add_argument(
        "--seed",
        type=non_negative_int,
        default=0,
        help="the sampler's seed, an integer >= 0 (default: 0)",
    )
    applying = commands.add_parser("apply", help="print each sentence's reranked best")
    applying.add_argument("n_best", type=Path, help="an n-best with the same features")
    applying.add_argument("--weights", type=Path, required=True, help="from nmt-rescore tune")
    return parser.parse_args(argv)


def read_weights(path: Path) -> list[float]:
    """The weights `nmt-rescore tune` wrote to `path`; anything else is refused naming the file."""
    try:
        weights = json.loads(path.read_text())["weights"]
        if not weights or not all(isinstance(w, int | float) for w in weights):
            raise ValueError(f"'weights' is {weights!r}, not a list of numbers")
    except (json.JSONDecodeError, KeyError, TypeError, ValueError, UnicodeDecodeError) as e:
        detail = "no 'weights' key" if isinstance(e, KeyError) else str(e)
        raise DataError(
            f"{path}: not a weights file of `nmt-rescore tune` ({detail}); make one with "
            f"`nmt-rescore tune <val n-best> --ref <val refs> --output {path}`"
        ) from None
    return weights


def main(argv: list[str] | None = None) -> None:
    args = parse_arguments(argv)
    try:
        if args.command == "tune":
            references = [line.strip() for line in read_lines(args.ref)]
            n_best = read_n_best(args.n_best, len(references))
            weights, bleu, baseline = tune(n_best, references, args.trials, args.seed)
            report = {"weights": weights, "bleu": bleu, "search_bleu": baseline}
            write_atomically(args.output, json.dumps(report, indent=2) + "\n")
            print(f"BLEU {bleu:.2f} (the search's own ranking: {baseline:.2f}): {args.output}")
            return
        weights = read_weights(args.weights)
        for text in rerank(read_n_best(args.n_best), weights):
            print(text)
    except (DataError, OSError, ValueError, KeyError) as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()
