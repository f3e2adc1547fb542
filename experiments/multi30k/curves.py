"""Learning curves of offline W&B runs against wall time, and minutes per epoch.

python -m experiments.multi30k.curves curves.png de-en=<run dir>/wandb/offline-run-* en-de=<...>
"""

import sys
from pathlib import Path

from matplotlib.figure import Figure

from tests.helpers.wandb_records import history  # the offline run reader the tests use

PANELS = (("train/loss", None), ("val/loss", "o"), ("val/bleu", "o"))


def main(out: str, *runs: str) -> None:
    fig = Figure(figsize=(13, 3.6))
    axes = fig.subplots(1, len(PANELS))
    for run in runs:
        label, run_dir = run.split("=", 1)
        (records,) = Path(run_dir).glob("run-*.wandb")
        rows = history(records)
        for ax, (key, marker) in zip(axes, PANELS, strict=True):
            points = [(r["_runtime"] / 60, r[key]) for r in rows if key in r]
            ax.plot(*zip(*points, strict=True), marker=marker, markersize=3, label=label)
        validations = [r for r in rows if "val/bleu" in r]
        minutes = validations[-1]["_runtime"] / 60
        print(
            f"{label}: {len(validations)} validations, last at step "
            f"{validations[-1]['trainer/global_step']} after {minutes:.1f} min "
            f"({minutes / len(validations):.2f} min an epoch with validation); val/bleu "
            + " ".join(f"{r['val/bleu']:.1f}" for r in validations)
        )
    for ax, (key, _) in zip(axes, PANELS, strict=True):
        ax.set(xlabel="minutes of training", title=key)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=100)


if __name__ == "__main__":
    main(*sys.argv[1:])
