"""The research workflows' Multi30k table: each run's best checkpoint (training's val BLEU chose
it) scored by `nmt-evaluate` with beam 4 on val, then once on test.

    python -m experiments.research_workflows.table --data ../shared/data/multi30k --out scores \
        baseline=w71/baseline "back-translation, beam=w71/bt/train-<hash>" ...

A run is a folder with checkpoints/ (a `train.py` run, or a pipeline's training stage). Each
evaluation is kept in --out/<name>/<split>/ and reused by a rerun: test is decoded once a model.
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

from experiments.common.machine import cpu_description
from transformer_nmt.checkpoint import best_checkpoints

SPLITS = {"val": "val", "test": "test_2016_flickr"}


def best_checkpoint(run: Path) -> Path:
    """The run's one best checkpoint, named by its step and val BLEU."""
    found = best_checkpoints(run / "checkpoints", "val/bleu")
    if len(found) != 1:
        raise SystemExit(f"{run}/checkpoints: {len(found)} best checkpoints, expected one")
    return found[0]


def evaluate(checkpoint: Path, data: Path, stem: str, out: Path, threads: int) -> dict:
    """nmt-evaluate's report.json, from `out` if it is there."""
    report = out / "report.json"
    if not report.exists():
        command = [
            "nmt-evaluate", str(checkpoint), "--src", str(data / f"{stem}.de.gz"),
            "--ref", str(data / f"{stem}.en.gz"), "--output-dir", str(out),
            "--threads", str(threads),
        ]  # fmt: skip
        print("$", " ".join(command), file=sys.stderr, flush=True)
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return json.loads(report.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", metavar="NAME=RUN", help="a row's name and run folder")
    parser.add_argument("--data", type=Path, required=True, help="folder of Multi30k's .gz files")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    print(f"Machine: {cpu_description()}\n")
    print("| row | updates | val BLEU | test BLEU | test chrF2 |\n|---|---|---|---|---|")
    for row in args.runs:
        name, _, run = row.partition("=")
        best = best_checkpoint(Path(run))
        step = best.name.removeprefix("step").split("-")[0]
        # val first: a test score never chose anything.
        val, test = (
            evaluate(best, args.data, stem, args.out / name / split, args.threads)
            for split, stem in SPLITS.items()
        )
        print(
            f"| {name} | {int(step):,} | {val['BLEU']['score']:.2f} | {test['BLEU']['score']:.2f} "
            f"| {test['chrF2']['score']:.2f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
