import subprocess
import sys

import lightning.pytorch.callbacks.timer
import pytest
from omegaconf import open_dict

from helpers.csv_metrics import logged
from helpers.ddp import assert_same_weights, ddp_env, weights_callback
from helpers.hydra_compose import ROOT, compose_train
from helpers.step_clock import StepClock, tick
from transformer_nmt.train import train
from transformer_nmt.training.plan.config_checks import ConfigError
from transformer_nmt.training.plan.run_plan import check_config
from transformer_nmt.training.step.lr_schedule import inverse_sqrt_warmup

# The toy run with a 100-second budget whose last 30 seconds cool down, on a clock that moves
# with the batches (no validation: only training spends the budget); small batches, as the plan
# counts updates, not tokens.
TIMED = [
    "experiment=toy", "logger=csv", "trainer.log_every_n_steps=1", "data.max_tokens=256",
    "trainer.max_epochs=-1", "trainer.max_steps=-1", "trainer.max_time=00:00:01:40",
    "callbacks.timed_cooldown.minutes=0.5",
    "+trainer.limit_val_batches=0", "+trainer.num_sanity_val_steps=0",
]  # fmt: skip


@pytest.fixture(autouse=True)
def restore_the_clock(monkeypatch):
    """The runs' `Tick` swaps the `Timer`'s clock; put it back whatever the run raised."""
    monkeypatch.setattr(lightning.pytorch.callbacks.timer, "time", StepClock)


def run(tmp_path, overrides):
    cfg = compose_train(tmp_path, [*TIMED, *overrides])
    with open_dict(cfg):
        del cfg.hydra  # the CSV logger records the resolved config, but no sweep runs here
    train(cfg)
    return logged(tmp_path / "run", "train/lr")


def paper(update):
    return inverse_sqrt_warmup(update, 64, 50, factor=0.2)  # the toy's model and module


@pytest.mark.slow
@pytest.mark.parametrize(
    "clock, start, last",
    [
        (dict(seconds=2.0), 35, 50),  # 30 s are left after update 35, and hold 15 more
        # A slow start: 70 s for 30 updates, but the last 30 s held 15, as the next 30 s will.
        (dict(seconds=2.0, first_extra=10.0), 30, 45),
        # 1 s an update, then 3 s from update 36: 29 s are left after update 47, and the last
        # 30 s held 10 updates (37 to 47), so 9 more, ending at 98 s. The whole run's pace (47 in
        # 71 s) would plan 19, and the budget would end the run at update 56 with the rate at half.
        (dict(seconds=1.0, later_from=35, later_seconds=3.0), 47, 56),
    ],
)
def test_the_rate_falls_to_zero_over_the_budgets_last_minutes(tmp_path, clock, start, last):
    rates = run(tmp_path, tick(**clock))
    assert max(rates) == last - 1  # the last update is the predicted one
    for step, lr in rates.items():  # `step` updates done: this is update step + 1's rate
        expected = paper(step + 1) * min(1.0, (last - step) / (last - start))
        assert lr == pytest.approx(expected, rel=1e-6), step
    assert rates[last - 1] == pytest.approx(paper(last) / (last - start), rel=1e-6)


@pytest.mark.slow
def test_a_run_resumed_inside_the_cooldown_finishes_it_as_planned(tmp_path):
    every_10 = [
        "callbacks.checkpoints.every_n_steps=10",
        "callbacks.checkpoints.optimizer_state=true",  # resumed from below
    ]
    whole = run(tmp_path / "whole", [*tick(2.0), *every_10])
    checkpoint = tmp_path / "whole/run/checkpoints/step40.ckpt"  # 5 updates into the cool-down

    resumed = run(tmp_path / "resumed", [*tick(2.0), f"ckpt_path={checkpoint}"])
    assert sorted(resumed) == list(range(40, 50))
    assert resumed == pytest.approx({step: whole[step] for step in range(40, 50)}, rel=1e-6)


@pytest.mark.slow
def test_ddp_ranks_cool_down_alike_on_rank_zeros_clock(tmp_path):
    # Rank 1's clock runs 1.5 times as fast: on its own it would start earlier and stop sooner.
    subprocess.run(
        [
            sys.executable, "train.py", *TIMED, *tick(2.0, skew=0.5),
            "trainer=ddp_cpu", "trainer.devices=2",
            f"paths.log_dir={tmp_path}/outputs", f"paths.cache_dir={tmp_path}/cache",
            *weights_callback(tmp_path / "weights"),
        ],
        cwd=ROOT, env=ddp_env(), check=True, timeout=300, capture_output=True,
    )  # fmt: skip

    assert_same_weights(tmp_path / "weights")  # every update's rate was the same on both
    (run_dir,) = (tmp_path / "outputs").glob("toy/runs/*")
    rates = logged(run_dir, "train/lr")
    assert max(rates) == 49  # rank zero's plan: 15 updates after update 35
    assert rates[49] == pytest.approx(paper(50) / 15, rel=1e-6)


def test_a_timed_cooldown_needs_a_time_budget(tmp_path):
    message = "needs a positive number of minutes and trainer.max_time"
    with pytest.raises(ConfigError, match=message):
        check_config(compose_train(tmp_path, [*TIMED, "trainer.max_time=null"]))
    # Beside a step cool-down it is the time budget's: whichever budget ends first cools down.
    check_config(
        compose_train(tmp_path, [*TIMED, "trainer.max_steps=100", "module.cooldown_steps=10"])
    )


@pytest.mark.slow
def test_with_both_budgets_a_step_budget_ending_first_ends_the_run_cooled_down(tmp_path):
    """The time budget would cool down over updates 36 to 50; 44 updates end the run first, with
    the step cool-down's updates 35 to 44 (the time-first case is the tests above, unchanged)."""
    start, last = 34, 44
    rates = run(tmp_path, [*tick(2.0), f"trainer.max_steps={last}", "module.cooldown_steps=10"])
    assert max(rates) == last - 1  # update `last` is the run's last
    for step, lr in rates.items():  # `step` updates done: this is update step + 1's rate
        expected = paper(step + 1) * min(1.0, (last - step) / (last - start))
        assert lr == pytest.approx(expected, rel=1e-6), step


@pytest.mark.slow
def test_a_cooldown_longer_than_the_budget_is_refused(tmp_path):
    with pytest.raises(
        ValueError, match="timed_cooldown.minutes=2 must lie between 0 and the 1.66667"
    ):
        run(tmp_path, [*tick(2.0), "callbacks.timed_cooldown.minutes=2"])
