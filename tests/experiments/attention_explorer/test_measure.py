"""experiments/attention_explorer: each validation timed with the explorer's parts inside it."""

import time

import pytest

from experiments.attention_explorer import measure
from experiments.attention_explorer.validation_clock import Stopwatch
from helpers.quick_toy_run import quick_toy_run


class Owner:
    def work(self, seconds: float) -> float:
        time.sleep(seconds)
        return seconds


def test_the_stopwatch_sums_the_calls_by_name_and_puts_the_original_back():
    owner, stopwatch = Owner(), Stopwatch()
    original = owner.work
    with stopwatch.watching("work", owner, "work"):
        assert owner.work(0.02) == 0.02  # what the original returns
        owner.work(0.03)
    assert owner.work == original  # calls after the block are not timed
    assert stopwatch.seconds["work"] >= 0.05  # both calls, not the last one only
    stopwatch.reset()
    assert stopwatch.seconds == {}


def test_the_original_is_back_after_an_error_inside():
    owner, stopwatch = Owner(), Stopwatch()
    original = owner.work
    with pytest.raises(ValueError), stopwatch.watching("work", owner, "work"):
        owner.work(-1)
    assert owner.work == original


@pytest.mark.slow
def test_each_validation_is_timed_with_the_explorer_inside_only_where_it_ran(tmp_path):
    # The toy task on 1 validation batch, the attention callback kept; measure.py turns the
    # sanity check off itself.
    kept_out = {"~callbacks.attention_maps", "+trainer.num_sanity_val_steps=0"}
    toy = [o for o in quick_toy_run(max_steps=2) if o not in kept_out]
    validations = measure.validation_overhead(2, tmp_path, toy)

    assert [("explorer" in v) for v in validations] == list(measure.EXPLORER_ORDER)
    explorer_parts = ("beam search with trace", "teacher-forced passes", "data and page written")
    for explorer, record in zip(measure.EXPLORER_ORDER, validations, strict=True):
        assert 0 < record["heatmaps"] < record["validation"]
        if explorer:
            parts = [record[name] for name in explorer_parts]
            assert all(part > 0 for part in parts)
            assert sum(parts) <= record["explorer"] < record["validation"] - record["heatmaps"]
        else:
            assert not set(explorer_parts) & set(record)
    assert list(tmp_path.glob("run/attention/step*/explorer.html"))
    report = measure.overhead_report(validations)
    assert len(report) == len(validations) + 3  # a line each, two inside, one between
