import itertools

import pytest
from omegaconf import open_dict

from helpers.csv_metrics import logged
from helpers.hydra_compose import compose_train
from transformer_nmt.train import train
from transformer_nmt.training.step.lr_schedule import (
    LearningRate,
    cooldown_problem,
    cooldown_window,
    inverse_sqrt_warmup,
    linear_cooldown,
    timed_cooldown_problems,
    warmup_problem,
)


@pytest.mark.parametrize("step", [1, 10, 3999, 4000, 4001, 100_000])
def test_equals_the_papers_formula(step):
    # Section 5.3: lrate = d_model^-0.5 * min(step_num^-0.5, step_num * warmup_steps^-1.5)
    expected = 512**-0.5 * min(step**-0.5, step * 4000**-1.5)
    assert inverse_sqrt_warmup(step, 512, 4000) == pytest.approx(expected, rel=1e-12)


def test_peaks_at_the_end_of_warmup():
    rates = [inverse_sqrt_warmup(s, 512, 4000) for s in range(1, 20_000)]
    assert max(range(len(rates)), key=rates.__getitem__) + 1 == 4000
    assert rates[3999] == pytest.approx(512**-0.5 * 4000**-0.5)


def test_factor_scales_linearly():
    assert inverse_sqrt_warmup(123, 256, 1000, factor=2.0) == pytest.approx(
        2 * inverse_sqrt_warmup(123, 256, 1000)
    )


def test_no_warmup_starts_at_the_peak_and_decays_as_the_paper_after_its_warmup():
    assert inverse_sqrt_warmup(1, 512, 0) == pytest.approx(512**-0.5)
    for step in (4000, 10_000):  # past any warm-up, every length gives the same rate
        assert inverse_sqrt_warmup(step, 512, 0) == inverse_sqrt_warmup(step, 512, 4000)
    rates = [inverse_sqrt_warmup(step, 512, 0) for step in range(1, 100)]
    assert rates == sorted(rates, reverse=True)


@pytest.mark.parametrize("warmup", [-1, 2.5])
def test_a_warmup_of_no_count_is_named_with_zero_as_the_way_to_none(warmup):
    assert f"module.warmup_steps={warmup} must be a count" in warmup_problem(warmup)
    assert "or 0 for no warm-up" in warmup_problem(warmup)
    assert warmup_problem(0) is None and warmup_problem(4000) is None


def test_cooldown_takes_the_last_updates_linearly_to_zero():
    factors = [linear_cooldown(step, 100, 20) for step in range(1, 102)]
    assert factors[:81] == [1.0] * 81  # updates 1..81: untouched; update 81 starts the descent
    assert factors[99] == pytest.approx(1 / 20)  # the last update still moves the weights
    assert factors[100] == 0.0  # past trainer.max_steps
    descent = factors[80:100]
    assert all(a - b == pytest.approx(1 / 20) for a, b in itertools.pairwise(descent))


def test_no_cooldown_leaves_the_papers_schedule():
    assert {linear_cooldown(step, -1, 0) for step in (1, 4000, 10**6)} == {1.0}


@pytest.mark.parametrize("cooldown, max_steps", [(10, -1), (10, 5), (-1, 100)])
def test_a_cooldown_the_step_budget_cannot_hold_is_named(cooldown, max_steps):
    problem = cooldown_problem(cooldown, max_steps)
    assert f"module.cooldown_steps={cooldown}" in problem
    assert f"trainer.max_steps={max_steps}" in problem


def test_a_cooldown_within_the_budget_is_fine():
    assert cooldown_problem(0, -1) is None
    assert cooldown_problem(100, 100) is None


def test_the_window_fits_the_pace_into_what_is_left():
    assert cooldown_window(step=35, left=30.0, pace=0.5) == (50, 15)
    assert cooldown_window(step=30, left=30.0, pace=3 / 7) == (42, 12)  # floor: 12.86 updates
    assert cooldown_window(step=10, left=1.0, pace=0.1) == (11, 1)  # at least one


def test_the_rate_is_the_papers_times_the_windows_cooldown():
    rate = LearningRate(512, 4000, factor=2.0)
    assert [rate(step) for step in (1, 4000, 9000)] == [
        inverse_sqrt_warmup(step, 512, 4000, factor=2.0) for step in (1, 4000, 9000)
    ]
    rate.cool_down(100, 20)
    for step in (1, 81, 90, 100, 101):
        expected = inverse_sqrt_warmup(step, 512, 4000, 2.0) * linear_cooldown(step, 100, 20)
        assert rate(step) == expected
    assert rate(100) > 0 == rate(101)


def test_of_two_windows_the_one_ending_first_sets_the_rate():
    rate = LearningRate(512, 0)
    rate.cool_down(100, 20)  # a step budget's: updates 81 to 100
    rate.cool_down(90, 5)  # a time budget's, ending first: updates 86 to 90
    paper = [inverse_sqrt_warmup(step, 512, 0) for step in range(1, 101)]
    assert [rate(step) for step in (1, 80)] == [paper[0], paper[79]]
    assert rate(85) == pytest.approx(paper[84] * 16 / 20)  # only the step window has begun
    assert rate(86) == pytest.approx(paper[85] * 15 / 20)  # both: the step one is lower
    assert rate(89) == pytest.approx(paper[88] * 2 / 5)
    assert rate(90) > 0 == rate(91)


def test_a_timed_cooldown_names_its_setting_and_needs_a_time_budget():
    setting = "callbacks.timed_cooldown.minutes"
    assert timed_cooldown_problems(setting, 0, 10, None) == []  # off
    assert timed_cooldown_problems(setting, 5, 0, "00:01:00:00") == []
    # Beside a step cool-down: whichever budget ends first cools down.
    assert timed_cooldown_problems(setting, 5, 10, "00:01:00:00") == []
    for minutes, max_time in ((5, None), (-1, "00:01:00:00")):
        (problem,) = timed_cooldown_problems(setting, minutes, 0, max_time)
        assert problem.startswith(f"{setting}={minutes} needs a positive number of minutes")


def test_training_follows_the_cooldown_to_its_last_update(tmp_path):
    cfg = compose_train(
        tmp_path,
        [
            "experiment=toy", "logger=csv", "trainer.log_every_n_steps=1",
            "trainer.max_epochs=-1", "trainer.max_steps=12", "module.cooldown_steps=4",
            "+trainer.limit_val_batches=0", "+trainer.num_sanity_val_steps=0",
        ],
    )  # fmt: skip
    with open_dict(cfg):
        del cfg.hydra  # the CSV logger records the resolved config, but no sweep runs here
    train(cfg)

    rates = logged(tmp_path / "run", "train/lr")
    assert sorted(rates) == list(range(12))
    for step, lr in rates.items():  # `step` updates done: this is update step + 1's rate
        paper = inverse_sqrt_warmup(step + 1, 64, 50, factor=0.2)  # the toy's model and module
        expected = paper if step < 8 else paper * (12 - step) / 4
        assert lr == pytest.approx(expected, rel=1e-6), step


def test_training_without_warmup_takes_the_peak_rate_from_its_first_update(tmp_path):
    cfg = compose_train(
        tmp_path,
        [
            "experiment=toy", "logger=csv", "trainer.log_every_n_steps=1", "module.warmup_steps=0",
            "trainer.max_epochs=-1", "trainer.max_steps=2", "+trainer.limit_val_batches=0",
            "+trainer.num_sanity_val_steps=0",
        ],
    )  # fmt: skip
    with open_dict(cfg):
        del cfg.hydra
    train(cfg)
    rates = logged(tmp_path / "run", "train/lr")
    assert rates[0] == pytest.approx(0.2 * 64**-0.5, rel=1e-6)  # the toy's factor and d_model
    assert rates[1] == pytest.approx(0.2 * 64**-0.5 * 2**-0.5, rel=1e-6)
