"""The race's numbers from its run folders; reproduce.sh calls each.

    python -m experiments.transformer_vs_rnn.race checkpoint <run dir> <minutes>
        the last checkpoint saved by then
    python -m experiments.transformer_vs_rnn.race attention-layer <checkpoint>
        the layer whose alignment the record shows
    python -m experiments.transformer_vs_rnn.race table <race dir>
        the record's table, Markdown
    python -m experiments.transformer_vs_rnn.race plot <out.png> <race dir>
        val BLEU against wall-clock minutes

A run's clock starts when Hydra writes its `.hydra/config.yaml`, before data and model are built;
every row pays the same start-up. The BPE is trained by whichever row runs first and cached for
the others, so the first row's clock also holds the BPE's few seconds.
"""

import json
import re
import sys
from pathlib import Path

import torch
from matplotlib.figure import Figure

from tests.helpers.wandb_records import history  # the offline run reader the tests use

ROWS = {
    "transformer": "Transformer small",
    "rnn": "RNN (GRU, additive attention)",
    "rezero": "ReZero Transformer",
}
MINUTES = (10, 20, 40, 60)


def start_time(run: Path) -> float:
    return (run / ".hydra" / "config.yaml").stat().st_mtime


def checkpoint_at(run: Path, minutes: float) -> Path | None:
    """The last checkpoint written within `minutes` of the run's start (last.ckpt is rewritten)."""
    deadline = start_time(run) + 60 * minutes
    saved = [p for p in (run / "checkpoints").glob("step*.ckpt") if p.stat().st_mtime <= deadline]
    return max(saved, key=lambda p: p.stat().st_mtime, default=None)


def attention_layer(checkpoint: Path) -> int:
    """The Transformer's last decoder layer; the RNN's alpha_ij is its one encoder-decoder
    attention. A checkpoint from before N_dec holds N alone."""
    model_config = torch.load(checkpoint, weights_only=True, mmap=True)["model_config"]
    return model_config.get("N_dec") or model_config.get("N", 1)


def parameters(run: Path) -> int:
    """The count `train` logs: tied matrices count once."""
    match = re.search(r"Model: ([\d,]+) parameters", (run / "train.log").read_text())
    return int(match.group(1).replace(",", ""))


def wandb_history(run: Path) -> list[dict]:
    (records,) = run.glob("wandb/offline-run-*/run-*.wandb")
    return history(records)


def tokens_per_second(run: Path) -> float:
    """Mean of train/tokens_per_sec, real target tokens a second of training steps."""
    values = [r["train/tokens_per_sec"] for r in wandb_history(run) if "train/tokens_per_sec" in r]
    return sum(values) / len(values)


def score(report: Path, metric: str) -> str:
    return f"{json.loads(report.read_text())[metric]['score']:.1f}" if report.exists() else "–"


def table(race: str) -> None:
    marks = " | ".join(f"val BLEU {m} min" for m in MINUTES)
    print(f"| model | parameters | target tokens/s | {marks} | test2016 BLEU | test2016 chrF |")
    print("|---" * (5 + len(MINUTES)) + "|")
    for row, name in ROWS.items():
        run = Path(race) / row
        evaluation = run / "evaluation"
        val = [score(evaluation / "val" / f"minute{m}" / "report.json", "BLEU") for m in MINUTES]
        # The one setting val chose, scored once.
        test = next((evaluation / "test_2016_flickr").glob("*/report.json"), Path("none"))
        print(
            f"| {name} | {parameters(run) / 1e6:.1f}M | {tokens_per_second(run):,.0f} | "
            + " | ".join(val)
            + f" | {score(test, 'BLEU')} | {score(test, 'chrF2')} |"
        )


def plot(out: str, race: str) -> None:
    """Val BLEU against wall-clock minutes, and against updates: rows that ran at different
    speeds (another job on the CPU) still compare by what each update taught."""
    fig = Figure(figsize=(10, 4))
    by_time, by_update = fig.subplots(1, 2, sharey=True)
    for row, name in ROWS.items():
        rows = [r for r in wandb_history(Path(race) / row) if "val/bleu" in r]
        minutes = [(r["_timestamp"] - start_time(Path(race) / row)) / 60 for r in rows]
        bleu = [r["val/bleu"] for r in rows]
        by_time.plot(minutes, bleu, marker="o", markersize=3, label=name)
        by_update.plot([r["trainer/global_step"] for r in rows], bleu, marker="o", markersize=3)
    by_time.set(xlabel="wall-clock minutes", ylabel="val BLEU (greedy)", title="Multi30k de→en")
    by_update.set(xlabel="updates (batches of 2048 tokens)", title="the same, by updates")
    for ax in (by_time, by_update):
        ax.grid(alpha=0.3)
    by_time.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=100)


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    if command == "checkpoint":
        print(checkpoint_at(Path(args[0]), float(args[1])) or "")
    elif command == "attention-layer":
        print(attention_layer(Path(args[0])))
    elif command == "table":
        table(*args)
    elif command == "plot":
        plot(*args)
    else:
        sys.exit(__doc__)
