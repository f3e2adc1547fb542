"""experiments/multi30k_sweep/study.py on a small study made with Optuna directly (no training)."""

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState, create_trial

from experiments.multi30k_sweep import study as study_py

SPACE = {
    "model.dropout": FloatDistribution(0.0, 0.4),
    "model.d_model": CategoricalDistribution([256, 512]),
}
# (dropout, d_model, value): the value follows the dropout only; None: the trial failed.
TRIALS = [(0.1, 256, 10.0), (0.3, 256, 30.0), (0.2, 512, None), (0.25, 512, 25.0), (0.05, 512, 5.0)]
CURVE = "step,epoch,minutes,val/bleu,val/loss\n100,0,1.50,2.0000,5.1\n200,1,3.00,8.5000,\n"


def cells(line: str) -> list[str]:
    """The cells of a Markdown table row."""
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


@pytest.fixture
def sweep(tmp_path):
    """A sweep folder as a search leaves it: its study, and a curve from trials that validated."""
    sweep = tmp_path / "my_search"
    sweep.mkdir()
    study = optuna.create_study(
        study_name="my_search",
        storage=JournalStorage(JournalFileBackend(str(sweep / "optuna.journal"))),
        direction="maximize",
    )
    for dropout, d_model, value in TRIALS:
        study.add_trial(
            create_trial(
                params={"model.dropout": dropout, "model.d_model": d_model},
                distributions=SPACE,
                value=value,
                state=TrialState.COMPLETE if value is not None else TrialState.FAIL,
            )
        )
    for number in (0, 1, 2):
        (sweep / str(number)).mkdir()
        (sweep / str(number) / "val_curve.csv").write_text(CURVE)
    return sweep


def test_the_table_ranks_every_trial_by_value_failed_ones_last(sweep, capsys):
    study_py.main([str(sweep)])
    out = capsys.readouterr().out

    assert "## Study my_search: 5 trials (4 complete, 1 fail)" in out
    lines = out.splitlines()
    header = cells(next(line for line in lines if line.startswith("| trial |")))
    rows = [
        dict(zip(header, cells(line), strict=True))
        for line in lines
        if line[:3] in {f"| {n}" for n in range(5)}
    ]
    assert [row["trial"] for row in rows] == ["1", "3", "0", "4", "2"]
    assert rows[0] == {
        "trial": "1", "state": "complete", "value": "30", "minutes": rows[0]["minutes"],
        "model.dropout": "0.3", "model.d_model": "256",
    }  # fmt: skip
    assert (rows[-1]["state"], rows[-1]["value"]) == ("fail", "")


def test_the_table_says_how_often_a_trial_was_stopped_and_resumed(sweep):
    study = study_py.load_study(sweep)
    stops = ["its worker process 7 on node-3 is dead (its process gone)", "SIGTERM"]
    marks = [{"stops": stops}, {"stops": stops[:1]}, {"surplus": True}]
    for number, user_attrs in enumerate(marks, start=len(TRIALS)):
        state = TrialState.FAIL if "surplus" in user_attrs else TrialState.COMPLETE
        value = None if state == TrialState.FAIL else float(number)
        params = {"model.dropout": 0.1, "model.d_model": 256}
        trial = create_trial(
            params=params, distributions=SPACE, value=value, state=state, user_attrs=user_attrs
        )
        study.add_trial(trial)
    rows = [cells(line) for line in study_py.trials_table(study).splitlines()[2:]]
    states = {row[0]: row[1] for row in rows}
    assert [states[n] for n in ("5", "6", "7", "0")] == [
        "complete (resumed 2×)", "complete (resumed)", "fail (surplus)", "complete",
    ]  # fmt: skip


def test_importance_puts_the_parameter_that_decides_the_value_first(sweep):
    text = study_py.importance_table(study_py.load_study(sweep))
    (first, first_value), (second, second_value) = (cells(line) for line in text.splitlines()[2:])
    assert first == "model.dropout" and float(first_value) > float(second_value)
    assert float(first_value) + float(second_value) == pytest.approx(1.0, abs=2e-3)


def test_the_plot_draws_the_trials_that_have_a_curve(sweep, tmp_path):
    out = tmp_path / "curves.png"
    drawn = study_py.plot_curves(study_py.load_study(sweep), sweep, out)
    assert drawn == [1, 0, 2]  # ranked; 3 and 4 left no curve
    assert out.read_bytes().startswith(b"\x89PNG")
    assert study_py.read_curve(sweep / "0" / "val_curve.csv") == ([1.5, 3.0], [2.0, 8.5])
