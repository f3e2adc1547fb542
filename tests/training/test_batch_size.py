"""The paper's batch on any number of devices: accumulation derived from data.tokens_per_update."""

import json
import logging

import pytest
import torch
from omegaconf import OmegaConf

from helpers.hydra_compose import compose_train
from helpers.trainer_record import record_trainer
from transformer_nmt.data.token_budget import largest_budget
from transformer_nmt.train import train
from transformer_nmt.training.plan.batch_size import (
    UpdatePlan,
    device_count,
    per_rank_cap,
    plan_update,
    updates_per_step,
)
from transformer_nmt.training.plan.config_checks import ConfigError
from transformer_nmt.training.plan.resume import ResumePoint
from transformer_nmt.training.plan.run_plan import check_config, plan_run, planned_update


def planned(cfg) -> tuple[int, int | None, int | None]:
    """The plan's (accumulation, max_tokens, tokens per update) for a fresh run of `cfg`, on the
    devices it asks for, whether this machine has them or not."""
    world_size = device_count(cfg.trainer) * cfg.trainer.get("num_nodes", 1)
    return planned_update(cfg, world_size, ResumePoint(None))


@pytest.mark.parametrize("devices, expected", [(1, 8), (4, 2), (8, 1)])
def test_wmt14_accumulates_to_the_papers_25k_tokens_on_1_4_and_8_devices(
    tmp_path, caplog, devices, expected
):
    overrides = ["trainer=ddp", f"trainer.devices={devices}", "data.max_tokens=3125"]
    cfg = compose_train(tmp_path, overrides)
    with caplog.at_level(logging.INFO):
        assert planned(cfg)[0] == expected
    # 3125 tokens a device: every setting reaches exactly 25,000 tokens a side per update.
    assert expected * 3125 * devices == 25_000
    assert f"accumulate_grad_batches={expected}" in caplog.text


def test_nodes_multiply_devices_and_a_remainder_rounds_up(tmp_path):
    overrides = ["trainer.devices=2", "trainer.num_nodes=2", "data.max_tokens=3000"]
    cfg = compose_train(tmp_path, ["trainer=ddp", *overrides])
    # 25000 / 12000 = 2.08; batches shrink from 3000 to the least that still reaches 25,000:
    # never below the paper's.
    assert planned(cfg) == (3, 2084, 25_008)
    assert cfg.data.max_tokens == 3000  # the plan holds what is derived, the config what was set
    assert updates_per_step(25_000, 4096, devices=8, num_nodes=1) == 1


def test_gpu_ids_count_as_devices(tmp_path):
    paper = "data.max_tokens=3125"
    cfg = compose_train(tmp_path, ["trainer=ddp", "trainer.devices=[0,1,2,3]", paper])
    assert planned(cfg)[0] == 2
    cfg = compose_train(tmp_path, ["trainer=ddp", "trainer.devices='0,1'", paper])
    assert planned(cfg)[0] == 4


def test_without_tokens_per_update_the_trainer_setting_stands(tmp_path):
    cfg = compose_train(tmp_path, ["experiment=toy", "trainer.accumulate_grad_batches=3"])
    assert cfg.data.tokens_per_update is None
    assert plan_run(cfg).accumulate_grad_batches == 3
    assert cfg.trainer.accumulate_grad_batches == 3


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


@pytest.mark.parametrize(
    "devices, nodes", [(1, 1), (3, 1), (4, 1), (6, 1), (7, 1), (8, 1), (16, 1), (8, 2)]
)
def test_tokens_per_update_land_within_5_percent_on_any_device_count(devices, nodes):
    """Rounding the accumulation up alone overshoots 25k by 50 % on 6 devices, 100 % on 16."""
    plan = plan_update(25_000, max_tokens=3125, world_size=devices * nodes)
    assert 25_000 <= plan.tokens_per_update <= 25_000 * 1.05
    assert (
        plan.tokens_per_update == plan.accumulate_grad_batches * plan.max_tokens * devices * nodes
    )
    assert plan.max_tokens <= 3125  # never more than fits the device


def test_the_paper_setting_is_kept_where_it_lands_exactly():
    for devices, accumulate in [(1, 8), (2, 4), (4, 2), (8, 1)]:
        assert plan_update(25_000, 3125, devices) == UpdatePlan(accumulate, 3125, 25_000)


WMT14_LONGEST = 257  # data.max_len=256 plus EOS


@pytest.mark.parametrize("rows_that_fit", [None, 40, 12, 3, 1])
def test_the_auto_budget_on_1_to_64_ranks_reaches_the_target_without_needless_accumulation(
    rows_that_fit,
):
    """data.max_tokens=auto at 25k tokens per update, memory holding the worst batches of
    `rows_that_fit` longest pairs (None: any budget), on every world size from 1 to 64."""
    for world_size in range(1, 65):
        cap = per_rank_cap(25_000, world_size, WMT14_LONGEST)
        fits = (
            (lambda b: True)
            if rows_that_fit is None
            else lambda b: b // WMT14_LONGEST <= rows_that_fit
        )
        measured = largest_budget(fits, WMT14_LONGEST, cap)
        plan = plan_update(25_000, measured, world_size, WMT14_LONGEST)
        case = f"{world_size} ranks, {measured} tokens measured: {plan}"
        assert WMT14_LONGEST <= plan.max_tokens <= measured, case
        overshoot = plan.tokens_per_update - 25_000
        if measured > WMT14_LONGEST:
            assert 0 <= overshoot < plan.max_tokens, case  # within one batch of the target
        else:  # no batch smaller than one longest pair: the least step is one pair a rank
            assert 0 <= overshoot < world_size * WMT14_LONGEST, case
        # The fewest batches per update that memory allows: one wherever one step fits.
        assert plan.accumulate_grad_batches == -(-25_000 // (measured * world_size)), case
        if fits(-(-25_000 // world_size)):
            assert plan.accumulate_grad_batches == 1, case


def test_the_cap_rounds_up_and_never_falls_below_the_longest_pair():
    assert per_rank_cap(25_000, 3, 257) == 8334  # 8333 x 3 fell one token short: 2 batches
    assert per_rank_cap(25_000, 64, 257) == 391
    assert per_rank_cap(25_000, 128, 257) == 257  # 196 could not hold the longest pair
    assert plan_update(25_000, 390, 64, longest=257).max_tokens == 257  # not 196


@pytest.mark.slow
def test_the_logged_plan_holds_what_the_trainer_uses(tmp_path):
    """CSV hparams and every checkpoint hold the plan: the derived accumulation and budget."""
    overrides = [
        "experiment=toy", "logger=csv", "data.corpus.num_train=200", "data.tokens_per_update=1500",
        "trainer.max_epochs=-1", "trainer.max_steps=2", "+trainer.num_sanity_val_steps=0",
        "+trainer.limit_val_batches=0", *record_trainer(tmp_path / "trainer.json"),
    ]  # fmt: skip
    train(compose_train(tmp_path, overrides))
    used = json.loads((tmp_path / "trainer.json").read_text())
    assert (used["accumulate_grad_batches"], used["max_tokens"]) == (2, 750)  # 1024 shrunk
    run = tmp_path / "run"
    logged = OmegaConf.load(run / "csv" / "version_0" / "hparams.yaml").run_plan
    saved = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["run_plan"]
    for plan in (logged, saved):
        assert plan["accumulate_grad_batches"] == used["accumulate_grad_batches"]
        assert plan["max_tokens"] == used["max_tokens"]
        assert plan["tokens_per_update"] == 2 * 750 * used["world_size"]
    assert OmegaConf.load(run / ".hydra" / "config.yaml").data.max_tokens == 1024  # as set
