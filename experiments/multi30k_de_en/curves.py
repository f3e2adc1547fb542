"""Plots train/loss and val/bleu of an offline W&B run: python curves.py <offline-run dir> out.png"""

import sys
from pathlib import Path

from matplotlib.figure import Figure

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from wandb_records import history  # noqa: E402  (the offline run reader the tests use)


def main(run_dir: str, out: str) -> None:
    (records,) = Path(run_dir).glob("run-*.wandb")
    rows = history(records)
    fig = Figure(figsize=(9, 3.5))
    for ax, key in zip(fig.subplots(1, 2), ("train/loss", "val/bleu"), strict=True):
        points = [(r["trainer/global_step"], r[key]) for r in rows if key in r]
        ax.plot(*zip(*points, strict=True), marker="o" if key == "val/bleu" else None)
        ax.set(xlabel="step", title=key)
        ax.grid(alpha=0.3)
        print(key, [(s, round(v, 2)) for s, v in points[-8:]])
    fig.tight_layout()
    fig.savefig(out, dpi=100)


if __name__ == "__main__":
    main(*sys.argv[1:])
