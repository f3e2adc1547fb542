"""experiments/speed/benchmark.py: its batches, and ratios to the fastest reference by round."""

import numpy as np
import pytest

from helpers.scripts import load_script
from transformer_nmt.data.batching import ROUNDING_ALLOWANCE

TRAINING = "training bf16, target tokens/s"


@pytest.fixture(scope="module")
def bench():
    return load_script("experiments/speed/benchmark.py", "speed_benchmark")


def summary(bench, speeds: dict) -> list[list]:
    tables = bench.Tables()
    bench.summarize(speeds, tables)
    return tables.rows["summary"]


def test_a_machine_that_slows_between_rounds_leaves_the_ratio_alone(bench):
    # Round 2 runs at half the pace of round 1 for everyone: each round's ratio is 1.25.
    speeds = {
        ("small", "ours", TRAINING): [100.0, 50.0],
        ("small", "torch", TRAINING): [80.0, 40.0],
    }
    [row] = summary(bench, speeds)
    assert row[2:] == ["ours", "75.00", "torch", "60.00", "1.25x (1.25-1.25x over 2 rounds)"]


def test_each_round_is_compared_with_its_own_fastest_reference(bench):
    speeds = {
        ("base", "ours", TRAINING): [120.0, 120.0, 90.0],
        ("base", "torch", TRAINING): [100.0, 60.0, 60.0],
        ("base", "marian", TRAINING): [60.0, 80.0, 90.0],
    }
    [row] = summary(bench, speeds)
    # Rounds' ratios 1.2, 1.5, 1.0; the fastest by median speed is marian (80 against 60).
    assert row[2:] == ["ours", "120.00", "marian", "80.00", "1.20x (1.00-1.50x over 3 rounds)"]


def test_one_round_gives_the_plain_ratio_and_sizes_and_measures_stay_apart(bench):
    speeds = {
        ("small", "ours", TRAINING): [90.0],
        ("small", "torch", TRAINING): [60.0],
        ("base", "ours", TRAINING): [10.0],
        ("base", "torch", TRAINING): [20.0],
        ("small", "ours", "greedy, sentences/s"): [5.0],
    }
    rows = summary(bench, speeds)
    assert [(r[0], r[1], r[-1]) for r in rows] == [
        ("small", TRAINING, "1.50x"),
        ("base", TRAINING, "0.50x"),
    ]


def test_bf16_batches_round_as_the_data_module_does(bench):
    # Short pairs, many to a batch: rounding each side up to 8 would pass the budget's eighth.
    rng = np.random.default_rng(0)
    src, tgt = rng.integers(4, 17, size=3000), rng.integers(4, 17, size=3000)
    batches = bench.training_batches(src, tgt, vocab=100, count=20, precision="bf16")
    budget = bench.DATA.max_tokens * (1 + ROUNDING_ALLOWANCE)
    sides = [b[side].numel() for b in batches for side in ("src", "tgt_in")]
    assert bench.DATA.max_tokens < max(sides) <= budget
