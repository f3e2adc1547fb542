"""The paper's batch on any number of devices: accumulation derived from data.tokens_per_update."""

import logging

import pytest

from helpers.hydra_compose import compose_train
from transformer_nmt.training.batch_size import accumulate_grad_batches, updates_per_step
from transformer_nmt.training.config_checks import ConfigError, check_config


@pytest.mark.parametrize("devices, expected", [(1, 8), (4, 2), (8, 1)])
def test_wmt14_accumulates_to_the_papers_25k_tokens_on_1_4_and_8_devices(
    tmp_path, caplog, devices, expected
):
    overrides = ["trainer=ddp", f"trainer.devices={devices}", "data.max_tokens=3125"]
    cfg = compose_train(tmp_path, overrides)
    with caplog.at_level(logging.INFO):
        assert accumulate_grad_batches(cfg) == expected
    # 3125 tokens a device: every setting reaches exactly 25,000 tokens a side per update.
    assert expected * 3125 * devices == 25_000
    assert f"accumulate_grad_batches={expected}" in caplog.text


def test_nodes_multiply_devices_and_a_remainder_rounds_up(tmp_path):
    overrides = ["trainer.devices=2", "trainer.num_nodes=2", "data.max_tokens=3000"]
    cfg = compose_train(tmp_path, ["trainer=ddp", *overrides])
    assert accumulate_grad_batches(cfg) == 3  # 25000 / 12000 = 2.08: never below the paper's
    assert updates_per_step(25_000, 4096, devices=8, num_nodes=1) == 1


def test_gpu_ids_count_as_devices(tmp_path):
    paper = "data.max_tokens=3125"
    cfg = compose_train(tmp_path, ["trainer=ddp", "trainer.devices=[0,1,2,3]", paper])
    assert accumulate_grad_batches(cfg) == 2
    cfg = compose_train(tmp_path, ["trainer=ddp", "trainer.devices='0,1'", paper])
    assert accumulate_grad_batches(cfg) == 4


def test_without_tokens_per_update_the_trainer_setting_stands(tmp_path):
    cfg = compose_train(tmp_path, ["experiment=toy", "trainer.accumulate_grad_batches=3"])
    assert cfg.data.tokens_per_update is None
    assert accumulate_grad_batches(cfg) == 3


def test_both_settings_at_once_are_refused_naming_both(tmp_path):
    cfg = compose_train(
        tmp_path, ["logger=none", "trainer=cpu", "model=tiny", "trainer.accumulate_grad_batches=4"]
    )
    with pytest.raises(ConfigError) as info:
        check_config(cfg)
    assert "trainer.accumulate_grad_batches=4" in str(info.value)
    assert "data.tokens_per_update=25000" in str(info.value)


def test_tokens_per_update_must_be_positive(tmp_path):
    cfg = compose_train(tmp_path, ["experiment=toy", "data.tokens_per_update=0"])
    with pytest.raises(ConfigError, match="data.tokens_per_update=0 must be a positive"):
        check_config(cfg)
