import csv
import logging
import re

import pytest

from helpers.hydra_compose import compose_train
from transformer_nmt.train import train
from transformer_nmt.training.callbacks import progress_log
from transformer_nmt.training.callbacks.val_curve import ValCurve

# The toy task validating every 2 steps on 8 sentences; the sanity check runs (and writes no row).
TOY = [
    "experiment=toy", "logger=none", "data.corpus.num_train=300", "data.corpus.num_val=8",
    "data.max_tokens=192", "trainer.max_epochs=-1", "trainer.val_check_interval=2",
    "~callbacks.attention_maps", "~callbacks.translation_table",
    "callbacks.checkpoints.every_minutes=null",
]  # fmt: skip


def read(path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_a_row_per_validation_with_the_logged_metrics_and_a_resumed_run_appends(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger=progress_log.__name__)
    first = train(
        compose_train(
            tmp_path,
            [*TOY, "trainer.max_steps=4", "trainer.log_every_n_steps=1"]
            + ["callbacks.progress_log.every_n_steps=3"],
        )
    )
    run = tmp_path / "run"
    resumed = train(
        compose_train(
            tmp_path,
            [*TOY, "trainer.max_steps=6", f"ckpt_path={run}/checkpoints/last.ckpt"],
        )
    )

    path = run / "val_curve.csv"
    assert path.read_text().splitlines()[0] == "step,epoch,minutes,val_seconds,val/bleu,val/loss"
    rows = read(path)
    assert [int(r["step"]) for r in rows] == [2, 4, 6]
    # 13 steps an epoch: the resumed run goes on with the epoch the first one stopped in.
    assert [r["epoch"] for r in rows] == ["0", "0", "0"]
    for row, metrics in ((rows[1], first), (rows[2], resumed)):
        assert float(row["val/bleu"]) == pytest.approx(metrics["val/bleu"], abs=1e-4)
        assert float(row["val/loss"]) == pytest.approx(metrics["val/loss"], abs=1e-4)
    # The log says the same, without a terminal: a line at update 3 of 4 and one a validation.
    lines = [r.getMessage() for r in caplog.records if r.name == progress_log.__name__]
    assert re.fullmatch(
        r"Training: update 3/4 \(75%\), epoch 0, loss \d+\.\d{3}, tokens/s [\d,]+, "
        r"lr [\d.e+-]+, \d+\.\d min, ~\d+ min left at this pace",
        lines[1],
    ), lines
    shown = [line for line in lines if line.startswith("Validation at update ")]
    assert [line.split(":")[0] for line in shown] == [
        f"Validation at update {s}" for s in (2, 4, 6)
    ]
    for line, row in zip(shown, rows, strict=True):
        values = dict(re.findall(r"(val/\w+) ([\d.e+-]+)", line))
        assert float(values["val/bleu"]) == pytest.approx(float(row["val/bleu"]), abs=1e-2)
        assert float(values["val/loss"]) == pytest.approx(float(row["val/loss"]), rel=1e-3)
    minutes = [float(r["minutes"]) for r in rows]
    # Monotone, the resumed run counting on (a fast toy validation may round to 0.00 minutes;
    # the next test pins the carried value without a clock).
    assert 0 <= minutes[0] <= minutes[1] <= minutes[2]
    # Each validation took some time, and none more than the run had taken by then.
    seconds = [float(r["val_seconds"]) for r in rows]
    assert all(0 <= s <= 60 * m + 0.5 for s, m in zip(seconds, minutes, strict=True))


def test_minutes_go_on_from_the_checkpoint_and_a_missing_metric_is_left_empty(tmp_path):
    class Trainer:  # what the callback reads of Lightning's
        sanity_checking, is_global_zero = False, True
        global_step, current_epoch = 7, 1
        callback_metrics = {"val/bleu": 12.3456789}
        default_root_dir = str(tmp_path)

    curve = ValCurve()
    curve.load_state_dict({"minutes": 30.0})
    curve.on_fit_start(Trainer(), None)
    curve.on_validation_start(Trainer(), None)
    curve.on_validation_end(Trainer(), None)
    Trainer.sanity_checking = True
    curve.on_validation_end(Trainer(), None)

    (row,) = read(tmp_path / "val_curve.csv")
    assert row["step"] == "7" and row["epoch"] == "1" and row["val/bleu"] == "12.3457"
    assert row["val/loss"] == ""
    assert 0.0 <= float(row["val_seconds"]) < 30.0
    assert 30.0 <= float(row["minutes"]) < 30.5
    assert 30.0 <= curve.state_dict()["minutes"] < 30.5


def test_a_file_written_before_val_seconds_existed_keeps_its_columns(tmp_path):
    class Trainer:
        sanity_checking, is_global_zero = False, True
        global_step, current_epoch = 9, 2
        callback_metrics = {"val/bleu": 20.0, "val/loss": 3.0}
        default_root_dir = str(tmp_path)

    path = tmp_path / "val_curve.csv"
    path.write_text("step,epoch,minutes,val/bleu,val/loss\n4,1,5.00,10.0000,4.0000\n")
    curve = ValCurve()
    curve.on_fit_start(Trainer(), None)
    curve.on_validation_start(Trainer(), None)
    curve.on_validation_end(Trainer(), None)

    lines = path.read_text().splitlines()
    assert lines[:2] == ["step,epoch,minutes,val/bleu,val/loss", "4,1,5.00,10.0000,4.0000"]
    assert [(r["step"], r["val/bleu"], r["val/loss"]) for r in read(path)] == [
        ("4", "10.0000", "4.0000"),
        ("9", "20.0000", "3.0000"),
    ]
