import csv

import lightning.pytorch.callbacks.timer
import pytest
from omegaconf import open_dict

from hydra_compose import compose_train
from step_clock import StepClock, tick
from transformer_nmt.train import train

# The toy run (its tiny model has no dropout) with a 100-second budget, 2 seconds an update on a
# clock that moves with the batches, and dropout 0.3 from 30 seconds in.
LATE = [
    "experiment=toy", "logger=csv", "trainer.log_every_n_steps=1",
    "trainer.max_epochs=-1", "trainer.max_steps=-1", "trainer.max_time=00:00:01:40",
    "callbacks=late_dropout", "callbacks.late_dropout.after_minutes=0.5",
    "callbacks.late_dropout.p=0.3",
    "+trainer.limit_val_batches=0", "+trainer.num_sanity_val_steps=0", *tick(2.0),
]  # fmt: skip


@pytest.fixture(autouse=True)
def restore_the_clock(monkeypatch):
    """The runs' `Tick` swaps the `Timer`'s clock; put it back whatever the run raised."""
    monkeypatch.setattr(lightning.pytorch.callbacks.timer, "time", StepClock)


def run(tmp_path, overrides=()):
    """The rate each update trained with (the first dropout module's), by update."""
    cfg = compose_train(tmp_path, [*LATE, *overrides])
    with open_dict(cfg):
        del cfg.hydra
    train(cfg)
    (metrics,) = (tmp_path / "run").glob("csv/version_*/metrics.csv")
    rates = {  # logged as float32: 0.3 reads 0.30000001
        int(r["step"]): round(float(r["train/dropout"]), 6)
        for r in csv.DictReader(metrics.open())
        if r["train/dropout"]
    }
    return rates


@pytest.mark.slow
def test_dropout_rises_once_the_clock_passes_the_switch(tmp_path):
    rates = run(tmp_path)
    # Row k is the update made with k updates done; its batch checks the clock at 2k seconds
    # (the tick comes after the check), so the switch at 30 s falls on row 15.
    assert rates == {step: 0.0 if step < 15 else 0.3 for step in range(len(rates))}


@pytest.mark.slow
def test_a_run_resumed_after_the_switch_keeps_the_raised_rate(tmp_path):
    every_10 = [
        "callbacks.periodic_checkpoint.train_time_interval=null",
        "+callbacks.periodic_checkpoint.every_n_train_steps=10",
    ]
    run(tmp_path / "whole", every_10)
    checkpoint = tmp_path / "whole/run/checkpoints/step20.ckpt"
    rates = run(tmp_path / "resumed", [f"ckpt_path={checkpoint}"])
    assert min(rates) == 20 and set(rates.values()) == {0.3}


def test_late_dropout_needs_a_time_budget(tmp_path):
    cfg = compose_train(tmp_path, [*LATE, "trainer.max_time=null"])
    with open_dict(cfg):
        del cfg.hydra
    with pytest.raises(ValueError, match="needs a time budget: set trainer.max_time"):
        train(cfg)
