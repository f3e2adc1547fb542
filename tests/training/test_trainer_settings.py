"""The `trainer` settings: the validation interval counts updates, at update boundaries."""

import json

import pytest

from helpers.hydra_compose import compose_train
from helpers.validation_steps import record_validations
from transformer_nmt.train import train
from transformer_nmt.training.plan.config_checks import ConfigError
from transformer_nmt.training.plan.run_plan import check_config
from transformer_nmt.training.plan.trainer_settings import val_check_batches

# 13 batches an epoch, validation on one batch.
SMALL = [
    "experiment=toy", "logger=none", "data.corpus.num_train=300", "data.max_tokens=192",
    "trainer.max_epochs=-1", "+trainer.num_sanity_val_steps=0", "+trainer.limit_val_batches=1",
    "trainer.precision=32-true", "module.max_len_b=5", "~callbacks.attention_maps",
    "~callbacks.translation_table",
]  # fmt: skip


@pytest.mark.slow
def test_validation_every_n_updates_comes_at_update_ends_under_accumulation(tmp_path):
    # Updates of 2 batches: 7 an epoch, the last of 1 batch. Every 2 updates from each epoch's
    # start: after updates 2, 4 and 6, then 2 updates into the next epoch.
    path = tmp_path / "validations.json"
    overrides = [
        *SMALL, "trainer.accumulate_grad_batches=2", "trainer.val_check_interval=2",
        "trainer.max_steps=10", *record_validations(path),
    ]  # fmt: skip
    train(compose_train(tmp_path, overrides))
    assert json.loads(path.read_text()) == [[2, 4], [4, 8], [6, 12], [9, 4]]  # [update, batch]


@pytest.mark.parametrize("interval", ["0", "-3", "1.5", "0.0", "true"])
def test_a_validation_interval_neither_updates_nor_a_share_of_an_epoch_is_refused(
    tmp_path, interval
):
    cfg = compose_train(tmp_path, [*SMALL, f"trainer.val_check_interval={interval}"])
    with pytest.raises(ConfigError, match=r"trainer.val_check_interval=.*integer >= 1"):
        check_config(cfg)


def test_updates_become_batches_and_shares_and_times_pass_unchanged():
    assert val_check_batches(1000, 4, every_n_epochs=1) == 4000
    assert val_check_batches(1000, 1, every_n_epochs=None) == 1000
    assert val_check_batches(0.25, 4, every_n_epochs=1) == 0.25
    assert val_check_batches("00:01:00:00", 4, every_n_epochs=1) == "00:01:00:00"


def test_updates_counted_over_epochs_under_accumulation_are_refused():
    with pytest.raises(ValueError, match="trainer.check_val_every_n_epoch=1"):
        val_check_batches(1000, 2, every_n_epochs=None)


def test_the_wmt_recipe_validates_every_2000_updates(tmp_path):
    cfg = compose_train(tmp_path, ["experiment=wmt14_en_de"])
    check_config(cfg)
    interval, every = cfg.trainer.val_check_interval, cfg.trainer.check_val_every_n_epoch
    assert val_check_batches(interval, 8, every) == 16_000  # one device accumulates 8 batches
