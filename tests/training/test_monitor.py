"""`module.monitor`: the metric the checkpoint policy keeps the best by, in its own direction, and
a sweep optimises; a resume that would change it is refused."""

import csv
import subprocess

import pytest

from helpers.hydra_compose import ROOT, compose_train
from helpers.quick_toy_run import quick_toy_run
from helpers.sweep_runs import TOY_SPACE, train_command
from transformer_nmt.checkpoint import best_checkpoints, best_name
from transformer_nmt.train import train
from transformer_nmt.training.callbacks.checkpoint_policy import CheckpointPolicy
from transformer_nmt.training.plan.config_checks import ConfigError
from transformer_nmt.training.run.sweeps import optimized_metric, study_direction
from transformer_nmt.training.step.val_metrics import metric_problems, mode

# Epochs of 3 updates, each ending in a validation (on one batch): validations at steps 3, 6...
EPOCHS_OF_3 = [*quick_toy_run(max_steps=300), "+trainer.limit_train_batches=3"]


@pytest.mark.parametrize(
    ("monitor", "better"),
    [("val/bleu", "max"), ("val/chrf++", "max"), ("val/ter", "min"), ("val/loss", "min"),
     ("val/bleu/de-fr", "max"), ("val/ter/de-fr", "min"), ("train/loss", "min")],
)  # fmt: skip
def test_each_metric_knows_which_way_is_better(monitor, better):
    assert mode(monitor) == better
    assert CheckpointPolicy("unused", monitor=monitor).mode == better


def test_a_metric_without_a_known_direction_needs_one_given():
    assert mode("train/tokens_per_sec") is None
    with pytest.raises(ValueError, match="mode=None for monitor=train/tokens_per_sec"):
        CheckpointPolicy("unused", monitor="train/tokens_per_sec")
    assert CheckpointPolicy("unused", monitor="train/tokens_per_sec", mode="max").mode == "max"


def test_a_sweep_takes_the_metric_s_direction_and_refuses_the_contrary():
    assert study_direction("val/ter", None) == "minimize"
    assert study_direction("val/bleu", None) == "maximize"
    assert study_direction("val/loss", "minimize") == "minimize"
    with pytest.raises(ValueError, match="optimized_direction=maximize contradicts.*val/ter"):
        study_direction("val/ter", "maximize")
    with pytest.raises(ValueError, match="give optimized_direction=maximize or minimize"):
        study_direction("train/tokens_per_sec", None)
    assert study_direction("train/tokens_per_sec", "maximize") == "maximize"


@pytest.mark.parametrize(
    ("val_metrics", "monitor", "directions", "problem"),
    [
        (["bleu", "meteor"], "bleu", None, "module.val_metrics names 'meteor'"),
        (["bleu"], "comet", None, "module.monitor=comet: monitor one of"),
        (["bleu"], "val/ter", None, "module.monitor=val/ter: without val/"),
        (["bleu"], "bleu/de-fr", None, "names a direction, but this run translates one"),
        (["bleu"], "bleu/de-it", ["de-fr", "fr-de"], "this run's directions are de-fr, fr-de"),
        (["bleu"], "loss/de-fr", ["de-fr"], "loss is of all directions"),
    ],
)
def test_unknown_metrics_and_directions_are_refused_naming_the_option(
    val_metrics, monitor, directions, problem
):
    (found,) = metric_problems(val_metrics, monitor, directions)
    assert problem in found
    assert metric_problems(["bleu", "chrf++", "ter"], "bleu/de-fr", ["de-fr"]) == []


def test_best_checkpoint_names_carry_the_metric_and_direction(tmp_path):
    names = [best_name(m, 9, 1.0) for m in ("val/bleu", "val/chrf++", "val/ter/de-fr")]
    assert names == ["step9-bleu1.00.ckpt", "step9-chrf++1.00.ckpt", "step9-ter-de-fr1.00.ckpt"]
    for name in [*names, "step8-de-fr2.00.ckpt"]:  # the last: a direction's, named before
        (tmp_path / name).touch()
    assert [p.name for p in best_checkpoints(tmp_path, "val/ter/de-fr")] == [
        "step8-de-fr2.00.ckpt",
        "step9-ter-de-fr1.00.ckpt",
    ]
    assert [p.name for p in best_checkpoints(tmp_path, "val/chrf++")] == [names[1]]


@pytest.mark.slow
def test_a_run_monitoring_ter_keeps_its_lowest_and_reports_it_to_the_sweeper(tmp_path):
    overrides = [
        *EPOCHS_OF_3,
        "trainer.max_steps=12",
        "module.val_metrics=[chrf++]",
        "callbacks.val_curve.metrics=[val/ter]",
    ]
    cfg = compose_train(tmp_path, [*overrides, "module.monitor=ter"])
    metrics = train(cfg)

    run = tmp_path / "run"
    with (run / "val_curve.csv").open() as f:
        ter = {int(row["step"]): float(row["val/ter"]) for row in csv.DictReader(f)}
    assert sorted(ter) == [3, 6, 9, 12] and len(set(ter.values())) > 1
    assert "val/chrf++" in metrics and "val/bleu" not in metrics  # only what was asked for
    lowest = min(ter.values())
    (best,) = (run / "checkpoints").glob("step*-ter*.ckpt")
    first_lowest = min(step for step, value in ter.items() if value == lowest)
    assert best.name == best_name("val/ter", first_lowest, lowest)
    assert metrics["best/val/ter"] == pytest.approx(lowest, abs=1e-4)
    assert cfg.optimized_metric == "val/ter"
    assert optimized_metric(cfg, metrics) == metrics["best/val/ter"]

    # Resumed in its folder by another metric, its best file would be left behind: refused.
    again = compose_train(tmp_path, [*overrides, "trainer.max_steps=15", "module.monitor=chrf++"])
    with pytest.raises(ConfigError, match="kept its best by val/ter, this config by val/chrf"):
        train(again)


def test_a_search_whose_direction_contradicts_its_metric_is_refused_before_any_trial(tmp_path):
    overrides = [
        "hparams_search=multi30k_de_en",
        *TOY_SPACE,
        "module.monitor=ter",
        "optimized_direction=maximize",
    ]
    done = subprocess.run(
        train_command(tmp_path, overrides), cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode != 0
    assert "optimized_direction=maximize contradicts optimized_metric=val/ter" in done.stderr
    assert not list(tmp_path.glob("**/checkpoints"))
