import csv

import lightning.pytorch.callbacks.timer
import pytest
from hydra.errors import InstantiationException
from omegaconf import open_dict

from helpers.csv_metrics import logged
from helpers.hydra_compose import compose_train
from helpers.step_clock import StepClock, tick
from transformer_nmt.model import Transformer
from transformer_nmt.model.interface import SettableDropout
from transformer_nmt.train import train
from transformer_nmt.training.step import module

# The toy run (its tiny model has no dropout) with dropout 0.3 late, on small batches: the
# switch follows the clock and the validations, not the batch size.
TOY = [
    "experiment=toy", "logger=csv", "trainer.log_every_n_steps=1", "trainer.max_epochs=-1",
    "data.max_tokens=256", "callbacks=late_dropout", "callbacks.late_dropout.p=0.3",
]  # fmt: skip
# A 100-second budget, 2 seconds an update on a clock that moves with the batches, and the
# switch 30 seconds in; no validation.
LATE = [
    *TOY, "trainer.max_steps=-1", "trainer.max_time=00:00:01:40",
    "callbacks.late_dropout.after_minutes=0.5",
    "+trainer.limit_val_batches=0", "+trainer.num_sanity_val_steps=0", *tick(2.0),
]  # fmt: skip
# 30 updates at a learning rate of 0, so every validation (each 5 updates) finds the same loss:
# the first sets the lowest, the next two find none lower, and patience 2 switches after them.
# Without attention maps: drawing them would take most of the run's time.
PLATEAU = [
    *TOY, "trainer.max_steps=30", "module.lr_factor=0", "trainer.val_check_interval=5",
    "~callbacks.attention_maps",
    "++trainer.check_val_every_n_epoch=null", "+trainer.limit_val_batches=2",
    "callbacks.late_dropout.after_minutes=null", "callbacks.late_dropout.patience=2",
]  # fmt: skip


@pytest.fixture(autouse=True)
def restore_the_clock(monkeypatch):
    """The runs' `Tick` swaps the `Timer`'s clock; put it back whatever the run raised."""
    monkeypatch.setattr(lightning.pytorch.callbacks.timer, "time", StepClock)


def late_config(tmp_path, overrides=(), base=LATE):
    """The run's config, as `train` takes it."""
    cfg = compose_train(tmp_path, [*base, *overrides])
    with open_dict(cfg):
        del cfg.hydra
    return cfg


def run(tmp_path, overrides=(), base=LATE):
    """The rate each update trained with (the first dropout module's), by update."""
    train(late_config(tmp_path, overrides, base))
    return logged_rounded(tmp_path, "train/dropout")


def logged_rounded(tmp_path, metric):
    """A run's logged `metric`, by update: logged as float32, 0.3 reads 0.30000001."""
    return {step: round(value, 6) for step, value in logged(tmp_path / "run", metric).items()}


@pytest.mark.slow
def test_dropout_rises_once_the_clock_passes_the_switch(tmp_path):
    rates = run(tmp_path)
    # Row k is the update made with k updates done; its batch checks the clock at 2k seconds
    # (the tick comes after the check), so the switch at 30 s falls on row 15.
    assert rates == {step: 0.0 if step < 15 else 0.3 for step in range(len(rates))}


@pytest.mark.slow
def test_r_drop_turns_on_once_the_clock_passes_the_switch(tmp_path, monkeypatch):
    doubled_batches, doubled = [], module.doubled

    def counted(batch):
        doubled_batches.append(batch)
        return doubled(batch)

    monkeypatch.setattr(module, "doubled", counted)
    rates = run(tmp_path, ["callbacks.late_dropout.p=null", "callbacks.late_dropout.rdrop_alpha=2"])
    alphas = logged_rounded(tmp_path, "train/rdrop_alpha")
    assert alphas == {step: 0.0 if step < 15 else 2.0 for step in range(len(alphas))}
    assert len(doubled_batches) == len(alphas) - 15  # only the updates after the switch
    assert set(rates.values()) == {0.0}  # p=null: the model's own rate throughout


@pytest.mark.slow
def test_a_run_resumed_after_the_switch_keeps_the_raised_rate_and_r_drop(tmp_path):
    every_10 = [
        "callbacks.checkpoints.every_n_steps=10",
        "callbacks.checkpoints.optimizer_state=true",  # to resume from step20.ckpt
        "callbacks.late_dropout.rdrop_alpha=2",
    ]
    run(tmp_path / "whole", every_10)
    checkpoint = tmp_path / "whole/run/checkpoints/step20.ckpt"
    rates = run(tmp_path / "resumed", [*every_10, f"ckpt_path={checkpoint}"])
    assert min(rates) == 20 and set(rates.values()) == {0.3}
    assert set(logged_rounded(tmp_path / "resumed", "train/rdrop_alpha").values()) == {2.0}


@pytest.mark.slow
def test_dropout_rises_after_validations_without_a_lower_loss(tmp_path):
    rates = run(tmp_path, base=PLATEAU)
    (curve,) = (tmp_path / "run").glob("val_curve.csv")
    assert [row["step"] for row in csv.DictReader(curve.open())][:3] == ["5", "10", "15"]
    assert rates == {step: 0.0 if step < 15 else 0.3 for step in range(30)}


def test_late_dropout_needs_a_time_budget(tmp_path):
    cfg = late_config(tmp_path, ["trainer.max_time=null"])
    with pytest.raises(ValueError, match="needs a time budget: set trainer.max_time"):
        train(cfg)


def test_late_r_drop_refuses_a_module_that_trains_with_r_drop_from_the_start(tmp_path):
    cfg = late_config(tmp_path, ["callbacks.late_dropout.rdrop_alpha=2", "module.rdrop_alpha=5"])
    with pytest.raises(ValueError, match="set module.rdrop_alpha=0 for late R-Drop"):
        train(cfg)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["callbacks.late_dropout.patience=2"], "set one of after_minutes .* not both"),
        (["callbacks.late_dropout.after_minutes=null"], "not neither"),
        (["callbacks.late_dropout.p=1.0"], "give a rate in"),
        (["callbacks.late_dropout.p=null"], "with neither it would change nothing"),
        (["callbacks.late_dropout.rdrop_alpha=-1"], "rdrop_alpha=-1.*give 0 or more"),
    ],
)
def test_late_dropout_refuses_unclear_settings(tmp_path, overrides, message):
    cfg = late_config(tmp_path, overrides)
    with pytest.raises(InstantiationException, match=message):  # Hydra's, around the ValueError
        train(cfg)


def test_a_new_rate_needs_a_model_that_offers_it_and_the_rnn_does_not(tmp_path):
    transformer = Transformer(vocab_size=48, pad_id=0, N=1, d_model=16, d_ff=32, h=2, dropout=0.1)
    assert isinstance(transformer, SettableDropout) and transformer.dropout_rate == 0.1
    transformer.dropout_rate = 0.3
    assert {m.p for m in transformer.modules() if hasattr(m, "p")} == {0.3}
    rnn = ["model=rnn_attention", "model.embed_dim=16", "model.hidden_size=16"]
    with pytest.raises(ValueError, match="which the rnn_attention model does not offer"):
        train(late_config(tmp_path, rnn))
