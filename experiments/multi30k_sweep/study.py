"""The record of an Optuna search: every trial as a Markdown table, the parameters' importance,
and every trial's val/bleu curve against wall time.

python study.py <sweep dir> [--plot curves.png] [--study NAME] [--storage URL]

The sweep dir is what `python train.py -m hparams_search=...` wrote: optuna.journal (the
study, unless it was kept elsewhere: --storage URL), and a folder per trial, named by its number,
holding val_curve.csv. The searches on record kept theirs in <sweep dir>/optuna.db, made with
optuna 2.10: `optuna storage upgrade --storage sqlite:///<sweep dir>/optuna.db` once, then
--storage sqlite:///<sweep dir>/optuna.db.
"""

import argparse
import csv
from pathlib import Path

import optuna
from matplotlib import colormaps
from matplotlib.figure import Figure
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from hydra_plugins.transformer_nmt_sweeper._trials import STOPS, SURPLUS


def load_study(sweep_dir: Path, study_name: str | None = None, storage: str | None = None):
    """The study in `<sweep_dir>/optuna.journal`, named as its folder unless told otherwise."""
    journal = JournalStorage(JournalFileBackend(str(sweep_dir / "optuna.journal")))
    return optuna.load_study(study_name=study_name or sweep_dir.name, storage=storage or journal)


def ranked(study: optuna.Study) -> list[FrozenTrial]:
    """Every trial, the best value first; trials without a value (failed, running) last."""
    maximize = study.direction == StudyDirection.MAXIMIZE
    with_value = [t for t in study.trials if t.value is not None]
    without = [t for t in study.trials if t.value is None]
    return sorted(with_value, key=lambda t: t.value, reverse=maximize) + without


def trials_table(study: optuna.Study) -> str:
    """A Markdown row per trial: number, state, value, minutes it took, then its parameters."""
    names = list(dict.fromkeys(name for t in study.trials for name in t.params))
    lines = [
        "| trial | state | value | minutes | " + " | ".join(names) + " |",
        "|---" * (4 + len(names)) + "|",
    ]
    for trial in ranked(study):
        minutes = trial.duration.total_seconds() / 60 if trial.duration else None
        cells = [
            str(trial.number),
            _state(trial),
            _number(trial.value),
            _number(minutes, "{:.1f}"),
            *(_number(trial.params.get(name)) for name in names),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _state(trial: FrozenTrial) -> str:
    """The trial's state, with how often it was stopped and resumed, and whether it was one
    trial too many (the sweeper's `stops` and `surplus`)."""
    state = trial.state.name.lower()
    if stops := len(trial.user_attrs.get(STOPS, [])):
        state += f" (resumed {stops}×)" if stops > 1 else " (resumed)"
    if trial.user_attrs.get(SURPLUS):
        state += " (surplus)"
    return state


def importance_table(study: optuna.Study, seed: int = 0) -> str:
    """`optuna.importance.get_param_importances` as a Markdown table, the most important first.

    Mean decrease in impurity of a random forest fitted to the complete trials: the evaluator
    the searches on record were ranked with (optuna 2.10's fANOVA failed with numpy 2).
    """
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if len(complete) < 2:
        return f"(importance needs two complete trials or more: {len(complete)} so far)"
    evaluator = optuna.importance.MeanDecreaseImpurityImportanceEvaluator(seed=seed)
    importances = optuna.importance.get_param_importances(study, evaluator=evaluator)
    rows = [f"| {name} | {value:.3f} |" for name, value in importances.items()]
    return "\n".join(["| parameter | importance |", "|---|---|", *rows])


def read_curve(path: Path) -> tuple[list[float], list[float]]:
    """Minutes and val/bleu of each validation in a trial's val_curve.csv."""
    with path.open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["val/bleu"]]
    return [float(r["minutes"]) for r in rows], [float(r["val/bleu"]) for r in rows]


def plot_curves(study: optuna.Study, sweep_dir: Path, out: Path) -> list[int]:
    """Every trial's val/bleu against minutes, the best first in the legend; the trials drawn."""
    fig = Figure(figsize=(10, 5.5))
    ax = fig.subplots()
    ax.set_prop_cycle(color=colormaps["tab20"].colors)  # 20 colours: the default 10 repeat
    drawn = []
    for trial in ranked(study):
        path = sweep_dir / str(trial.number) / "val_curve.csv"
        if not path.exists():  # failed before its first validation, or never started
            continue
        label = f"#{trial.number} {trial.state.name.lower()} {_number(trial.value)}"
        style = "-" if trial.state == TrialState.COMPLETE else ":"
        ax.plot(*read_curve(path), style, marker="o", markersize=2, label=label)
        drawn.append(trial.number)
    ax.set(xlabel="minutes since the trial started", ylabel="val/bleu", title=study.study_name)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    return drawn


def _number(value: float | int | str | None, fmt: str = "{:.4g}") -> str:
    if value is None:
        return ""
    return fmt.format(value) if isinstance(value, float) else str(value)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep_dir", type=Path)
    parser.add_argument("--plot", type=Path, help="PNG of every trial's val/bleu curve")
    parser.add_argument("--study", help="study name (default: the sweep folder's name)")
    parser.add_argument("--storage", help="a database URL (default: <sweep_dir>/optuna.journal)")
    args = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = load_study(args.sweep_dir, args.study, args.storage)
    states = [t.state.name.lower() for t in study.trials]
    counts = ", ".join(f"{states.count(s)} {s}" for s in dict.fromkeys(states))
    print(f"## Study {study.study_name}: {len(states)} trials ({counts})\n")
    print(trials_table(study))
    print("\n## Parameter importance\n")
    print(importance_table(study))
    if args.plot:
        drawn = plot_curves(study, args.sweep_dir, args.plot)
        print(f"\n{args.plot}: the val/bleu curves of {len(drawn)} trials")


if __name__ == "__main__":
    main()
