"""Early stopping: after `module.early_stopping_patience` validations without a better monitored
metric training ends, on every rank after the same validation, counted across a resume."""

import csv
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from helpers.ddp import ddp_env
from helpers.hydra_compose import ROOT, compose_train
from helpers.quick_toy_run import quick_toy_run
from transformer_nmt.train import train
from transformer_nmt.training.run.sweeps import optimized_metric

# Epochs of 3 updates, each ending in a validation (on one batch): validations at steps 3, 6...
# A learning rate of 0: the weights never change, so no validation betters the first.
FROZEN = [
    *quick_toy_run(max_steps=300),
    "+trainer.limit_train_batches=3",
    "module.lr_factor=0",
    "callbacks.checkpoints.every_minutes=null",
]


def validated_steps(run: Path) -> list[int]:
    """The step of each validation, from the run's val_curve.csv (appended to on resume)."""
    with (run / "val_curve.csv").open() as f:
        return [int(row["step"]) for row in csv.DictReader(f)]


def last_step(run: Path) -> int:
    path = run / "checkpoints" / "last.ckpt"
    return torch.load(path, map_location="cpu", weights_only=True)["global_step"]


@pytest.mark.slow
def test_a_run_stops_after_patience_validations_without_improvement(tmp_path):
    overrides = [*FROZEN, "module.early_stopping_patience=2"]
    cfg = compose_train(tmp_path, overrides)
    metrics = train(cfg)

    run = tmp_path / "run"
    assert validated_steps(run) == [3, 6, 9]  # the best, then 2 without a better one
    assert last_step(run) == 9
    # It ended as any run does, and reports its best.
    assert metrics["best/val/bleu"] == metrics["val/bleu"]
    assert optimized_metric(cfg, metrics) == metrics["best/val/bleu"]

    # The same command again: the run is over, and stops before its first update.
    train(compose_train(tmp_path, overrides))
    assert validated_steps(run) == [3, 6, 9] and last_step(run) == 9


@pytest.mark.slow
def test_the_count_without_improvement_goes_on_across_a_resume(tmp_path):
    patience = "module.early_stopping_patience=3"
    train(compose_train(tmp_path, [*FROZEN, patience, "trainer.max_steps=6"]))
    run = tmp_path / "run"
    assert validated_steps(run) == [3, 6]  # the best, then 1 without a better one

    train(compose_train(tmp_path, [*FROZEN, patience]))
    # 2 more: a count started afresh would stop after step 18.
    assert validated_steps(run) == [3, 6, 9, 12]
    assert last_step(run) == 12


@pytest.mark.slow
def test_two_gloo_ranks_stop_after_the_same_validation(tmp_path):
    command = [
        sys.executable, "train.py", *FROZEN, "module.early_stopping_patience=1",
        "trainer=ddp_cpu", "trainer.devices=2",
        f"paths.log_dir={tmp_path}/outputs", f"paths.cache_dir={tmp_path}/cache",
    ]  # fmt: skip
    subprocess.run(command, cwd=ROOT, env=ddp_env(), check=True, timeout=300, capture_output=True)

    (run,) = (tmp_path / "outputs").glob("*/runs/*")
    logs = [(run / name).read_text() for name in ("train.log", "train.rank1.log")]
    stops = [re.findall(r"every rank stops after step (\d+)", log) for log in logs]
    assert stops == [["6"], ["6"]]
    assert validated_steps(run) == [3, 6] and last_step(run) == 6
